// Writing a consumer warpgroup's 64 output rows straight from the wgmma accumulators, with a
// bound check on the sequence end (ragged batches pack sequences back to back, so a tile's tail
// rows may belong to the next one). Going through registers rather than a shared-memory stage
// and a TMA store keeps Q's buffer free: the producer loads the next tile's Q while this tile
// finishes. Each quad of lanes writes 16 contiguous bytes of a row; L2 merges the rest.
#pragma once

#include "common/params.cuh"
#include "common/seqinfo.cuh"
#include "sm90/ptx.cuh"

namespace flashjit::sm90 {

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
