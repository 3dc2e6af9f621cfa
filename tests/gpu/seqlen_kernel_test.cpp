// get_kernel(config, seqlen_k): the kernels chosen for a key length compute the same attention,
// nearby lengths share a kernel, and configs that resolve alike share one loaded module.
#include "gpu_test_support.hpp"

#include "runtime/device.hpp"

#include <cstdio>

namespace flashjit::testing {
namespace {

Config config_for(int head_dim, Mask mask) {
  Config c;
  c.arch = current_device().arch();
  c.head_dim = {head_dim, head_dim, 0};
  c.mask = mask;
  c.lse = true;
  return c;
}

struct LengthCase {
  const char* label;
  int head_dim;
  Mask mask;
  int seqlen;  // a little below a power of two, so the length is rounded up
};
void PrintTo(const LengthCase& c, std::ostream* os) { *os << c.label; }

class KernelForLength : public ::testing::TestWithParam<LengthCase> {};

TEST_P(KernelForLength, MatchesReference) {
  FLASHJIT_REQUIRE_SM90();
  const LengthCase& lc = GetParam();
  auto kernel = get_kernel(config_for(lc.head_dim, lc.mask), lc.seqlen);
  ProblemShape s;
  s.batch = 2;
  s.heads_q = s.heads_k = 2;
  s.seqlen_q = s.seqlen_k = lc.seqlen;
  DeviceProblem problem(kernel->config(), s, 41);
  CheckResult r = check_against_reference(*kernel, kernel->config(), problem);
  std::printf("[check] %-40s %s rel=%.3e %s\n", lc.label, kernel->name().c_str(), r.rel_error,
              r.passed ? "ok" : "FAIL");
  EXPECT_TRUE(r.passed) << kernel->name() << ": " << r.summary();
}

// One case per length rule of the sm90 family (generator/family_sm90.cpp).
INSTANTIATE_TEST_SUITE_P(
    Lengths, KernelForLength,
    ::testing::Values(LengthCase{"d64_none_short", 64, Mask::none, 1000},
                      LengthCase{"d64_causal_long", 64, Mask::causal, 4000},
                      LengthCase{"d128_none_short", 128, Mask::none, 2000},
                      LengthCase{"d128_causal_long", 128, Mask::causal, 8000},
                      LengthCase{"d256_causal_short", 256, Mask::causal, 1000}),
    [](const ::testing::TestParamInfo<LengthCase>& info) { return std::string(info.param.label); });

TEST(KernelForLength, NearbyLengthsShareAKernel) {
  FLASHJIT_REQUIRE_SM90();
  const Config c = config_for(64, Mask::none);
  auto a = get_kernel(c, 600), b = get_kernel(c, 1024);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), get_kernel(c, 1025).get());
  // The resolved config, given explicitly, is the same loaded kernel.
  EXPECT_EQ(get_kernel(a->config()).get(), a.get());
  // A hint in the config wins over the length.
  Config pinned = c;
  pinned.tuning.seqlen_hint = 8192;
  EXPECT_EQ(get_kernel(pinned, 512).get(), get_kernel(c, 8192).get());
}

TEST(KernelForLength, NonPositiveLengthIsAnArgumentError) {
  FLASHJIT_REQUIRE_SM90();
  EXPECT_THROW(get_kernel(config_for(128, Mask::none), 0), ArgumentError);
}

}  // namespace
}  // namespace flashjit::testing
