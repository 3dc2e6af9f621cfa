// The sm90 family's register tables (generator/sm90_spill_limits.cpp) against the compiler: the
// largest tile each entry allows, compiled with NVRTC for sm_90a, spills nothing and draws no
// serialising ptxas advisory (C75xx), lean (no LSE, one sequence, persistent) and heavy (LSE,
// ragged, dynamically scheduled). The tables were measured by compile sweeps; a kernel change that
// pushes one of their tiles over the edge fails here, not in a user's config. Entries of 16 (shared
// memory's limit rather than registers') and head dims a table does not take are skipped.
#include "generator/config.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "generator/sm90_spill_limits.hpp"
#include "runtime/compiler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace flashjit {
namespace {

struct Table {
  const char* name;
  bool fp8, pair;
  ScaleGranularity q = ScaleGranularity::per_tensor, k = ScaleGranularity::per_tensor;  // fp8's scales
};

void PrintTo(const Table& t, std::ostream* os) { *os << t.name; }

std::vector<Config> tiles_at_the_limits(const Table& t) {
  std::vector<Config> out;
  for (int cwg = 1; cwg <= 3; ++cwg)
    for (Mask mask : {Mask::none, Mask::causal, Mask::sliding_window})
      for (int qk = 64; qk <= 256; qk += 64)
        for (int v = 64; v <= 256; v += 64)
          for (bool heavy : {false, true}) {
            Config c;
            c.arch = "sm_90a";
            c.head_dim = {qk, v, 0};
            c.mask = mask;
            if (t.fp8) {
              c.dtype.qkv = DType::e4m3;
              // Per-token K: lean with per-tensor Q, heavy with per-token Q as well.
              const bool key_tokens = t.k == ScaleGranularity::per_token;
              c.scales = {key_tokens && !heavy ? ScaleGranularity::per_tensor : t.q, t.k, ScaleGranularity::per_tensor};
              if (t.q == ScaleGranularity::per_token || t.k == ScaleGranularity::per_token)
                c.dtype.scale = heavy ? DType::bf16 : DType::fp32;
            }
            c.lse = heavy;
            c.varlen = heavy;
            c.tuning.family = Family::sm90;
            c.tuning.consumer_warpgroups = cwg;
            c.tuning.pair_cta = t.pair;
            c.tuning.scheduler = heavy && !t.pair ? Scheduler::dynamic : Scheduler::persistent;
            const int bn = sm90_spill_free_bn(c, cwg, t.pair);
            if (bn == 0 || bn == 256) continue;
            c.tuning.BN = bn;
            out.push_back(c);
          }
  return out;
}

class Sm90SpillLimits : public ::testing::TestWithParam<Table> {};

TEST_P(Sm90SpillLimits, EveryEntryCompilesAtItsLimit) {
  const std::vector<Config> configs = tiles_at_the_limits(GetParam());
  ASSERT_GT(configs.size(), 40u);  // the table is there, and most of it is registers' limits
  std::vector<std::string> failures(configs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < configs.size();) {
      const Config& c = configs[i];
      std::string& f = failures[i];
      try {
        const Config r = resolve(c);
        const CompiledKernel k = compile(generate(r));
        if (k.report.spill_stores != 0 || k.log.find("C75") != std::string::npos)
          f = canonical_json(r) + "\n" + k.log;
      } catch (const std::exception& e) {
        f = canonical_json(c) + ": " + e.what();
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::max(2u, std::thread::hardware_concurrency()); ++t) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  for (const std::string& f : failures) EXPECT_TRUE(f.empty()) << f;
}

INSTANTIATE_TEST_SUITE_P(Tables, Sm90SpillLimits,
                         ::testing::Values(Table{"single", false, false}, Table{"pair_cta", false, true},
                                           Table{"fp8", true, false}, Table{"fp8_pair_cta", true, true},
                                           Table{"fp8_query_tokens", true, false, ScaleGranularity::per_token},
                                           Table{"fp8_pair_cta_query_tokens", true, true, ScaleGranularity::per_token},
                                           Table{"fp8_key_tokens", true, false, ScaleGranularity::per_token,
                                                 ScaleGranularity::per_token}),
                         [](const ::testing::TestParamInfo<Table>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace flashjit
