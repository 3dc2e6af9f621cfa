// Correctness of every kernel family against the fp32 reference on random data, and of the
// reference against an fp64 CPU computation. Fresh inputs per run (seeded from the clock unless
// FLASHJIT_TEST_SEED is set), outputs poisoned with NaN before each launch.
#include "gpu_test_support.hpp"

#include "generator/resolve.hpp"
#include "runtime/device.hpp"
#include "runtime/driver.hpp"

#include <cmath>
#include <cstdio>

namespace flashjit::testing {
namespace {


Config native(Config c) {
  c.arch = current_device().arch();
  return c;
}

class FamilyMatrix : public ::testing::TestWithParam<MatrixCase> {
 public:
  static void SetUpTestSuite() {
    if (gpu_available()) {
      std::printf("[flashjit] test seed %llu (set FLASHJIT_TEST_SEED to repeat)\n",
                  static_cast<unsigned long long>(run_seed()));
      prebuild(correctness_matrix());
    }
  }
};

TEST_P(FamilyMatrix, MatchesReference) {
  FLASHJIT_REQUIRE_GPU();
  const MatrixCase& mc = GetParam();
  if (!family_runs_here(mc.family)) GTEST_SKIP() << mc.family << " kernels do not run on this GPU";
  const Config config = native(mc.config);
  auto kernel = get_kernel(config);
  uint64_t seed = run_seed();
  for (const ProblemShape& shape : shapes_for(mc, config.group)) {
    DeviceProblem problem(config, shape, ++seed);
    CheckResult r = check_against_reference(*kernel, config, problem);
    std::printf("[check] %-60s %-48s rel=%.3e lse=%.2e nonfinite=%zu %s\n", mc.label.c_str(),
                shape.describe().c_str(), r.rel_error, r.lse_max_error, r.nonfinite,
                r.passed ? "ok" : "FAIL");
    EXPECT_TRUE(r.passed) << kernel->name() << " on " << shape.describe() << ": " << r.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, FamilyMatrix, ::testing::ValuesIn(correctness_matrix()),
                         [](const ::testing::TestParamInfo<MatrixCase>& info) { return info.param.label; });

// The reference itself, against fp64 on the CPU.
struct ReferenceCase {
  const char* label;
  Mask mask;
  bool varlen;
  int qk, v, rope, group;
};

void PrintTo(const ReferenceCase& c, std::ostream* os) { *os << c.label; }

class ReferenceVsCpu : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(ReferenceVsCpu, AgreesWithFp64) {
  FLASHJIT_REQUIRE_GPU();
  const ReferenceCase& rc = GetParam();
  Config c;
  c.arch = current_device().arch();
  c.head_dim = {rc.qk, rc.v, rc.rope};
  c.mask = rc.mask;
  c.varlen = rc.varlen;
  c.group = rc.group;
  c.lse = true;
  ProblemShape s;
  s.heads_k = 2;
  s.heads_q = 2 * rc.group;
  if (rc.varlen) {
    s.batch = 3;
    s.seqlens_q = {5, 130, 1};
    s.seqlens_k = {70, 129, 3};
  } else {
    s.batch = 2;
    s.seqlen_q = 77;
    s.seqlen_k = 201;
  }
  if (rc.mask == Mask::sliding_window) {
    s.window_left = 20;
    s.window_right = 3;
  }
  DeviceProblem problem(c, s, run_seed());
  expect_reference_matches_cpu(c, problem, rc.label);
}

INSTANTIATE_TEST_SUITE_P(
    Reference, ReferenceVsCpu,
    ::testing::Values(ReferenceCase{"none", Mask::none, false, 64, 64, 0, 1},
                      ReferenceCase{"causal_gqa", Mask::causal, false, 128, 128, 0, 4},
                      ReferenceCase{"window_varlen", Mask::sliding_window, true, 96, 64, 0, 1},
                      ReferenceCase{"causal_varlen_rope", Mask::causal, true, 192, 128, 64, 2}),
    [](const ::testing::TestParamInfo<ReferenceCase>& info) { return std::string(info.param.label); });

// Launch arguments are checked before anything reaches the GPU.
TEST(LaunchArguments, BadArgumentsAreNamed) {
  FLASHJIT_REQUIRE_GPU();
  Config c;
  c.arch = current_device().arch();
  c.group = 2;
  ProblemShape s;
  s.heads_q = 4;
  s.heads_k = 2;
  DeviceProblem problem(c, s, 1);
  auto kernel = get_kernel(c);
  auto expect_error = [&](AttentionArgs a, const char* needle) {
    try {
      kernel->launch(a);
      ADD_FAILURE() << "expected an error naming " << needle;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  AttentionArgs a = problem.args();
  a.heads_q = 6;
  expect_error(a, "heads_q");
  a = problem.args();
  a.q.data = static_cast<const char*>(a.q.data) + 2;
  expect_error(a, "args.q.data must be 16-byte aligned");
  a = problem.args();
  a.k.row_stride = 100;
  expect_error(a, "args.k.row_stride");
  a = problem.args();
  a.window_left = 5;
  expect_error(a, "window_left");
  a = problem.args();
  a.lse = reinterpret_cast<float*>(const_cast<void*>(a.o.data));
  expect_error(a, "lse");
}

}  // namespace
}  // namespace flashjit::testing
