// Online softmax over a warpgroup's 64 x BN score tile in the wgmma accumulator layout: thread
// (warp w, lane l) holds rows r0 = 16w + l/4 and r0 + 8; s[4j + e] is row (e < 2 ? r0 : r0 + 8),
// column 8j + 2(l % 4) + (e & 1). A row's values sit in the 4 lanes of a quad.
// Scores stay in raw units; the max is kept pre-multiplied by scale*log2(e), so each probability
// is one FFMA and one EX2: p = 2^(s * scale_log2 - max_scaled + kPOffset). The scale is per row
// (per-token Q scales fold into it). fp8 probabilities take kPOffset 8: P lies in [0, 256], well
// inside e4m3's 448 (no saturation), and small probabilities keep their mantissa bits instead of
// falling into e4m3's subnormals; the offset cancels in O / sum and is taken out of the LSE.
// With kLazy (tuning.lazy_rescale) the running max moves only when a tile's row max exceeds it
// by more than kLazyLog2 (FA4's conditional rescaling): probabilities then reach
// 2^(kPOffset + kLazyLog2), 256 for 16-bit P and 2^8.5 (about 362, below e4m3's 448) for fp8,
// and in most tiles no row of a warp moves, so the consumer skips rescaling O (rows_moved). The
// result is exact: O and the sum share the max.
// kFmaExp2Every (tuning.exp2_fma_every) moves one in that many of the exponentials to the FMA
// pipe (exp2_fma), so the SFU, 16 results a clock per SM, is not alone in computing a tile's
// probabilities (FA4's split).
#pragma once

#include "common/element_traits.cuh"
#include "common/mask.cuh"
#include "common/types.cuh"

namespace flashjit::sm90 {

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// kFoldChains: how many independent chains fold a row's max and sum (row_reduce): 4 for fp8,
// whose softmax is the longest stretch of a tile; 1 for 16-bit inputs, whose tiles at the
// register limits of sm90_spill_limits.cpp spill with four. The one-chain fold keeps its own
// loops, in the order the 16-bit kernels' register limits and timings were measured on.
// kSumsInO: P V adds each tile's row sums (fp8 over Vt's rows of ones, attention_fwd.cuh);
// update() leaves them out and add_tile_sums() takes them in, except for the tiles it is told
// to sum exactly (the masked ones: below).
template <int kBlockN, int kPOffset = 0, int kFmaExp2Every = 0, bool kLazy = false, int kFoldChains = 1,
          bool kSumsInO = false>
struct OnlineSoftmax {
  static constexpr int kRegs = kBlockN / 2;
  static constexpr float kLazyLog2 = kPOffset > 0 ? 0.5f : 8.f;
  float max_scaled[2];  // running row max times scale_log2; -inf while the row saw no key
  float sum[2];         // this thread's share of the running row sum (reduced at the end)

  __device__ __forceinline__ void init() {
    max_scaled[0] = max_scaled[1] = neg_inf();
    sum[0] = sum[1] = 0.f;
  }

  // Sets invisible scores to -inf. Row/column of element (i) follow the layout above.
  template <MaskKind kKind>
  __device__ __forceinline__ static void apply_mask(float (&s)[kRegs], const AttentionMask<kKind>& mask,
                                                    int row0, int col0) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + (lane >> 2) + 8 * h;
      const int lo = mask.col_lo(row) - col0;
      const int hi = mask.col_hi(row) - col0;
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = 8 * j + 2 * (lane & 3) + e;
          if (c < lo || c >= hi) s[4 * j + 2 * h + e] = neg_inf();
        }
    }
  }

  // Folds one tile of scores into the running statistics and turns the scores into
  // probabilities in place; returns the factor the old O must be scaled by. The fp32
  // probabilities are packed (pack_probabilities) only once the previous P.V has finished, so
  // the packed P of the previous tile and the new one are never live together.
  // With kSumsInO, `exact` sums this tile's probabilities here, in fp32 (the caller then leaves
  // out P V's sums of it): a row whose keys are few has them all in masked tiles (causal
  // diagonals, windows' edges, a sequence's last keys), and P's fp8 rounding, which averages out
  // over a tile of whole keys, moved such a row's LSE by up to 2e-2.
  __device__ __forceinline__ void update(float (&s)[kRegs], const float (&scale_log2)[2], float (&correction)[2],
                                         bool exact = false) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = neg_inf();
      if constexpr (kFoldChains == 1) {
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) m = fmaxf(m, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
      } else {
        m = row_reduce(s, h, [](float a, float b) { return fmaxf(a, b); });
      }
      m = quad_max(m) * scale_log2[h];
      // Lazy: only past the threshold (a row's first visible key always moves it).
      correction[h] = 1.f;
      if (!kLazy || m > max_scaled[h] + kLazyLog2) {
        const float m_new = kLazy ? m : fmaxf(max_scaled[h], m);
        correction[h] = max_scaled[h] == neg_inf() ? 0.f : exp2_approx(max_scaled[h] - m_new);
        max_scaled[h] = m_new;
        sum[h] *= correction[h];
      }
    }
    // A row that has seen no key yet keeps max -inf; its probabilities are exp2(-inf) = 0.
    const float m0 = (max_scaled[0] == neg_inf() ? 0.f : max_scaled[0]) - kPOffset;
    const float m1 = (max_scaled[1] == neg_inf() ? 0.f : max_scaled[1]) - kPOffset;
