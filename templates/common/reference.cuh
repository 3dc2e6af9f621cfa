// The reference: plain fp32 attention, one CTA per query row, written for clarity rather than
// speed. The GPU tests compare every fast kernel against it. It reads the same AttentionParams
// (strides, ragged batches, masks, GQA, rope tensors, paged caches and cache lengths through the
// KV policy) and writes fp32 O and the LSE. A key whose page-table entry names no page of the
// cache makes its row NaN, as in the fast kernels. A shared K/V (latent) cache's V is the first
// head_dim.v columns of K's rows, dequantised with K's scales (T::kSharedKv). V's per-token
// scales apply key by key, like K's.
#pragma once

#include "common/element_traits.cuh"
#include "common/kv_policy.cuh"
#include "common/mask.cuh"
#include "common/params.cuh"
#include "common/scales.cuh"
#include "common/seqinfo.cuh"
#include "common/types.cuh"

namespace flashjit::reference {

constexpr int kThreads = 128;

__device__ __forceinline__ float block_reduce(float v, float* scratch, bool is_max) {
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) v = is_max ? fmaxf(v, scratch[w]) : v + scratch[w];
  return v;
}

template <class T>
__device__ void attention(const AttentionParams& p) {
  using Element = typename T::Element;
  using QElement = typename QElementOf<T>::type;
  using RopeElement = typename T::RopeElement;
  constexpr int kNope = T::kHeadDimQK - T::kHeadDimRope;
  constexpr int kVPerThread = ceil_div(T::kHeadDimV, kThreads);

  __shared__ float q_row[T::kHeadDimQK];
  __shared__ float probs[kThreads];  // times V's scale of each key (shared K/V: K's)
  // Per-block K scales (shared K/V): V column d takes its key's scale of block d / kBlockCols.
  constexpr int kKeyBlocks = Scales<T>::kKeyBlocks, kBlockCols = kNope / kKeyBlocks;
  __shared__ float block_scales[kKeyBlocks > 1 ? kKeyBlocks : 1][kThreads];
  __shared__ float scratch[kThreads / 32];
  __shared__ i64 k_off[kThreads], v_off[kThreads], kr_off[kThreads];  // this chunk's keys
  __shared__ int bad_page;  // a key's page-table entry named no page of the cache

  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const KvCache<T::kVarlen, T::kPaged, T::kPageSize> kv = KvCache<T::kVarlen, T::kPaged, T::kPageSize>::make(p, b);
  const SeqInfo s = kv.sequence(p, b);
  if (i >= s.seqlen_q) return;
  const int hk = h / T::kGroup;

  const Scales<T> scales = Scales<T>::make(p);
  const float q_scale = scales.q.at(b, h, s.q_start, i);
  constexpr bool kValueScales = T::kSharedKv || T::kVScale == ScaleKind::kPerToken;  // per key
  const float v_scale = kValueScales ? 1.f : scales.v.at(b, hk, 0, 0);
  const QElement* q = static_cast<const QElement*>(p.q.ptr) +
                     SeqInfo::offset<T::kVarlen>(p.q, b, s.q_start, i, h);
  for (int d = threadIdx.x; d < kNope; d += kThreads) q_row[d] = to_float(q[d]) * q_scale;
  if constexpr (T::kHeadDimRope > 0) {
    const RopeElement* qr = static_cast<const RopeElement*>(p.q_rope.ptr) +
                            SeqInfo::offset<T::kVarlen>(p.q_rope, b, s.q_start, i, h);
    for (int d = threadIdx.x; d < T::kHeadDimRope; d += kThreads) q_row[kNope + d] = to_float(qr[d]);
  }
  if (threadIdx.x == 0) bad_page = 0;
  __syncthreads();

  const AttentionMask<T::kMask> mask{s.seqlen_q, s.seqlen_k, p.window_left, p.window_right};
  const int lo = mask.col_lo(i), hi = mask.col_hi(i);
  const Element* k = static_cast<const Element*>(p.k.ptr);
  const Element* v = static_cast<const Element*>(p.v.ptr);

  float m = neg_inf(), l = 0.f;
  float acc[kVPerThread];
  for (int e = 0; e < kVPerThread; ++e) acc[e] = 0.f;

  for (int j0 = lo; j0 < hi; j0 += kThreads) {
    const int j = j0 + threadIdx.x;
    float score = neg_inf(), key_v_scale = 1.f;
    if (j < hi) {
      bool ok_k, ok_v, ok_r = true;
      k_off[threadIdx.x] = kv.offset(p.k, b, j, hk, ok_k);
      v_off[threadIdx.x] = kv.offset(p.v, b, j, hk, ok_v);
      if constexpr (T::kHeadDimRope > 0) kr_off[threadIdx.x] = kv.offset(p.k_rope, b, j, hk, ok_r);
      if (!(ok_k && ok_v && ok_r)) {
        bad_page = 1;
        v_off[threadIdx.x] = -1;
      } else {
        const Element* kr = k + k_off[threadIdx.x];
        float dot = 0.f;
        for (int g = 0; g < kKeyBlocks; ++g) {
          float part = 0.f;
          for (int d = g * kBlockCols; d < (g + 1) * kBlockCols; ++d) part += q_row[d] * to_float(kr[d]);
          const float k_scale = scales.key(kv, b, hk, s.k_start, j, g);
          dot += part * k_scale;  // the nope part is quantised; rope is not
          if (kKeyBlocks > 1) block_scales[g][threadIdx.x] = k_scale;
          else if (T::kSharedKv) key_v_scale = k_scale;
        }
        if (!T::kSharedKv && kValueScales) key_v_scale = scales.value(kv, b, hk, s.k_start, j);
        if constexpr (T::kHeadDimRope > 0) {
          const RopeElement* krr = static_cast<const RopeElement*>(p.k_rope.ptr) + kr_off[threadIdx.x];
          for (int d = 0; d < T::kHeadDimRope; ++d) dot += q_row[kNope + d] * to_float(krr[d]);
        }
        score = dot * p.softmax_scale;
      }
    }
    const float m_new = fmaxf(m, block_reduce(score, scratch, true));
    const float correction = m == neg_inf() ? 0.f : expf(m - m_new);
    const float prob = j < hi ? expf(score - m_new) : 0.f;
    l = l * correction + block_reduce(prob, scratch, false);
    probs[threadIdx.x] = prob * key_v_scale;
    __syncthreads();
    const int count = cmin(kThreads, hi - j0);
    for (int e = 0; e < kVPerThread; ++e) {
      const int d = threadIdx.x + e * kThreads;
      if (d >= T::kHeadDimV) break;
      float a = acc[e] * correction;
      for (int t = 0; t < count; ++t)
        if (v_off[t] >= 0)
          a += probs[t] * (kKeyBlocks > 1 ? block_scales[d / kBlockCols][t] : 1.f) * to_float(v[v_off[t] + d]);
      acc[e] = a;
    }
    m = m_new;
    __syncthreads();
  }

  float* o = static_cast<float*>(const_cast<void*>(p.o.ptr)) +
             SeqInfo::offset<T::kVarlen>(p.o, b, s.q_start, i, h);
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const float nan = __int_as_float(0x7fc00000);
  for (int e = 0; e < kVPerThread; ++e) {
    const int d = threadIdx.x + e * kThreads;
    if (d < T::kHeadDimV) o[d] = bad_page ? nan : acc[e] * inv * v_scale;
  }
  if (p.lse != nullptr && threadIdx.x == 0)
    p.lse[lse_offset<T::kVarlen>(p, b, h, s.q_start, i)] = bad_page ? nan : l > 0.f ? m + logf(l) : neg_inf();
}

}  // namespace flashjit::reference
