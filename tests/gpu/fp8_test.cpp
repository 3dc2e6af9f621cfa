// fp8 inputs and quantisation scales on the sm80 family (inputs widened and dequantised as they
// are loaded): dtype x scale granularity x rope part x mask x GQA x ragged batches x LSE against
// the fp32 reference, and the reference itself against fp64 on the CPU on the dequantised inputs.
// The harness quantises fresh random inputs per run (amax / the largest fp8 value per group).
#include "gpu_test_support.hpp"

#include "runtime/device.hpp"
#include "runtime/driver.hpp"

#include <cmath>
#include <cstdio>

namespace flashjit::testing {
namespace {

using G = ScaleGranularity;

struct Fp8Case {
  const char* label;
  DType dtype;
  G q, k, v;
  std::optional<DType> scale_dtype;  // per_token scales
  int qk, dv, rope;
  std::optional<DType> rope_dtype;
  Mask mask;
  int group;
  bool varlen;
};
void PrintTo(const Fp8Case& c, std::ostream* os) { *os << c.label; }

Config fp8_config(const Fp8Case& k) {
  Config c;
  c.arch = current_device().arch();
  c.dtype = {k.dtype, DType::bf16, k.rope_dtype, k.scale_dtype};
  c.head_dim = {k.qk, k.dv, k.rope};
  c.scales = {k.q, k.k, k.v};
  c.mask = k.mask;
  c.group = k.group;
  c.varlen = k.varlen;
  c.lse = true;
  c.tuning.family = Family::sm80;
  return c;
}

ProblemShape fp8_shape(const Fp8Case& k) {
  ProblemShape s;
  s.heads_k = 2;
  s.heads_q = 2 * k.group;
  if (k.mask == Mask::sliding_window) {
    s.window_left = 150;
    s.window_right = 3;
  }
  if (k.varlen) {
    s.batch = 3;
    s.seqlens_q = {130, 1, 700};
    s.seqlens_k = {200, 90, 700};
  } else {
    s.batch = 2;
    s.seqlen_q = 333;
    s.seqlen_k = 1031;
  }
  return s;
}

const std::vector<Fp8Case>& fp8_cases() {
  static const std::vector<Fp8Case> cases = {
      {"e4m3_unscaled", DType::e4m3, G::none, G::none, G::none, {}, 128, 128, 0, {}, Mask::causal, 1, false},
      {"e4m3_per_tensor", DType::e4m3, G::per_tensor, G::per_tensor, G::per_tensor, {}, 128, 128, 0, {}, Mask::none, 4,
       false},
      {"e4m3_per_head", DType::e4m3, G::per_head, G::per_head, G::per_head, {}, 64, 64, 0, {}, Mask::causal, 2, true},
      {"e4m3_per_token_fp32", DType::e4m3, G::per_token, G::per_token, G::per_head, DType::fp32, 128, 128, 0, {},
       Mask::causal, 8, false},
      {"e4m3_per_token_bf16_window", DType::e4m3, G::per_token, G::per_token, G::per_tensor, DType::bf16, 96, 96, 0, {},
       Mask::sliding_window, 1, true},
      {"e5m2_per_token", DType::e5m2, G::per_token, G::per_tensor, G::none, DType::fp32, 128, 128, 0, {}, Mask::causal,
       4, true},
      {"mla_e4m3_nope_bf16_rope", DType::e4m3, G::per_token, G::per_token, G::per_tensor, DType::bf16, 192, 128, 64,
       DType::bf16, Mask::causal, 1, true},
      {"mla_e4m3_nope_fp16_rope_gqa", DType::e4m3, G::per_head, G::per_head, G::none, {}, 192, 128, 64, DType::fp16,
       Mask::none, 4, false},
      {"bf16_scaled", DType::bf16, G::per_token, G::per_head, G::per_tensor, DType::bf16, 128, 128, 0, {}, Mask::causal,
       2, false},
  };
  return cases;
}

class Fp8Matrix : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(Fp8Matrix, MatchesReference) {
  FLASHJIT_REQUIRE_GPU();
  const Fp8Case& k = GetParam();
  const Config config = fp8_config(k);
  auto kernel = get_kernel(config);
  DeviceProblem problem(config, fp8_shape(k), run_seed());
  const CheckResult r = check_against_reference(*kernel, config, problem);
  std::printf("[check] %-44s %-56s rel=%.3e lse=%.2e nonfinite=%zu %s\n", k.label, problem.shape().describe().c_str(),
              r.rel_error, r.lse_max_error, r.nonfinite, r.passed ? "ok" : "FAIL");
  EXPECT_TRUE(r.passed) << kernel->name() << ": " << r.summary();
}

INSTANTIATE_TEST_SUITE_P(Fp8, Fp8Matrix, ::testing::ValuesIn(fp8_cases()),
                         [](const ::testing::TestParamInfo<Fp8Case>& info) { return std::string(info.param.label); });

// The reference dequantises as the config says: against fp64 on the CPU, on the dequantised
// host copies of the same inputs.
TEST(Fp8Reference, AgreesWithFp64OnDequantisedInputs) {
  FLASHJIT_REQUIRE_GPU();
  for (const Fp8Case& k : {fp8_cases()[3], fp8_cases()[6]}) {
    const Config c = fp8_config(k);
    DeviceProblem problem(c, fp8_shape(k), run_seed());
    expect_reference_matches_cpu(c, problem, k.label);
  }
}

}  // namespace
}  // namespace flashjit::testing
