// Where each region of the shared-K/V (latent) decode split kernel's dynamic shared memory
// starts, as constexpr arithmetic on plain ints shared by the generator (tile budgets) and the
// kernel (latent_split.cuh), and which tile chunk each warp of an fp8 cache's pass reads
// (fp8_latent_chunk, checked on the host). Plain C++. Tiles of 16-bit units, swizzled like the sm80 tiles:
//   Q           BM x dqk (nope columns, then the rope part; an fp8 cache's Q nope dequantised
//               to fp16)
//   KV[stages]  BN rows each: a key row's nope columns (whose first dv are its V row), in the
//               cache's type (nope_bytes: 2, or 1 for fp8), and its 16-bit rope columns, one tile
//               feeding both GEMMs
//   rows[stages] each key row's element offsets in K and in the rope tensor (two int64, -1:
//               zero-fill) for the tile in flight to each ring stage
//   exchange    each warp's partial scores (16 x BN fp32, in fragment order): the warps of a row
//               block split the head dim of Q K^T and add their parts. One slot is enough: the
//               ring's barrier between two tiles' math separates a tile's reads from the next
//               tile's writes. With tuning.swap_qk: the tile's scores S[row][key] (BN + 8 floats
//               a row), which the warpgroups' S^T = K Q^T accumulators are written into
//   key scales[stages + 1]  per-token K scales (fp32) of each key row of an fp8 cache, when the
//               config has them: one slot more than the ring, as in smem_regions.cuh; per-block
//               scales (scales.k_block) [block][key row] in each slot
//   flag        16 bytes: set when a page-table entry named no page of the cache
// The seesaw pass (latent_seesaw.cuh, TMA loads: `seesaw`) keeps no row offsets and no
// exchange; in their place:
//   P[2]        each warpgroup's probabilities of its latest tile (16-bit, in register order:
//               [register][128 threads] of 32-bit words), which the other warpgroup multiplies
//               by its own V columns
//   stats[3][2] per warpgroup slot, each row's running max, the tile's rescale factor, and at the
//               end its share of the row sum (fp32, BM each)
//   barriers    mbarriers: full[stages][64-column panels] (a 16-bit cache's tile uses the
//               first of its stage's), empty[stages], P ready[2], P free[2], row sums ready; an
//               fp8 cache's also staged[stages]
// An fp8 cache on the seesaw pass keeps its stages 16-bit (the nope columns dequantised into fp16
// there, scales applied, by the loader warpgroup) and lands a tile's fp8 nope columns by TMA in
// its own stage: each 128-column fp8 panel (BN x 128 bytes) in the second of the two 64-column
// fp16 panels it becomes, which each key row's loader lane reads whole before writing it over
// (latent_seesaw.cuh). No shared memory beyond the 16-bit pass's, so as many stages.
#pragma once

#include "common/host_device.cuh"

namespace flashjit::decode {

// With tuning.swap_qk the exchange holds the whole tile's scores once, S[row][key] in rows of
// BN + 8 floats: the warps' reads of their fragments (a float2 of rows g at keys 2t) then fall on
// distinct banks.
constexpr int kSwapExchangePad = 8;

struct LatentShape {
  int block_m, block_n, head_dim_qk, warps, stages;
  bool seesaw = false;  // the seesaw pass: warpgroups take alternate tiles, loaded by TMA
  int head_dim_rope = 0;
  int nope_bytes = 2;       // bytes of a nope element: 1 for an fp8 cache (its rope part is 16-bit)
  bool key_scales = false;  // per-token K scales
  int key_scale_blocks = 1;  // per-token K scales of each key row (scales.k_block: one per block)
  bool swap_qk = false;      // S^T = K Q^T by a wgmma warpgroup per 16 rows (tuning.swap_qk)
};

struct LatentRegions {
  int q_offset, kv_offset, kv_stage_bytes;
  int rows_offset, rows_slot_bytes;
  int exchange_offset, exchange_slot_bytes;
  int key_scale_offset, key_scale_slot_bytes;
  int p_offset, p_slot_bytes;  // the seesaw pass's regions (0 otherwise)
  int stats_offset;
  int barrier_offset;
  int flag_offset;
  int total;
};

FLASHJIT_HOST_DEVICE constexpr LatentRegions latent_regions(LatentShape s) {
  LatentRegions r{};
  r.q_offset = 0;
  r.kv_offset = s.block_m * s.head_dim_qk * 2;
  const int nope = s.head_dim_qk - s.head_dim_rope;
  r.kv_stage_bytes = s.block_n * (nope * (s.seesaw ? 2 : s.nope_bytes) + s.head_dim_rope * 2);
  r.rows_offset = r.kv_offset + s.stages * r.kv_stage_bytes;
  if (s.seesaw) {
    r.rows_slot_bytes = r.exchange_offset = r.exchange_slot_bytes = 0;
    r.p_offset = r.rows_offset;
    r.p_slot_bytes = s.block_m * s.block_n * 2;
    r.stats_offset = r.p_offset + 2 * r.p_slot_bytes;
    r.barrier_offset = r.stats_offset + 3 * 2 * s.block_m * 4;
    r.flag_offset = (r.barrier_offset + (s.stages * (s.head_dim_qk / 64 + (s.nope_bytes == 1 ? 2 : 1)) + 5) * 8 + 15) / 16 * 16;
    r.total = r.flag_offset + 16;
    return r;
  }
  r.rows_slot_bytes = s.block_n * 2 * 8;
  r.exchange_offset = r.rows_offset + s.stages * r.rows_slot_bytes;
  r.exchange_slot_bytes = s.swap_qk ? s.block_m * (s.block_n + kSwapExchangePad) * 4 : s.warps * 16 * s.block_n * 4;
  r.key_scale_offset = r.exchange_offset + r.exchange_slot_bytes;
  r.key_scale_slot_bytes = s.key_scales ? s.key_scale_blocks * s.block_n * 4 : 0;
  r.flag_offset = (r.key_scale_offset + (s.stages + 1) * r.key_scale_slot_bytes + 15) / 16 * 16;
  r.total = r.flag_offset + 16;
  return r;
}

// An fp8 latent cache on mma.sync (latent_split.cuh): the chunk (16 columns, one k-step of the
// nope part, or 8 of the rope part's) that warp wn of warps_n reads as chunk h of its j-th
// ldmatrix pair. The pair's chunks sit at 2 warps_n j in every warp's addressing and the lane
// address XORs 2 wn into the chunk bits within a 128-byte panel, so K's ldmatrix reads this
// chunk and Q's fragments are loaded from the same one.
FLASHJIT_HOST_DEVICE constexpr int fp8_latent_chunk(int j, int h, int wn, int warps_n) {
  return ((2 * warps_n * j) ^ (2 * wn)) + h;
}

}  // namespace flashjit::decode
