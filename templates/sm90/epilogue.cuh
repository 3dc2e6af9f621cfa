// Writing a consumer warpgroup's 64 output rows. With fixed-length batches the rows are staged
// in shared memory (over the warpgroup's own Q rows, 128-byte swizzled like the TMA box) and
// written by TMA stores, which clip rows past the sequence end. Ragged batches pack sequences
// back to back, where a tile's tail rows belong to the next sequence, so rows are written from
// registers with a bound check instead.
#pragma once

#include "common/params.cuh"
#include "common/seqinfo.cuh"
#include "sm90/ptx.cuh"

namespace flashjit::sm90 {

// Swizzled byte offset of (row, 16-bit column pair start `col`) inside a 128-byte-row panel.
__device__ __forceinline__ u32 swizzled_offset(int row, int col_in_panel) {
  const int byte = col_in_panel * 2;
  const int chunk = (byte >> 4) ^ (row & 7);
  return row * 128 + (chunk << 4) + (byte & 15);
}

template <class T, int kRegs>
__device__ __forceinline__ void store_o_smem(const float (&o)[kRegs], u32 wg_rows_base,
                                             int panel_stride) {
  using Out = typename T::OutElement;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  const int r0 = 16 * warp + (lane >> 2);
#pragma unroll
  for (int j = 0; j < kRegs / 4; ++j) {
    const int col = 8 * j + 2 * (lane & 3);
    const int panel = col / 64, c = col % 64;
    const u32 panel_base = wg_rows_base + panel * panel_stride;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const u32 v = pack2<Out>(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
      const u32 addr = panel_base + swizzled_offset(r0 + 8 * h, c);
      asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
    }
  }
}

template <class T, int kRegs>
__device__ __forceinline__ void store_o_global(const float (&o)[kRegs], const AttentionParams& p,
                                               int batch, int head, const SeqInfo& s, int row_base) {
  using Out = typename T::OutElement;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  const int r0 = row_base + 16 * warp + (lane >> 2);
  Out* base = static_cast<Out*>(const_cast<void*>(p.o.ptr));
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = r0 + 8 * h;
    if (row >= s.seqlen_q) continue;
    Out* dst = base + SeqInfo::offset<T::kVarlen>(p.o, batch, s.q_start, row, head);
#pragma unroll
    for (int j = 0; j < kRegs / 4; ++j) {
      const int col = 8 * j + 2 * (lane & 3);
      *reinterpret_cast<u32*>(dst + col) = pack2<Out>(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
    }
  }
}

}  // namespace flashjit::sm90
