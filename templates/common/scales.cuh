// Quantisation scales of Q, K and V (scales.q/k/v): the stored values times the scale are the
// inputs. per_tensor and per_head scales are fp32; per_token ones are in dtype.scale (fp32 or
// bf16), laid out [batch, heads, seqlen] with the strides in params (ragged: [heads, total]).
#pragma once

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

// The scales of one kernel's Q, K and V, from its Traits.
template <class T>
struct Scales {
  using S = typename T::ScaleElement;
  TensorScale<T::kQScale, S, T::kVarlen> q;
  TensorScale<T::kKScale, S, T::kVarlen && !T::kPaged> k;  // paged keys: [batch, heads, position]
  TensorScale<T::kVScale, float, T::kVarlen> v;

  __device__ __forceinline__ static Scales make(const AttentionParams& p) {
    return Scales{{p.q_scale, p.q_scale_strides[0], p.q_scale_strides[1]},
                  {p.k_scale, p.k_scale_strides[0], p.k_scale_strides[1]},
                  {p.v_scale, 0, 0}};
  }
};

}  // namespace flashjit
