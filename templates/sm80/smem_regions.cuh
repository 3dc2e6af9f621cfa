// Where each region of the sm80 kernel's dynamic shared memory starts, as constexpr arithmetic
// on plain ints shared by the generator (tile budgets, the size the runtime allocates) and the
// kernel's SmemLayout. Plain C++ (no CUDA headers), like params.cuh.
//   Q                 BM x dqk
//   K[stages]         BN x dqk each
//   V[stages]         BN x dv each
//   softmax sums      32-row warps: each lane's running sums (softmax.cuh), 16 B per row
//   O (epilogue)      BM x dv, from 0 over Q/K/V/stats once the stats are read
// Tiles hold the mma.sync operand type, 16-bit, whatever the inputs are stored in.
#pragma once

#include "common/host_device.cuh"

namespace flashjit::sm80 {

inline constexpr int kSmemElementBytes = 2;

struct SmemShape {
  int block_m, block_n, head_dim_qk, head_dim_v, warps, stages;
};

struct SmemRegions {
  int q_offset, k_offset, k_stage_bytes, v_offset, v_stage_bytes;
  int stats_offset, stats_bytes;
  int o_offset, o_bytes;
  int total;
};

FLASHJIT_HOST_DEVICE constexpr SmemRegions smem_regions(SmemShape s) {
  SmemRegions r{};
  const int e = kSmemElementBytes;
  r.q_offset = 0;
  r.k_offset = r.q_offset + s.block_m * s.head_dim_qk * e;
  r.k_stage_bytes = s.block_n * s.head_dim_qk * e;
  r.v_offset = r.k_offset + s.stages * r.k_stage_bytes;
  r.v_stage_bytes = s.block_n * s.head_dim_v * e;
  r.stats_offset = r.v_offset + s.stages * r.v_stage_bytes;
  r.stats_bytes = s.block_m / s.warps == 32 ? s.block_m * 16 : 0;
  r.o_offset = 0;
  r.o_bytes = s.block_m * s.head_dim_v * e;
  const int main_loop = r.stats_offset + r.stats_bytes;
  r.total = main_loop > r.o_offset + r.o_bytes ? main_loop : r.o_offset + r.o_bytes;
  return r;
}

}  // namespace flashjit::sm80
