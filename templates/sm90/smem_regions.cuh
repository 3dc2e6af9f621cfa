// Where each region of the sm90 kernel's dynamic shared memory starts, as constexpr arithmetic
// on plain ints: the generator includes this to size tiles against the shared-memory budget and
// to tell the runtime how much to allocate, and the kernel's SmemLayout takes its offsets from
// the same function, so the two cannot disagree. Plain C++ (no CUDA headers), like params.cuh.
//   Q     q_stages x BM x dqk (two: the next tile's Q loads while this tile runs)
//   K     stages x BN x dqk
//         (a rope part in its own tensors fills the panels after the nope part's, in its own
//         16-bit type beside fp8 nope columns: rows of nope x element bytes + rope x 2)
//   V     stages x BN x dv
//   Vt    stages x vt_rows(dv) x BN (fp8 only: V transposed to K-major, the only B layout 8-bit
//         wgmma reads; keys in 128-byte panels, a last one of 64-byte rows where BN leaves 64
//         keys, partly used where it leaves 32 or 96; after V's dv rows, 8 rows of ones where
//         wgmma's N has room, below)
//   O     o_slabs x 64 x dv of the output type, the sources of the consumers' TMA stores
//   Ks    stages x BN fp32: per-token K scales of each K stage's keys (scales.k per_token; the
//         seeds' k_scale region), written by the producer warp beside the stage's TMA
//   1 KB  mbarriers (first 512 B) and the dynamic scheduler's tile-index slots
// Tiles start 1 KB aligned: 128-byte-swizzled TMA boxes repeat their pattern every 8 rows.
#pragma once

#include "common/host_device.cuh"

namespace flashjit::sm90 {

struct SmemShape {
  int block_m, block_n, head_dim_qk, head_dim_v;
  int element_bytes, out_bytes;
  int kv_stages, q_stages;
  int o_slabs;  // 0: O is written from registers
  bool transpose_v = false;
  int head_dim_rope = 0, rope_bytes = 2;  // the rope part's columns (of head_dim_qk) and their bytes
  bool key_scales = false;                 // per-token K scales
};

struct SmemRegions {
  int q_stage_bytes, k_stage_bytes, v_stage_bytes, vt_stage_bytes, o_slab_bytes;  // stage strides (aligned)
  int q_offset, k_offset, v_offset, vt_offset, o_offset, key_scale_offset, barrier_offset, tile_slot_offset;
  int total;
};

inline constexpr int kSmemTileAlign = 1024;
inline constexpr int kSmemBarrierBytes = 1024;

// Vt's rows per 128-key panel: V's dv columns, then kVtSumRows rows of ones where P V's wgmma
// can be that much wider (dv + 8 <= 256): its extra columns of O are then each row's sum of the
// tile's probabilities as P V quantised them, so the consumers add no row sums themselves.
inline constexpr int kVtSumRows = 8;
FLASHJIT_HOST_DEVICE constexpr bool vt_sums_rows(int head_dim_v) { return head_dim_v + kVtSumRows <= 256; }
FLASHJIT_HOST_DEVICE constexpr int vt_rows(int head_dim_v) {
  return head_dim_v + (vt_sums_rows(head_dim_v) ? kVtSumRows : 0);
}
// Vt's key panels, vt_panel_bytes apart: rows of 128 keys (bytes), 128-byte swizzled, and where
// BN leaves 64 keys over (BN 64, 192) a last panel of 64-byte rows, 64-byte swizzled, rather
// than half-empty rows (32 or 96 keys over: a partly used 128-byte panel).
FLASHJIT_HOST_DEVICE constexpr int vt_key_panels(int block_n) { return (block_n + 127) / 128; }
FLASHJIT_HOST_DEVICE constexpr int vt_row_bytes(int block_n, int panel) {
  return block_n % 128 == 64 && panel == block_n / 128 ? 64 : 128;
}
FLASHJIT_HOST_DEVICE constexpr int vt_panel_bytes(int head_dim_v) { return vt_rows(head_dim_v) * 128; }
FLASHJIT_HOST_DEVICE constexpr int vt_stage_bytes(int block_n, int head_dim_v) {
  const int last = vt_key_panels(block_n) - 1;
  return last * vt_panel_bytes(head_dim_v) + vt_rows(head_dim_v) * vt_row_bytes(block_n, last);
}

FLASHJIT_HOST_DEVICE constexpr int smem_align(int bytes) {
  return (bytes + kSmemTileAlign - 1) / kSmemTileAlign * kSmemTileAlign;
}

FLASHJIT_HOST_DEVICE constexpr SmemRegions smem_regions(SmemShape s) {
  SmemRegions r{};
  const int qk_row_bytes = (s.head_dim_qk - s.head_dim_rope) * s.element_bytes + s.head_dim_rope * s.rope_bytes;
  r.q_stage_bytes = smem_align(s.block_m * qk_row_bytes);
  r.k_stage_bytes = smem_align(s.block_n * qk_row_bytes);
  r.v_stage_bytes = smem_align(s.block_n * s.head_dim_v * s.element_bytes);
  r.vt_stage_bytes = s.transpose_v ? smem_align(vt_stage_bytes(s.block_n, s.head_dim_v)) : 0;
  r.o_slab_bytes = 64 * s.head_dim_v * s.out_bytes;
  r.q_offset = 0;
  r.k_offset = r.q_offset + s.q_stages * r.q_stage_bytes;
  r.v_offset = r.k_offset + s.kv_stages * r.k_stage_bytes;
  r.vt_offset = r.v_offset + s.kv_stages * r.v_stage_bytes;
  r.o_offset = r.vt_offset + s.kv_stages * r.vt_stage_bytes;
  r.key_scale_offset = r.o_offset + s.o_slabs * r.o_slab_bytes;
  r.barrier_offset = r.key_scale_offset + (s.key_scales ? smem_align(s.kv_stages * s.block_n * 4) : 0);
  r.tile_slot_offset = r.barrier_offset + 512;
  r.total = r.barrier_offset + kSmemBarrierBytes;
  return r;
}

}  // namespace flashjit::sm90
