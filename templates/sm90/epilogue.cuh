// Writing a consumer warpgroup's 64 output rows. Two ways:
//  - stage_o_smem: stmatrix into a swizzled shared-memory slab that one thread then hands to a
//    TMA store, so the warps go on to the next tile after a few hundred cycles. TMA clips rows
//    past the sequence end, which only holds when every batch entry has its own row extent, so
//    ragged batches do not use it.
//  - store_o_global: 16-byte global stores straight from the accumulators with a bound check on
//    the sequence end (ragged batches pack sequences back to back, so a tile's tail rows may
//    belong to the next one).
//
// A wgmma accumulator gives each lane of a quad 2 adjacent columns of every 8-column group. The
// quad transposes its words by shuffles so each lane owns 8 whole columns and writes them as one
// 16-byte store: a quarter of the store instructions, and full 32-byte sectors. With 4-byte
// stores the epilogue took 1.4-1.8 us per d128 tile on the H200, as long as a 128x176 block.
#pragma once

#include "common/params.cuh"
#include "common/seqinfo.cuh"
#include "sm90/ptx.cuh"

namespace flashjit::sm90 {

// w[t] holds this lane's columns 8t + 2q, 8t + 2q + 1 of a 32-column group (q = lane % 4). On
// return w[t] holds columns 8q + 2t, 8q + 2t + 1: lane q owns the group's columns 8q .. 8q + 7.
__device__ __forceinline__ void quad_transpose(u32 (&w)[4], int lane) {
  const bool hi = lane & 2, odd = lane & 1;
  // Exchange with lane ^ 2: keep the column pair whose high bit matches ours, send the other.
  u32 k0 = hi ? w[2] : w[0], k1 = hi ? w[3] : w[1];
  u32 r0 = __shfl_xor_sync(0xffffffffu, hi ? w[0] : w[2], 2);
  u32 r1 = __shfl_xor_sync(0xffffffffu, hi ? w[1] : w[3], 2);
  // Now: k0/k1 = our rows' columns (2h, 2h+1), r0/r1 = lane^2's; h = hi. Exchange with lane ^ 1.
  u32 a = odd ? k1 : k0, b = odd ? r1 : r0;                      // kept: column 2h + odd
  u32 sa = __shfl_xor_sync(0xffffffffu, odd ? k0 : k1, 1);       // lane^1's value of our column
  u32 sb = __shfl_xor_sync(0xffffffffu, odd ? r0 : r1, 1);
  // Sources: a = lane q, sa = lane q^1, b = lane q^2, sb = lane q^3; w[t] takes lane t's word,
  // i.e. lane q ^ x with x = t ^ q. Selects, since w[q ^ x] (a lane-dependent register index)
  // would go to local memory: bit 0 of x picks {sa, sb} over {a, b}, bit 1 {b, sb} over {a, sa}.
  const u32 a0 = odd ? sa : a, a1 = odd ? a : sa, b0 = odd ? sb : b, b1 = odd ? b : sb;
  w[0] = hi ? b0 : a0;
  w[1] = hi ? b1 : a1;
  w[2] = hi ? a0 : b0;
  w[3] = hi ? a1 : b1;
}

// The slab is the TMA box {64 columns, 64 rows, dv / 64 panels} with 128-byte swizzle: row r's
// 16-byte chunk c of a panel sits at chunk c ^ (r % 8). Each stmatrix writes 16 rows x 16 columns.
template <class T, int kRegs>
__device__ __forceinline__ void stage_o_smem(const float (&o)[kRegs], u32 slab) {
  using Out = typename T::OutElement;
  static_assert(sizeof(Out) == 2 && kRegs % 8 == 0, "16-bit output, 16-column steps");
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  // This lane addresses row (lane % 8) of matrix lane / 8: matrices are (rows +0, cols +0),
  // (rows +8, cols +0), (rows +0, cols +8), (rows +8, cols +8).
  const int row = 16 * warp + 8 * ((lane >> 3) & 1) + (lane & 7);
  const int chunk_step = lane >> 4;
  const u32 row_addr = slab + row * 128;
#pragma unroll
  for (int j = 0; j < kRegs / 4; j += 2) {  // 8-column groups j and j + 1
    const int chunk = j + chunk_step;
    const u32 addr = row_addr + (chunk / 8) * (64 * 128) + (((chunk % 8) ^ (row & 7)) << 4);
    stmatrix_x4(addr, pack2<Out>(o[4 * j], o[4 * j + 1]), pack2<Out>(o[4 * j + 2], o[4 * j + 3]),
                pack2<Out>(o[4 * j + 4], o[4 * j + 5]), pack2<Out>(o[4 * j + 6], o[4 * j + 7]));
  }
}

template <class T, int kRegs>
__device__ __forceinline__ void store_o_global(const float (&o)[kRegs], const AttentionParams& p,
                                               int batch, int head, const SeqInfo& s, int row_base) {
  using Out = typename T::OutElement;
  static_assert(kRegs % 16 == 0, "the quad transpose works on 32-column groups");
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  const int r0 = row_base + 16 * warp + (lane >> 2);
  Out* base = static_cast<Out*>(const_cast<void*>(p.o.ptr));
  // Every word is packed and transposed before the first store: a store holds its source
  // registers until the memory pipe has read them, and reusing them stalled the epilogue.
  u32 w[2][kRegs / 16][4];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int g = 0; g < kRegs / 16; ++g) {
#pragma unroll
      for (int t = 0; t < 4; ++t)
        w[h][g][t] = pack2<Out>(o[16 * g + 4 * t + 2 * h], o[16 * g + 4 * t + 2 * h + 1]);
      quad_transpose(w[h][g], lane);  // every lane takes part, also those past the sequence end
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = r0 + 8 * h;
    if (row >= s.seqlen_q) continue;
    Out* dst = base + SeqInfo::offset<T::kVarlen>(p.o, batch, s.q_start, row, head) + 8 * (lane & 3);
#pragma unroll
    for (int g = 0; g < kRegs / 16; ++g)
      *reinterpret_cast<uint4*>(dst + 32 * g) = make_uint4(w[h][g][0], w[h][g][1], w[h][g][2], w[h][g][3]);
  }
}

}  // namespace flashjit::sm90
