// The decode family's combine pass: merges the splits' partial outputs (split_kv.cuh) into O
// and the LSE. One CTA per (query row, query head) (combine_shape.cuh): with the splits' LSEs
// l_s, M = max l_s, w_s = exp(l_s - M), O = sum w_s O_s / sum w_s, LSE = M + log(sum w_s). A row
// no split saw a key of gets O = 0 and LSE = -inf; a NaN in any split (a bad page-table entry)
// makes the row NaN. On sm_90+ the pass is launched as a programmatic dependent of the split
// pass, so its CTAs are resident when the splits finish; griddepcontrol.wait holds them until
// the split pass has completed and its writes are visible.
#pragma once

#include "common/params.cuh"
#include "common/seqinfo.cuh"
#include "common/types.cuh"
#include "decode/combine_shape.cuh"

namespace flashjit::decode {

// Block-wide reduction of one float (max or sum) over kCombineThreads threads.
template <bool kMax>
__device__ __forceinline__ float combine_reduce(float v, float* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float x = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, x) : v + x;
  }
  const int warp = int(threadIdx.x) / 32;
  __syncthreads();  // scratch is free (an earlier reduction's readers are done)
  if (threadIdx.x % 32 == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
#pragma unroll
  for (int w = 1; w < kCombineThreads / 32; ++w) v = kMax ? fmaxf(v, scratch[w]) : v + scratch[w];
  return v;
}

template <class T>
__device__ void combine(const AttentionParams& p) {
  using OE = typename T::OutElement;
  constexpr int kDV = T::kHeadDimV;
  constexpr int kChunks = combine_chunks(kDV), kSlices = combine_slices(kDV);
  static_assert(kDV % 8 == 0 && kChunks <= kCombineThreads, "rows of whole 8-column chunks, one thread each");
  __shared__ float scratch[kCombineThreads / 32];
  __shared__ __align__(16) float partial[kSlices > 1 ? kSlices - 1 : 1][kDV];
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const int tid = int(threadIdx.x);
  const long long item = blockIdx.x;  // row * heads_q + head
  const int row = int(item / p.heads_q), head = int(item % p.heads_q);
  const int splits = p.num_splits;
  const long long stride = (long long)p.rows_q * p.heads_q;  // slots per split
  const float* lse_of = p.partial_lse + item;                // split s at lse_of[s * stride]

  float mx = neg_inf();
  bool nan = false;
  for (int s = tid; s < splits; s += kCombineThreads) {
    const float l = lse_of[s * stride];
    nan |= l != l;
    mx = fmaxf(mx, l);
  }
  nan = __syncthreads_or(nan);
  mx = combine_reduce<true>(mx, scratch);
  const float mx_safe = mx == neg_inf() ? 0.f : mx;
  float sum = 0.f;
  for (int s = tid; s < splits; s += kCombineThreads) sum += expf(lse_of[s * stride] - mx_safe);
  sum = combine_reduce<false>(sum, scratch);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;

  // This thread's chunk of every kSlices-th split, from its slice on; four splits' loads at once.
  const int c = tid % kChunks, slice = tid / kChunks;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (slice < kSlices) {
#pragma unroll 4
    for (int s = slice; s < splits; s += kSlices) {
      const float w = expf(lse_of[s * stride] - mx_safe) * inv;
      if (w == 0.f) continue;  // also every split of a row without keys
      const float4* src = reinterpret_cast<const float4*>(p.partial_o + (s * stride + item) * kDV) + 2 * c;
      const float4 x = src[0], y = src[1];
      acc[0] += w * x.x;
      acc[1] += w * x.y;
      acc[2] += w * x.z;
      acc[3] += w * x.w;
      acc[4] += w * y.x;
      acc[5] += w * y.y;
      acc[6] += w * y.z;
      acc[7] += w * y.w;
    }
  }
  if constexpr (kSlices > 1) {  // slices 1.. hand their sums to slice 0
    if (slice >= 1 && slice < kSlices)
#pragma unroll
      for (int e = 0; e < 8; ++e) partial[slice - 1][8 * c + e] = acc[e];
    __syncthreads();
    if (slice == 0)
      for (int q = 0; q < kSlices - 1; ++q)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] += partial[q][8 * c + e];
  }
  if (slice != 0) return;

  const float nan_value = __int_as_float(0x7fc00000);
  if (nan)
    for (float& a : acc) a = nan_value;
  // The row's place in O and the LSE: packed rows when ragged, else b * seqlen_q + s.
  const int b = T::kVarlen ? 0 : row / p.seqlen_q;
  const int s_row = T::kVarlen ? row : row % p.seqlen_q;
  OE* out = static_cast<OE*>(const_cast<void*>(p.o.ptr)) + SeqInfo::offset<T::kVarlen>(p.o, b, 0, s_row, head);
  *reinterpret_cast<uint4*>(out + 8 * c) = make_uint4(pack2<OE>(acc[0], acc[1]), pack2<OE>(acc[2], acc[3]),
                                                      pack2<OE>(acc[4], acc[5]), pack2<OE>(acc[6], acc[7]));
  if (T::kWriteLse && p.lse != nullptr && tid == 0)
    p.lse[lse_offset<T::kVarlen>(p, b, head, 0, s_row)] =
        nan ? nan_value : sum > 0.f ? mx_safe + logf(sum) : neg_inf();
}

}  // namespace flashjit::decode
