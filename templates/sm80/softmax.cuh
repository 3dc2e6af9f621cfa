// Online softmax on the rows one thread holds in mma C fragments (see mma.cuh): in each 16-row
// m-tile, rows g and g + 8, each spread over the 4 lanes of a quad (2 columns per 8-column
// n-tile per lane). Scores stay unscaled; the max is taken on raw scores (softmax_scale > 0) and
// exp2(s * scale_log2 - max * scale_log2) is one FFMA plus one MUFU.EX2 per element.
//
// kSumsInSmem: the running sums live in shared memory (a private slot per thread and row, read
// and written once per KV tile) rather than registers. The 32-rows-per-warp kernels hold 192
// fp32 accumulators and need the registers (without this they spilled on some arches); the sum
// is needed only after the tile's exponentials, so its load hides behind them. The max, needed
// first, always stays in registers (in shared memory too, its load waited behind the ldmatrix
// queue). Measured on an H200 at d128: within 3% of all-in-registers either way.
#pragma once

#include "common/types.cuh"

namespace flashjit::sm80 {

template <int kMTiles, int kThreads, bool kSumsInSmem>
struct OnlineSoftmax {
  // Shared bytes for the whole CTA: sum of row (mi, h) of thread tid at
  // [(2 mi + h) * kThreads + tid] (consecutive threads, consecutive banks).
  static constexpr int kStatsBytes = kSumsInSmem ? kThreads * kMTiles * 2 * 4 : 0;

  float max_[kMTiles][2];  // running max of raw scores; -inf until the row sees a key
  float sums_[kSumsInSmem ? 1 : kMTiles][2];
  float* smem_sums;

  __device__ __forceinline__ float& row_max(int mi, int h) { return max_[mi][h]; }
  // This lane's partial sum over its own columns of row (mi, h); quad-summed at the end.
  __device__ __forceinline__ float& row_sum(int mi, int h) {
    if constexpr (kSumsInSmem) return smem_sums[(2 * mi + h) * kThreads];
    else return sums_[mi][h];
  }

  // `region`: kStatsBytes of shared memory, for this CTA's threads.
  __device__ __forceinline__ void init(unsigned char* region, int tid) {
    smem_sums = reinterpret_cast<float*>(region) + tid;
#pragma unroll
    for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_max(mi, h) = neg_inf();
        row_sum(mi, h) = 0.f;
      }
  }

  // Folds the score tile `s` (masked entries already -inf) into the running max, rescales the
  // output accumulator and the sums by exp2((old_max - new_max) * scale_log2), and overwrites
  // `s` with the unnormalised probabilities. (Skipping the rescale when no max changed, behind
  // a warp vote, measured slower.)
  template <int kNTiles, int kDTiles>
  __device__ __forceinline__ void update(float (&s)[kMTiles][kNTiles][4],
                                         float (&o)[kMTiles][kDTiles][4], float scale_log2) {
#pragma unroll
    for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = row_max(mi, h);
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) mx = fmaxf(mx, fmaxf(s[mi][j][2 * h], s[mi][j][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // A row that has seen no visible key keeps max -inf; subtracting 0 instead keeps every
        // exponent -inf (probability 0, correction 0) rather than NaN from -inf - -inf.
        const float mx_safe = mx == neg_inf() ? 0.f : mx;
        const float corr = exp2_approx((row_max(mi, h) - mx_safe) * scale_log2);
        const float neg_base = -mx_safe * scale_log2;
        row_max(mi, h) = mx;
#pragma unroll
        for (int d = 0; d < kDTiles; ++d) {
          o[mi][d][2 * h] *= corr;
          o[mi][d][2 * h + 1] *= corr;
        }
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < kNTiles; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float pr = exp2_approx(fmaf(s[mi][j][2 * h + e], scale_log2, neg_base));
            s[mi][j][2 * h + e] = pr;
            sum += pr;
          }
        row_sum(mi, h) = row_sum(mi, h) * corr + sum;
      }
  }

  // Completes the row sums across the quad. inv_sum: 1 / sum, or 0 for a row that saw no key
  // (its output is 0). lse: natural-log log-sum-exp of the scaled scores, -inf for such a row.
  __device__ __forceinline__ void finalize(float softmax_scale, float (&inv_sum)[kMTiles][2],
                                           float (&lse)[kMTiles][2]) {
#pragma unroll
    for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float sum = row_sum(mi, h);
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const bool any = sum > 0.f;
        inv_sum[mi][h] = any ? 1.f / sum : 0.f;
        lse[mi][h] = any ? row_max(mi, h) * softmax_scale + logf(sum) : neg_inf();
      }
  }
};

}  // namespace flashjit::sm80
