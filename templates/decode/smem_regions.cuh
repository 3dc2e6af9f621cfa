// Where each region of the decode split kernel's dynamic shared memory starts, as constexpr
// arithmetic on plain ints shared by the generator (tile budgets) and the kernel. Plain C++.
//   Q          BM x dqk (16-bit, swizzled like the sm80 tiles; fp8 caches: Q widened to fp16)
//   K[stages]  BN x dqk each, in the cache's element type (kv_bytes: 2, or 1 for fp8)
//   V[stages]  BN x dv each
//   rows[stages] each key row's element offsets in K and V (two int64, -1: zero-fill) for the
//              tile in flight to each ring stage: computed once per row a tile ahead, from a
//              page-table entry read a tile before that, so no thread waits on a page-table read
//   key scales[stages + 1]  per-token K scales (fp32) of each key row, when the config has them:
//              one slot more than the ring, since the slot written for tile i + stages is not
//              the one tile i is still reading (i's offsets are done with, its scales are not)
//   value scales[stages + 1]  per-token V scales of each key row, the same way
//              (TMA loads, kv_tma: no row offsets; the issuing lanes hold their pages' entries)
//   merge      after the last tile, from 0 over the above: each warp's fp32 O (16 x dv) and its
//              rows' running max and sum, which the CTA merges across the warps that split keys
//   barriers   past both (kv_tma): one mbarrier per ring stage, on which its TMA boxes complete
//   flag       16 bytes past those: set when a page-table entry named no page of the cache
#pragma once

#include "common/host_device.cuh"

namespace flashjit::decode {

struct SmemShape {
  int block_m, block_n, head_dim_qk, head_dim_v, warps, stages;
  int kv_bytes = 2;        // bytes of one K/V element
  bool key_scales = false;  // per-token K scales
  bool kv_tma = false;      // K/V tiles arrive as TMA boxes
  bool value_scales = false;  // per-token V scales
};

struct SmemRegions {
  int q_offset, k_offset, k_stage_bytes, v_offset, v_stage_bytes;
  int rows_offset, rows_slot_bytes;
  int key_scale_offset, key_scale_slot_bytes;
  int value_scale_offset, value_scale_slot_bytes;
  int merge_o_offset, merge_stats_offset;
  int barrier_offset;
  int flag_offset;
  int total;
};

FLASHJIT_HOST_DEVICE constexpr SmemRegions smem_regions(SmemShape s) {
  SmemRegions r{};
  r.q_offset = 0;
  r.k_offset = s.block_m * s.head_dim_qk * 2;
  r.k_stage_bytes = s.block_n * s.head_dim_qk * s.kv_bytes;
  r.v_offset = r.k_offset + s.stages * r.k_stage_bytes;
  r.v_stage_bytes = s.block_n * s.head_dim_v * s.kv_bytes;
  r.rows_offset = r.v_offset + s.stages * r.v_stage_bytes;
  r.rows_slot_bytes = s.kv_tma ? 0 : s.block_n * 2 * 8;
  r.key_scale_offset = r.rows_offset + s.stages * r.rows_slot_bytes;
  r.key_scale_slot_bytes = s.key_scales ? s.block_n * 4 : 0;
  r.value_scale_offset = r.key_scale_offset + (s.stages + 1) * r.key_scale_slot_bytes;
  r.value_scale_slot_bytes = s.value_scales ? s.block_n * 4 : 0;
  const int main_loop = r.value_scale_offset + (s.stages + 1) * r.value_scale_slot_bytes;
  r.merge_o_offset = 0;
  r.merge_stats_offset = s.warps * 16 * s.head_dim_v * 4;
  const int merge = r.merge_stats_offset + s.warps * 16 * 2 * 4;
  r.barrier_offset = ((main_loop > merge ? main_loop : merge) + 15) / 16 * 16;
  r.flag_offset = r.barrier_offset + (s.kv_tma ? (s.stages * 8 + 15) / 16 * 16 : 0);
  r.total = r.flag_offset + 16;
  return r;
}

}  // namespace flashjit::decode
