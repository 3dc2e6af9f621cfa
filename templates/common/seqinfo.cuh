// Where one batch entry's rows start and how many there are, for padded and ragged batches.
#pragma once

#include "common/params.cuh"
#include "common/types.cuh"

namespace flashjit {

struct SeqInfo {
  int q_start;   // first row of this batch entry along the row axis (0 unless ragged)
  int k_start;
  int seqlen_q;
  int seqlen_k;

  template <bool kVarlen>
  __device__ __forceinline__ static SeqInfo make(const AttentionParams& p, int batch) {
    SeqInfo s;
    if constexpr (kVarlen) {
      s.q_start = p.cu_seqlens_q[batch];
      s.k_start = p.cu_seqlens_k[batch];
      s.seqlen_q = p.cu_seqlens_q[batch + 1] - s.q_start;
      s.seqlen_k = p.cu_seqlens_k[batch + 1] - s.k_start;
    } else {
      s.q_start = 0;
      s.k_start = 0;
      s.seqlen_q = p.seqlen_q;
      s.seqlen_k = p.seqlen_k;
    }
    return s;
  }

  // Offset (in elements) of row `row` of this entry, head `head`, column 0, in a tensor.
  template <bool kVarlen>
  __device__ __forceinline__ static i64 offset(const TensorArg& t, int batch, int start, int row,
                                               int head) {
    i64 b = kVarlen ? 0 : i64(batch) * t.batch_stride;
    return b + i64(start + row) * t.row_stride + i64(head) * t.head_stride;
  }
};

// Element offset of (batch, head, row) in the LSE (and per-token scale) layout.
template <bool kVarlen>
__device__ __forceinline__ i64 lse_offset(const AttentionParams& p, int batch, int head,
                                          int start, int row) {
  return (kVarlen ? 0 : i64(batch) * p.lse_batch_stride) + i64(head) * p.lse_head_stride +
         (start + row);
}

}  // namespace flashjit
