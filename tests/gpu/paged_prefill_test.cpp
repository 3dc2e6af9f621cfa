// Prefill against a paged KV cache (chunked prefill, prefix caching): the sm80 family's row
// gathers at every page-size class, with cache lengths and ragged query chunks, against the fp32
// reference; cache lengths on a contiguous cache; an fp8 cache with per-token K and V scales
// beside its pages (scales.token_layout "cache").
#include "gpu_test_support.hpp"

#include "runtime/device.hpp"

#include <cstdio>

namespace flashjit::testing {
namespace {

struct PagedCase {
  const char* label;
  int d, rope, page;  // page 0: a contiguous cache with per-sequence lengths
  Mask mask;
  bool varlen;
  int group;
  bool fp8_cache_scales = false;  // e4m3, per-token K and V scales laid out like the cache (scales.token_layout)
};
void PrintTo(const PagedCase& c, std::ostream* os) { *os << c.label; }

class PagedPrefill : public ::testing::TestWithParam<PagedCase> {};

TEST_P(PagedPrefill, MatchesReference) {
  FLASHJIT_REQUIRE_GPU();
  const PagedCase& k = GetParam();
  Config c;
  c.arch = current_device().arch();
  c.head_dim = {k.d, k.d, k.rope};
  c.mask = k.mask;
  c.varlen = k.varlen;
  c.group = k.group;
  c.lse = true;
  if (k.page) c.kv_layout = {true, k.page};
  c.tuning.family = Family::sm80;
  if (k.fp8_cache_scales) {
    c.dtype = {DType::e4m3, DType::bf16, std::nullopt, DType::fp32};
    c.scales = {ScaleGranularity::per_tensor, ScaleGranularity::per_token, ScaleGranularity::per_token};
    c.scales.token_layout = ScaleLayout::cache;
  }
  auto kernel = get_kernel(c);
  ProblemShape s;
  s.heads_k = 2;
  s.heads_q = 2 * k.group;
  if (k.mask == Mask::sliding_window) {
    s.window_left = 200;
    s.window_right = 5;
  }
  s.batch = 4;
  if (k.varlen) {  // query chunks of each sequence against its cached prefix plus itself
    s.seqlens_q = {130, 1, 0, 257};
    s.seqlens_k = {1000, 1, 77, 2049};
  } else {
    s.seqlen_q = 200;
    s.seqlen_k = 2049;
    s.cache_lens = {2049, 200, 0, 1031};
  }
  DeviceProblem problem(c, s, run_seed());
  const CheckResult r = check_against_reference(*kernel, c, problem);
  std::printf("[check] %-40s %-56s rel=%.3e lse=%.2e nonfinite=%zu %s\n", k.label, s.describe().c_str(), r.rel_error,
              r.lse_max_error, r.nonfinite, r.passed ? "ok" : "FAIL");
  EXPECT_TRUE(r.passed) << kernel->name() << ": " << r.summary();
}

INSTANTIATE_TEST_SUITE_P(
    Paged, PagedPrefill,
    ::testing::Values(PagedCase{"d128_page16_causal", 128, 0, 16, Mask::causal, false, 4},
                      PagedCase{"d128_page1_none", 128, 0, 1, Mask::none, false, 1},
                      PagedCase{"d64_page256_causal_varlen", 64, 0, 256, Mask::causal, true, 2},
                      PagedCase{"d96_page8_window", 96, 0, 8, Mask::sliding_window, false, 1},
                      PagedCase{"d192_rope64_page64_causal_varlen", 192, 64, 64, Mask::causal, true, 4},
                      PagedCase{"d256_page32_none", 256, 0, 32, Mask::none, false, 2},
                      PagedCase{"d128_contiguous_cache_lens", 128, 0, 0, Mask::causal, false, 4},
                      PagedCase{"e4m3_d128_page16_causal_varlen_kv_scales_in_cache", 128, 0, 16, Mask::causal, true, 4,
                                true}),
    [](const ::testing::TestParamInfo<PagedCase>& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace flashjit::testing
