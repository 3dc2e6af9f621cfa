// Quantisation scales of Q, K and V (scales.q/k/v): the stored values times the scale are the
// inputs. per_tensor and per_head scales are fp32; per_token ones are in dtype.scale (fp32 or
// bf16), laid out [batch, heads, seqlen] with the strides in params (ragged: [heads, total]);
// per-token K and V scales may instead lie like the cache's rows (T::kTokenScalesInCache:
// scales.token_layout "cache"), read through the KV policy.
#pragma once

#include "common/element_traits.cuh"
#include "common/params.cuh"
#include "common/types.cuh"

namespace flashjit {

template <ScaleKind kKind, class S, bool kVarlen>
struct TensorScale {
  const void* ptr;
  long long batch_stride, head_stride;

  // The scale of row `row` (of a sequence starting at packed row `start`) of head `head`.
  __device__ __forceinline__ float at(int batch, int head, int start, int row) const {
    if constexpr (kKind == ScaleKind::kNone) {
      return 1.f;
    } else if constexpr (kKind == ScaleKind::kPerTensor) {
      return static_cast<const float*>(ptr)[0];
    } else if constexpr (kKind == ScaleKind::kPerHead) {
      return static_cast<const float*>(ptr)[head];
    } else {
      const S* p = static_cast<const S*>(ptr);
      return to_float(p[(kVarlen ? 0 : i64(batch) * batch_stride) + i64(head) * head_stride + start + row]);
    }
  }
};

// Whether a kernel's per-token K and V scales lie like the cache's rows (T::kTokenScalesInCache,
// emitted only where so).
template <class T, class = void>
struct TokenScalesInCache {
  static constexpr bool value = false;
};
template <class T>
struct TokenScalesInCache<T, VoidOf<decltype(T::kTokenScalesInCache)>> {
  static constexpr bool value = T::kTokenScalesInCache;
};

// Per-token K scales of each key row: one per block of its nope columns (T::kKScaleBlocks,
// scales.k_block, emitted only where set), or one.
template <class T, class = void>
struct KScaleBlocks {
  static constexpr int value = 1;
};
template <class T>
struct KScaleBlocks<T, VoidOf<decltype(T::kKScaleBlocks)>> {
  static constexpr int value = T::kKScaleBlocks;
};

// The scales of one kernel's Q, K and V, from its Traits.
template <class T>
struct Scales {
  using S = typename T::ScaleElement;
  static constexpr bool kTokenScalesInCache = TokenScalesInCache<T>::value;
  static constexpr int kKeyBlocks = KScaleBlocks<T>::value;
  static_assert(kKeyBlocks == 1 || (kTokenScalesInCache && T::kKScale == ScaleKind::kPerToken),
                "per-block K scales are per token, laid out like the cache's rows");
  TensorScale<T::kQScale, S, T::kVarlen> q;
  TensorScale<T::kKScale, S, T::kVarlen && !T::kPaged> k;  // by position: [batch, heads, position]
  TensorScale<T::kVScale, S, T::kVarlen && !T::kPaged> v;  // per tensor or head fp32, per token S
  long long k_row_stride, v_row_stride;  // per-token scales laid out like the cache: their row strides
  long long k_block_stride;              // per-block K scales: between a row's blocks

  __device__ __forceinline__ static Scales make(const AttentionParams& p) {
    return Scales{{p.q_scale, p.q_scale_strides[0], p.q_scale_strides[1]},
                  {p.k_scale, p.k_scale_strides[0], p.k_scale_strides[1]},
                  {p.v_scale, p.v_scale_strides[0], p.v_scale_strides[1]},
                  p.k_scale_row_stride,
                  p.v_scale_row_stride,
                  p.k_scale_block_stride};
  }

  // Key j's K scale (of KV head kv_head in entry `batch`, whose ragged keys start at k_start):
  // by its position, or laid out like the cache's rows and read through the KV policy `kv`
  // (0 where its page-table entry names no page of the cache); per-block scales: block `block`'s.
  template <class Kv>
  __device__ __forceinline__ float key(const Kv& kv, int batch, int kv_head, int k_start, int j, int block = 0) const {
    return of_key<T::kKScale>(k, k_row_stride, kv, batch, kv_head, k_start, j, block * k_block_stride);
  }
  // Per-token K scales of one entry's KV head in a contiguous cache as a strided row: key j's at
  // row[j], by position ([batch, heads, position], ragged [heads, total]) or laid out like the
  // cache's rows ([batch, seqlen_k, heads_k], ragged [total_k, heads_k]). One base and one step.
  struct KeyRow {
    const S* ptr;
    long long step;
    __device__ __forceinline__ float operator[](int j) const { return to_float(ptr[i64(j) * step]); }
  };
  __device__ __forceinline__ KeyRow key_row(int batch, int kv_head, int k_start) const {
    static_assert(T::kKScale == ScaleKind::kPerToken && !T::kPaged, "per-token K scales of a contiguous cache");
    const long long step = kTokenScalesInCache ? k_row_stride : 1;
    const long long base = (T::kVarlen ? 0 : i64(batch) * k.batch_stride) + i64(kv_head) * k.head_stride + k_start * step;
    return KeyRow{static_cast<const S*>(k.ptr) + base, step};
  }
  // The same for V (per tensor, per head, or per token like K's).
  template <class Kv>
  __device__ __forceinline__ float value(const Kv& kv, int batch, int kv_head, int k_start, int j) const {
    return of_key<T::kVScale>(v, v_row_stride, kv, batch, kv_head, k_start, j, 0);
  }

 private:
  template <ScaleKind kKind, class Scale, class Kv>
  __device__ __forceinline__ static float of_key(const Scale& s, long long row_stride, const Kv& kv, int batch,
                                                 int kv_head, int k_start, int j, long long within) {
    if constexpr (kTokenScalesInCache && kKind == ScaleKind::kPerToken) {
      bool ok;
      const i64 off = kv.offset(TensorArg{s.ptr, s.batch_stride, row_stride, s.head_stride}, batch, j, kv_head, ok);
      return ok ? to_float(static_cast<const S*>(s.ptr)[off + within]) : 0.f;
    } else {
      return s.at(batch, kv_head, k_start, j);
    }
  }
};

// Multiplies column (key) 8 j + 2 t + e of scores or probabilities in the tensor cores'
// accumulator order (mma.sync's m16n8 tiles and wgmma's m64nN share it: s[4 j + 2 h + e] is row
// h's column 8 j + 2 t + e, t = lane % 4) by per_key[8 j + 2 t + e] times `factor`: per-token K
// or V scales.
template <int kRegs>
__device__ __forceinline__ void scale_key_columns(float (&s)[kRegs], const float* per_key, int t, float factor) {
  static_assert(kRegs % 4 == 0, "whole 8-column steps");
#pragma unroll
  for (int j = 0; j < kRegs / 4; ++j) {
    const float2 f = *reinterpret_cast<const float2*>(per_key + 8 * j + 2 * t);
    s[4 * j] *= f.x * factor;
    s[4 * j + 1] *= f.y * factor;
    s[4 * j + 2] *= f.x * factor;
    s[4 * j + 3] *= f.y * factor;
  }
}
// The same for a warp's mma.sync scores kept as [1][n-tiles][4].
template <int kNT>
__device__ __forceinline__ void scale_key_columns(float (&s)[1][kNT][4], const float* per_key, int t, float factor) {
  scale_key_columns(reinterpret_cast<float(&)[4 * kNT]>(s), per_key, t, factor);
}

}  // namespace flashjit
