// The decode family's combine pass: merges the splits' partial outputs (split_kv.cuh) into O
// and the LSE. One warp per (query row, query head): with the splits' LSEs l_s, M = max l_s,
// w_s = exp(l_s - M), O = sum w_s O_s / sum w_s, LSE = M + log(sum w_s). A row no split saw a key
// of gets O = 0 and LSE = -inf; a NaN in any split (a bad page-table entry) makes the row NaN.
#pragma once

#include "common/params.cuh"
#include "common/seqinfo.cuh"
#include "common/types.cuh"

namespace flashjit::decode {

inline constexpr int kCombineWarps = 4;

template <class T>
__device__ void combine(const AttentionParams& p) {
  using OE = typename T::OutElement;
  constexpr int kDV = T::kHeadDimV;
  constexpr int kChunks = kDV / 4;  // float4 chunks of a row
  static_assert(kDV % 8 == 0, "rows of whole 8-column chunks");
  const int lane = int(threadIdx.x) % 32;
  const long long item = (long long)blockIdx.x * kCombineWarps + threadIdx.x / 32;
  if (item >= (long long)p.rows_q * p.heads_q) return;
  const int row = int(item / p.heads_q), head = int(item % p.heads_q);
  const int splits = p.num_splits;
  const long long stride = (long long)p.rows_q * p.heads_q;  // slots per split

  float mx = neg_inf();
  bool nan = false;
  for (int s = lane; s < splits; s += 32) {
    const float l = p.partial_lse[s * stride + item];
    nan |= l != l;
    mx = fmaxf(mx, l);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  nan = __any_sync(0xffffffffu, nan);
  const float mx_safe = mx == neg_inf() ? 0.f : mx;
  float sum = 0.f;
  for (int s = lane; s < splits; s += 32) sum += expf(p.partial_lse[s * stride + item] - mx_safe);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float nan_value = __int_as_float(0x7fc00000);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;

  // The row's place in O and the LSE: packed rows when ragged, else b * seqlen_q + s.
  const int b = T::kVarlen ? 0 : row / p.seqlen_q;
  const int s_row = T::kVarlen ? row : row % p.seqlen_q;
  OE* out = static_cast<OE*>(const_cast<void*>(p.o.ptr)) + SeqInfo::offset<T::kVarlen>(p.o, b, 0, s_row, head);
  for (int c = lane; c < kChunks / 2; c += 32) {  // 8 columns per step: one 16-byte store
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int s = 0; s < splits; ++s) {
      const float w = expf(p.partial_lse[s * stride + item] - mx_safe) * inv;
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
    if (nan)
      for (float& a : acc) a = nan_value;
    *reinterpret_cast<uint4*>(out + 8 * c) = make_uint4(pack2<OE>(acc[0], acc[1]), pack2<OE>(acc[2], acc[3]),
                                                        pack2<OE>(acc[4], acc[5]), pack2<OE>(acc[6], acc[7]));
  }
  if (T::kWriteLse && p.lse != nullptr && lane == 0)
    p.lse[lse_offset<T::kVarlen>(p, b, head, 0, s_row)] =
        nan ? nan_value : sum > 0.f ? mx_safe + logf(sum) : neg_inf();
}

}  // namespace flashjit::decode
