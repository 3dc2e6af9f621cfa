// The sm90 tile schedulers: every choice computes the same attention, also as pair_cta clusters
// (whose CTAs share K/V tiles), and the dynamic scheduler's tile counter is per stream, resets
// itself, and can be supplied by the caller.
#include "gpu_test_support.hpp"

#include "runtime/device.hpp"
#include "runtime/driver.hpp"

#include <cstdio>

namespace flashjit::testing {
namespace {

Config sm90_config(Mask mask, Scheduler scheduler, bool varlen, int head_dim = 128, int consumers = 0,
                   bool pair = false) {
  Config c;
  c.arch = current_device().arch();
  c.head_dim = {head_dim, head_dim, 0};
  if (consumers) c.tuning.consumer_warpgroups = consumers;
  c.mask = mask;
  c.varlen = varlen;
  c.lse = true;
  c.tuning.family = Family::sm90;
  c.tuning.scheduler = scheduler;
  c.tuning.pair_cta = pair;
  return c;
}

struct ScheduleCase {
  const char* label;
  Mask mask;
  Scheduler scheduler;
  bool varlen;
  int head_dim = 128;
  int consumers = 0;  // 0: the family's choice
  bool pair = false;  // pair_cta clusters
};
void PrintTo(const ScheduleCase& c, std::ostream* os) { *os << c.label; }

class ScheduleChoice : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(ScheduleChoice, MatchesReference) {
  FLASHJIT_REQUIRE_SM90();
  const ScheduleCase& sc = GetParam();
  const Config c = sm90_config(sc.mask, sc.scheduler, sc.varlen, sc.head_dim, sc.consumers, sc.pair);
  auto kernel = get_kernel(c);
  ProblemShape s;
  s.heads_q = s.heads_k = 3;
  if (sc.mask == Mask::sliding_window) s.window_left = 300, s.window_right = 0;
  if (sc.varlen) {
    s.batch = 4;
    s.seqlens_q = {700, 1, 129, 2000};
    s.seqlens_k = {900, 5, 129, 2000};
  } else {
    s.batch = 3;
    s.seqlen_q = 1400;  // 11 blocks of 128 rows: the last pair_cta cluster has one CTA without rows
    s.seqlen_k = 1700;
  }
  // Several launches on one stream: the dynamic scheduler's counter must be back at zero.
  for (int launch = 0; launch < 3; ++launch) {
    DeviceProblem problem(kernel->config(), s, 100 + launch);
    CheckResult r = check_against_reference(*kernel, kernel->config(), problem);
    std::printf("[check] %-40s launch %d rel=%.3e %s\n", sc.label, launch, r.rel_error,
                r.passed ? "ok" : "FAIL");
    EXPECT_TRUE(r.passed) << kernel->name() << ", launch " << launch << ": " << r.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedulers, ScheduleChoice,
    ::testing::Values(ScheduleCase{"causal_transient", Mask::causal, Scheduler::transient, false},
                      ScheduleCase{"causal_persistent", Mask::causal, Scheduler::persistent, false},
                      ScheduleCase{"causal_dynamic", Mask::causal, Scheduler::dynamic, false},
                      ScheduleCase{"causal_dynamic_varlen", Mask::causal, Scheduler::dynamic, true},
                      ScheduleCase{"window_dynamic", Mask::sliding_window, Scheduler::dynamic, false},
                      ScheduleCase{"none_dynamic_varlen", Mask::none, Scheduler::dynamic, true},
                      ScheduleCase{"none_transient", Mask::none, Scheduler::transient, false},
                      // three consumer warpgroups (BM 192) and one, each drawing tiles dynamically
                      ScheduleCase{"causal_dynamic_d64_bm192", Mask::causal, Scheduler::dynamic, true, 64, 3},
                      ScheduleCase{"causal_dynamic_d64_bm64", Mask::causal, Scheduler::dynamic, false, 64, 1},
                      // pair_cta: both CTAs walk the union of their KV ranges (causal and window
                      // ranges differ by a block), and CTAs without rows still free the stages
                      ScheduleCase{"none_persistent_pair", Mask::none, Scheduler::persistent, false, 128, 0, true},
                      ScheduleCase{"none_transient_pair", Mask::none, Scheduler::transient, false, 128, 0, true},
                      ScheduleCase{"causal_persistent_pair", Mask::causal, Scheduler::persistent, false, 128, 0, true},
                      ScheduleCase{"causal_transient_pair", Mask::causal, Scheduler::transient, false, 128, 0, true},
                      ScheduleCase{"window_persistent_pair", Mask::sliding_window, Scheduler::persistent, false, 128, 0, true},
                      ScheduleCase{"causal_persistent_pair_varlen", Mask::causal, Scheduler::persistent, true, 128, 0, true},
                      ScheduleCase{"none_persistent_pair_d64_bm192", Mask::none, Scheduler::persistent, true, 64, 3, true},
                      ScheduleCase{"causal_persistent_pair_d256", Mask::causal, Scheduler::persistent, false, 256, 0, true}),
    [](const ::testing::TestParamInfo<ScheduleCase>& info) { return std::string(info.param.label); });

// Launches on two streams overlap; each stream has its own counter, so neither loses tiles.
TEST(DynamicScheduler, ConcurrentStreamsKeepTheirTiles) {
  FLASHJIT_REQUIRE_SM90();
  const DriverApi& d = driver();
  const Config c = sm90_config(Mask::causal, Scheduler::dynamic, false);
  auto kernel = get_kernel(c);
  auto reference = get_reference_kernel(kernel->config());
  ProblemShape a, b;
  a.batch = 2, a.seqlen_q = a.seqlen_k = 3000, a.heads_q = a.heads_k = 4;
  b.batch = 3, b.seqlen_q = b.seqlen_k = 2100, b.heads_q = b.heads_k = 4;
  DeviceProblem pa(kernel->config(), a, 7), pb(kernel->config(), b, 8);
  CUstream sa, sb;
  FLASHJIT_CU(d.cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
  FLASHJIT_CU(d.cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
  reference->launch(pa.reference_args(), sa);
  reference->launch(pb.reference_args(), sb);
  for (int round = 0; round < 4; ++round) {
    pa.poison_outputs(sa);
    pb.poison_outputs(sb);
    kernel->launch(pa.args(), sa);
    kernel->launch(pb.args(), sb);
    FLASHJIT_CU(d.cuStreamSynchronize(sa));
    FLASHJIT_CU(d.cuStreamSynchronize(sb));
    for (const DeviceProblem* p : {&pa, &pb}) {
      CheckResult r = compare_with_reference(kernel->config(), *p);
      EXPECT_TRUE(r.passed) << "round " << round << ": " << r.summary();
    }
  }
  FLASHJIT_CU(d.cuStreamDestroy(sa));
  FLASHJIT_CU(d.cuStreamDestroy(sb));
}

// A caller-supplied counter is used, and each launch leaves it at zero.
TEST(DynamicScheduler, CallerCounterIsLeftAtZero) {
  FLASHJIT_REQUIRE_SM90();
  const DriverApi& d = driver();
  const Config c = sm90_config(Mask::causal, Scheduler::dynamic, false);
  auto kernel = get_kernel(c);
  ASSERT_TRUE(kernel->launch_info().tile_counter);
  CUdeviceptr counter;
  FLASHJIT_CU(d.cuMemAlloc(&counter, sizeof(int)));
  const int zero = 0;
  FLASHJIT_CU(d.cuMemcpyHtoD(counter, &zero, sizeof zero));
  ProblemShape s;
  s.batch = 2, s.seqlen_q = s.seqlen_k = 2500, s.heads_q = s.heads_k = 5;
  DeviceProblem problem(kernel->config(), s, 9);
  auto reference = get_reference_kernel(kernel->config());
  reference->launch(problem.reference_args());
  for (int launch = 0; launch < 3; ++launch) {
    problem.poison_outputs();
    AttentionArgs args = problem.args();
    args.tile_counter = reinterpret_cast<int*>(counter);
    kernel->launch(args);
    FLASHJIT_CU(d.cuStreamSynchronize(nullptr));
    int after = -1;
    FLASHJIT_CU(d.cuMemcpyDtoH(&after, counter, sizeof after));
    EXPECT_EQ(after, 0) << "launch " << launch;
    CheckResult r = compare_with_reference(kernel->config(), problem);
    EXPECT_TRUE(r.passed) << "launch " << launch << ": " << r.summary();
  }
  FLASHJIT_CU(d.cuMemFree(counter));
}

}  // namespace
}  // namespace flashjit::testing
