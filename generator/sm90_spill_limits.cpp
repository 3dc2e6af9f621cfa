#include "generator/sm90_spill_limits.hpp"

#include "generator/element_types.hpp"

namespace flashjit {

namespace {

// Largest spill-free BN / 16, indexed [consumers - 1][mask][head_dim.qk / 64 - 1][head_dim.v / 64 - 1].
// Measured on sm_90a with NVRTC 13.0 (ptxas --warn-on-spills) by bisecting BN for every entry and
// lowering it until every variant compiled without spills: with and without the LSE, ragged and
// not, the dynamic and the persistent scheduler (single CTAs), persistent and transient
// pair_cta clusters. The 16-bit dtypes and group made no difference. The defaults of
// family_sm90.cpp lie on or inside these limits. Checked again on 2026-12-06 with every entry's
// tile compiled with the LSE, ragged and dynamically scheduled (tests/cpu/sm90_spill_limits_test.cpp):
// four had come to spill 4-16 bytes since and were lowered (two consumers without a mask at
// 128/128: 192 to 176; three at 192/192 with a window, single and pair_cta: none; three in pairs,
// causal 128/192: 32 to 16).
constexpr unsigned char kSingle[3][3][4][4] = {
    {{{16, 13, 10, 8}, {15, 13, 10, 7}, {12, 10, 8, 7}, {9, 8, 6, 6}},  // 1 consumer, none
     {{15, 13, 10, 8}, {14, 12, 10, 7}, {12, 10, 8, 7}, {9, 8, 6, 6}},  // causal
     {{11, 9, 7, 5}, {11, 9, 7, 5}, {10, 8, 6, 4}, {9, 8, 6, 4}}},      // sliding_window
    {{{14, 12, 9, 6}, {14, 11, 9, 6}, {11, 8, 7, 6}, {8, 6, 5, 5}},     // 2 consumers, none
     {{14, 12, 9, 6}, {14, 11, 9, 5}, {11, 8, 7, 5}, {8, 6, 5, 5}},     // causal
     {{11, 9, 8, 5}, {10, 10, 8, 5}, {10, 8, 6, 4}, {8, 6, 5, 4}}},     // sliding_window
    {{{8, 5, 2, 0}, {8, 5, 2, 0}, {6, 4, 1, 0}, {6, 3, 0, 0}},          // 3 consumers, none
     {{8, 5, 2, 0}, {7, 5, 2, 0}, {6, 3, 2, 0}, {5, 3, 0, 0}},          // causal
     {{6, 4, 2, 0}, {5, 3, 2, 0}, {5, 3, 0, 0}, {4, 2, 0, 0}}}};        // sliding_window
constexpr unsigned char kPair[3][3][4][4] = {
    {{{15, 13, 10, 8}, {14, 12, 10, 7}, {12, 10, 8, 7}, {9, 8, 6, 6}},  // 1 consumer, none
     {{15, 12, 10, 8}, {14, 12, 10, 7}, {12, 10, 8, 7}, {9, 8, 6, 6}},  // causal
     {{11, 9, 7, 5}, {10, 8, 7, 5}, {10, 8, 6, 4}, {9, 8, 6, 4}}},      // sliding_window
    {{{14, 11, 9, 6}, {13, 11, 9, 6}, {11, 8, 7, 6}, {8, 6, 5, 5}},     // 2 consumers, none
     {{14, 11, 9, 6}, {13, 11, 9, 5}, {11, 8, 7, 5}, {8, 6, 5, 5}},     // causal
     {{10, 8, 7, 5}, {10, 10, 8, 5}, {9, 8, 6, 4}, {8, 6, 5, 4}}},      // sliding_window
    {{{7, 5, 2, 0}, {7, 4, 2, 0}, {6, 3, 1, 0}, {5, 2, 0, 0}},          // 3 consumers, none
     {{7, 4, 2, 0}, {6, 4, 1, 0}, {6, 3, 1, 0}, {5, 2, 0, 0}},          // causal
     {{5, 4, 2, 0}, {5, 3, 2, 0}, {5, 3, 0, 0}, {4, 2, 0, 0}}}};        // sliding_window

// fp8 inputs (head_dim.qk 64 / v 64, qk 128 or 256 / v 128 or 256, qk 192 / v 128 with or without
// a bf16 rope part of 64 columns, qk 256 with one of 128; single CTAs), in 16-key units. P takes
// half the registers of 16-bit P and the consumers get 8 fewer (the producer warpgroup transposes
// V), so the 16-bit limits do not carry over. Measured on sm_90a with NVRTC 13.0 by raising BN in
// steps of 32 for every entry until a variant spilled or reported an advisory: e4m3 with
// per-tensor scales (without the LSE, persistent; with the LSE, ragged, dynamic), with and
// without a rope part of the same width (2026-12-06); d64 and qk 192 without a rope part, whose
// rows are 64-byte panels, on 2026-12-06. Per-token scales take the tables below. 16 where
// shared memory runs out first; 0 for head dims the fp8 kernels do not take (and d_v 256 on
// three consumers, which ptxas cannot allocate).
constexpr unsigned char kFp8[3][3][4][4] = {
    {{{16, 0, 0, 0}, {0, 16, 0, 16}, {0, 16, 0, 16}, {0, 16, 0, 6}},    // 1 consumer, none
     {{16, 0, 0, 0}, {0, 16, 0, 16}, {0, 16, 0, 16}, {0, 16, 0, 16}},   // causal
     {{12, 0, 0, 0}, {0, 10, 0, 6}, {0, 10, 0, 6}, {0, 10, 0, 4}}},     // sliding_window
    {{{16, 0, 0, 0}, {0, 12, 0, 6}, {0, 16, 0, 6}, {0, 16, 0, 6}},      // 2 consumers, none
     {{16, 0, 0, 0}, {0, 12, 0, 6}, {0, 16, 0, 6}, {0, 16, 0, 6}},      // causal
     {{12, 0, 0, 0}, {0, 8, 0, 4}, {0, 8, 0, 4}, {0, 6, 0, 4}}},        // sliding_window
    {{{8, 0, 0, 0}, {0, 4, 0, 0}, {0, 4, 0, 0}, {0, 4, 0, 0}},          // 3 consumers, none
     {{8, 0, 0, 0}, {0, 4, 0, 0}, {0, 4, 0, 0}, {0, 2, 0, 0}},          // causal
     {{6, 0, 0, 0}, {0, 4, 0, 0}, {0, 2, 0, 0}, {0, 2, 0, 0}}}};        // sliding_window

// fp8 in pair_cta clusters, in 16-key units like kFp8, whose entries it lowers where the
// cluster's extra state spilled: measured on sm_90a with NVRTC 13.0 (2026-12-06) by lowering BN in
// steps of 32 from kFp8's entry until every variant compiled without spills: e4m3 with per-tensor
// scales (without the LSE, persistent; with the LSE, ragged, transient) and with per-token Q
// scales (fp32 with per-head K and V, LSE, persistent; bf16, LSE, ragged, transient), with and
// without a rope part of the same width.
constexpr unsigned char kFp8Pair[3][3][4][4] = {
    {{{16, 0, 0, 0}, {0, 14, 0, 16}, {0, 16, 0, 16}, {0, 16, 0, 6}},    // 1 consumer, none
     {{16, 0, 0, 0}, {0, 14, 0, 16}, {0, 16, 0, 16}, {0, 16, 0, 16}},   // causal
     {{12, 0, 0, 0}, {0, 10, 0, 6}, {0, 10, 0, 6}, {0, 10, 0, 4}}},     // sliding_window
    {{{14, 0, 0, 0}, {0, 10, 0, 6}, {0, 16, 0, 6}, {0, 16, 0, 4}},      // 2 consumers, none
     {{16, 0, 0, 0}, {0, 12, 0, 6}, {0, 16, 0, 6}, {0, 16, 0, 4}},      // causal
     {{12, 0, 0, 0}, {0, 8, 0, 4}, {0, 8, 0, 4}, {0, 6, 0, 4}}},        // sliding_window
    {{{8, 0, 0, 0}, {0, 4, 0, 0}, {0, 4, 0, 0}, {0, 2, 0, 0}},          // 3 consumers, none
     {{8, 0, 0, 0}, {0, 2, 0, 0}, {0, 2, 0, 0}, {0, 2, 0, 0}},          // causal
     {{6, 0, 0, 0}, {0, 4, 0, 0}, {0, 2, 0, 0}, {0, 2, 0, 0}}}};        // sliding_window

// fp8 with per-token Q scales (K and V per tensor or head), single CTAs: kFp8 where those
// compiled without spills, lowered by 32 keys where a per-token Q variant spilled. Measured on
// sm_90a with NVRTC 13.0 (2026-12-06, the kernels with row sums from the tensor cores) by
// compiling every kFp8 entry at its limit in four variants (per-tensor lean and with LSE, ragged,
// transient; per-token Q in fp32 with per-head K and V and the LSE; in bf16, LSE, ragged,
// transient), with and without a rope part of the same width.
constexpr unsigned char kFp8QueryTokens[3][3][4][4] = {
    {{{16, 0, 0, 0}, {0, 14, 0, 16}, {0, 16, 0, 16}, {0, 16, 0, 6}},    // 1 consumer, none
     {{16, 0, 0, 0}, {0, 14, 0, 16}, {0, 16, 0, 16}, {0, 16, 0, 16}},   // causal
     {{12, 0, 0, 0}, {0, 10, 0, 6}, {0, 10, 0, 6}, {0, 10, 0, 4}}},     // sliding_window
    {{{16, 0, 0, 0}, {0, 12, 0, 6}, {0, 16, 0, 6}, {0, 16, 0, 4}},      // 2 consumers, none
     {{16, 0, 0, 0}, {0, 12, 0, 6}, {0, 16, 0, 6}, {0, 16, 0, 6}},      // causal
     {{12, 0, 0, 0}, {0, 8, 0, 4}, {0, 8, 0, 4}, {0, 6, 0, 4}}},        // sliding_window
    {{{8, 0, 0, 0}, {0, 4, 0, 0}, {0, 4, 0, 0}, {0, 2, 0, 0}},          // 3 consumers, none
     {{8, 0, 0, 0}, {0, 4, 0, 0}, {0, 4, 0, 0}, {0, 2, 0, 0}},          // causal
     {{6, 0, 0, 0}, {0, 4, 0, 0}, {0, 2, 0, 0}, {0, 2, 0, 0}}}};        // sliding_window

// fp8 with per-token K scales (the producer warp stores each stage's, the consumers read them),
// single CTAs, per-token Q or not; no rope part. Measured on sm_90a with NVRTC 13.0 (2026-12-06,
// the kernels with row sums from the tensor cores) by lowering BN in steps of 32 until four
// variants compiled without spills: per-tensor Q, lean; per-token Q and K in fp32, LSE, ragged,
// transient; K scales beside the cache's rows in bf16, LSE, ragged; per-token Q and K in bf16 with
// the LSE. Eleven entries of the cap measured before the row sums (on two consumers only) spilled
// 4-16 bytes and are lower here.
constexpr unsigned char kFp8KeyTokens[3][3][4][4] = {
    {{{16, 0, 0, 0}, {0, 10, 0, 6}, {0, 12, 0, 0}, {0, 10, 0, 4}},      // 1 consumer, none
     {{16, 0, 0, 0}, {0, 12, 0, 6}, {0, 12, 0, 0}, {0, 10, 0, 6}},      // causal
     {{12, 0, 0, 0}, {0, 8, 0, 4}, {0, 8, 0, 0}, {0, 6, 0, 4}}},        // sliding_window
    {{{14, 0, 0, 0}, {0, 10, 0, 6}, {0, 10, 0, 0}, {0, 10, 0, 4}},      // 2 consumers, none
     {{16, 0, 0, 0}, {0, 10, 0, 6}, {0, 10, 0, 0}, {0, 10, 0, 4}},      // causal
     {{8, 0, 0, 0}, {0, 6, 0, 4}, {0, 6, 0, 0}, {0, 6, 0, 4}}},         // sliding_window
    {{{8, 0, 0, 0}, {0, 4, 0, 0}, {0, 4, 0, 0}, {0, 4, 0, 0}},          // 3 consumers, none
     {{6, 0, 0, 0}, {0, 4, 0, 0}, {0, 2, 0, 0}, {0, 2, 0, 0}},          // causal
     {{6, 0, 0, 0}, {0, 2, 0, 0}, {0, 2, 0, 0}, {0, 2, 0, 0}}}};        // sliding_window

int dim_index(int d) { return d >= 64 && d <= 256 && d % 64 == 0 ? d / 64 - 1 : -1; }

}  // namespace

int sm90_spill_free_bn(const Config& c, int consumer_warpgroups, bool pair_cta) {
  const int q = dim_index(c.head_dim.qk), v = dim_index(c.head_dim.v);
  if (q < 0 || v < 0 || consumer_warpgroups < 1 || consumer_warpgroups > 3) return 0;
  const int m = c.mask == Mask::none ? 0 : c.mask == Mask::causal ? 1 : 2;
  if (is_float8(c.dtype.qkv)) {
    // pair_cta takes no per-token K scales (family_sm90.cpp); its table covers per-token Q.
    const auto& table = pair_cta                                         ? kFp8Pair
                        : c.scales.k == ScaleGranularity::per_token ? kFp8KeyTokens
                        : c.scales.q == ScaleGranularity::per_token ? kFp8QueryTokens
                                                                    : kFp8;
    return 16 * table[consumer_warpgroups - 1][m][q][v];
  }
  return 16 * (pair_cta ? kPair : kSingle)[consumer_warpgroups - 1][m][q][v];
}

}  // namespace flashjit