#pragma unroll
    for (int i = 0; i < kRegs; ++i) {
      const float x = fmaf(s[i], scale_log2[(i & 2) ? 1 : 0], (i & 2) ? -m1 : -m0);
      s[i] = kFmaExp2Every > 0 && i % kFmaExp2Every == kFmaExp2Every - 1 ? exp2_fma(x) : exp2_approx(x);
    }
    if (kSumsInO && !exact) return;  // P V adds them (add_tile_sums)
    // This thread's share; one chain a row where P V sums most tiles (the fewest registers).
    if constexpr (kFoldChains == 1 || kSumsInO) {
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
        sum[0] += s[4 * j] + s[4 * j + 1];
        sum[1] += s[4 * j + 2] + s[4 * j + 3];
      }
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) sum[h] += row_reduce(s, h, [](float a, float b) { return a + b; });
    }
  }

  // Row h's share of this thread's scores folded with `op` in up to kFoldChains independent
  // chains, so the fold is not one dependent chain of kBlockN / 4 instructions (ptxas keeps the
  // source's order for fmaxf and float adds).
  static constexpr int kChains = kBlockN / 8 < kFoldChains ? kBlockN / 8 : kFoldChains;
  template <class Op>
  __device__ __forceinline__ static float row_reduce(const float (&s)[kRegs], int h, Op op) {
    float c[kChains];
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      const float pair = op(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]);
      c[j % kChains] = j < kChains ? pair : op(c[j % kChains], pair);
    }
#pragma unroll
    for (int w = 1; w < kChains; w *= 2)
#pragma unroll
      for (int k = 0; k + w < kChains; k += 2 * w) c[k] = op(c[k], c[k + w]);
    return c[0];
  }

  // Probabilities as the A operand of the P.V wgmma, one u32[4] per wgmma K step.
  //  16-bit: step kk (columns 16kk..16kk+15) is {rows r0, r0+8} x {2(l%4), +1, +8, +9}, i.e.
  //          s[8kk .. 8kk+7] pairwise.
  //  8-bit:  step kk (columns 32kk..32kk+31); register j holds row r0 + 8 (j % 2) at fragment
  //          keys 16 (j / 2) + 4(l%4) .. +3. The accumulator's columns are packed as they lie
  //          (2(l%4), +1, +8, +9 of each 16), and Vt's keys are permuted to match
  //          (v_transpose.cuh).
  template <class Element>
  __device__ __forceinline__ static void pack_probabilities(
      const float (&s)[kRegs], u32 (&p)[kBlockN / ElementTraits<Element>::kMmaK][4]) {
    if constexpr (ElementTraits<Element>::kBytes == 2) {
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
        for (int q = 0; q < 4; ++q) p[kk][q] = pack2<Element>(s[8 * kk + 2 * q], s[8 * kk + 2 * q + 1]);
    } else {
#pragma unroll
      for (int kk = 0; kk < kBlockN / 32; ++kk)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int b = 16 * kk + 8 * (j / 2) + 2 * (j % 2);
          p[kk][j] = pack4<Element>(s[b], s[b + 1], s[b + 4], s[b + 5]);
        }
    }
  }

  // A tile's whole row sums from P V (kSumsInO), relative to the running max, as the sums are:
  // taken before the next update() rescales both. Every lane of a quad has them whole; the
  // caller passes 1 on the quad's first lane (its share) and 0 elsewhere, and 0 everywhere for
  // a tile update() summed itself.
  __device__ __forceinline__ void add_tile_sums(float row0, float row8, float keep) {
    sum[0] = fmaf(row0, keep, sum[0]);
    sum[1] = fmaf(row8, keep, sum[1]);
  }
  // Row sums over the quad (each lane's share; with kSumsInO the first lane of the quad holds
  // P V's sums, add_tile_sums); call once after the last tile.
  __device__ __forceinline__ void finalize() {
    sum[0] = quad_sum(sum[0]);
    sum[1] = quad_sum(sum[1]);
  }
  // Natural-log LSE of row h (after finalize).
  __device__ __forceinline__ float lse(int h) const {
    return sum[h] > 0.f ? (max_scaled[h] - kPOffset + __log2f(sum[h])) * kLn2 : neg_inf();
  }
  __device__ __forceinline__ float inv_sum(int h) const { return sum[h] > 0.f ? 1.f / sum[h] : 0.f; }
};

// Whether any row of this warp moved its max in the last update (else O needs no rescale).
__device__ __forceinline__ bool rows_moved(const float (&correction)[2]) {
  return __any_sync(0xffffffffu, correction[0] != 1.f || correction[1] != 1.f);
}

// O *= correction per row, in the accumulator layout of an m64nN tile.
template <int kRegs>
__device__ __forceinline__ void rescale_rows(float (&o)[kRegs], const float (&correction)[2]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) o[i] *= correction[(i & 2) ? 1 : 0];
}

}  // namespace flashjit::sm90
