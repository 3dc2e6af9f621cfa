// Which keys each query row may see, and which tiles must be visited or masked elementwise.
// Causal and sliding-window masks are bottom-right aligned (as in FlashAttention): query row i
// stands at key position i' = i + seqlen_k - seqlen_q; causal sees keys j <= i', a window sees
// i' - left <= j <= i' + right (a negative left or right means unbounded on that side).
#pragma once

#include "common/types.cuh"

namespace flashjit {

template <MaskKind kKind>
struct AttentionMask {
  int seqlen_q;
  int seqlen_k;
  int left;   // sliding window only
  int right;  // sliding window only

  __device__ __forceinline__ bool has_left() const {
    return kKind == MaskKind::kSlidingWindow && left >= 0;
  }
  __device__ __forceinline__ bool has_right() const {
    return kKind == MaskKind::kCausal || (kKind == MaskKind::kSlidingWindow && right >= 0);
  }
  __device__ __forceinline__ int shift() const { return seqlen_k - seqlen_q; }

  // Visible keys of query row i: [col_lo(i), col_hi(i)). May be empty (col_lo >= col_hi).
  __device__ __forceinline__ int col_hi(int i) const {
    if (!has_right()) return seqlen_k;
    int r = kKind == MaskKind::kCausal ? 0 : right;
    return cmin(seqlen_k, i + shift() + r + 1);
  }
  __device__ __forceinline__ int col_lo(int i) const {
    return has_left() ? cmax(0, i + shift() - left) : 0;
  }

  // KV tiles of width bn that rows [m0, m0 + bm) touch: [n_block_min, n_block_max).
  __device__ __forceinline__ int n_block_max(int m0, int bm, int bn) const {
    int last_row = cmin(m0 + bm, seqlen_q) - 1;
    int hi = col_hi(last_row);
    return hi <= 0 ? 0 : ceil_div(hi, bn);
  }
  __device__ __forceinline__ int n_block_min(int m0, int bn) const {
    return has_left() ? col_lo(m0) / bn : 0;
  }
  // Tiles n in [n_block_min, n_unmasked_min) or [n_unmasked_max, n_block_max) need elementwise
  // masking; tiles between are fully visible for every row of the tile.
  __device__ __forceinline__ int n_unmasked_max(int m0, int bn) const {
    // Every row r >= m0 sees at least [.., col_hi(m0)); also keys past seqlen_k need masking.
    int hi = has_right() ? col_hi(m0) : seqlen_k;
    return hi <= 0 ? 0 : hi / bn;
  }
  __device__ __forceinline__ int n_unmasked_min(int m0, int bm, int bn) const {
    if (!has_left()) return 0;
    int last_row = cmin(m0 + bm, seqlen_q) - 1;
    return ceil_div(col_lo(last_row), bn);
  }
};

}  // namespace flashjit
