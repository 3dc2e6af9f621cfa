// Per-arch heuristics: family choice, tuning defaults within the budgets, pinned fields kept,
// tuning rules enforced, determinism.
#include "config_issues.hpp"
#include "generator/config.hpp"
#include "generator/family.hpp"
#include "generator/resolve.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace flashjit {
namespace {

Config make(const char* arch, int d, Mask mask = Mask::none) {
  Config c;
  c.arch = arch;
  c.head_dim = {d, d, 0};
  c.mask = mask;
  return c;
}

TEST(Resolve, Sm90aPicksTheSm90Family) {
  EXPECT_EQ(*resolve(make("sm_90a", 128)).tuning.family, Family::sm90);
}

TEST(Resolve, OtherArchsPickSm80) {
  for (const char* a : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100a", "sm_120"})
    EXPECT_EQ(*resolve(make(a, 128)).tuning.family, Family::sm80) << a;
}

TEST(Resolve, HeadDimsTheSm90FamilyLacksFallBackToSm80) {
  EXPECT_EQ(*resolve(make("sm_90a", 96)).tuning.family, Family::sm80);
}

TEST(Resolve, ExplicitFamilyThatCannotBuildIsAnError) {
  Config c = make("sm_80", 128);
  c.tuning.family = Family::sm90;
  auto issues = check_config(c);
  ASSERT_FALSE(issues.empty());
  EXPECT_EQ(issues[0].path, "arch");
}

TEST(Resolve, EveryTuningFieldOfTheFamilyIsSet) {
  Config r = resolve(make("sm_90a", 128));
  const Tuning& t = r.tuning;
  EXPECT_TRUE(t.BM && t.BN && t.num_kv_stages && t.consumer_warpgroups && t.scheduler &&
              t.pair_cta && t.swizzle);
  EXPECT_FALSE(t.num_warps);  // an sm80 field
  Config s = resolve(make("sm_80", 128));
  EXPECT_TRUE(s.tuning.BM && s.tuning.BN && s.tuning.num_warps && s.tuning.num_kv_stages);
  EXPECT_FALSE(s.tuning.consumer_warpgroups);
}

TEST(Resolve, DefaultsFitTheSharedMemoryBudget) {
  for (const char* arch : {"sm_80", "sm_86", "sm_90a", "sm_100a"})
    for (int d : {64, 128, 192, 256})
      for (Mask m : {Mask::none, Mask::causal}) {
        Config r = resolve(make(arch, d, m));
        int smem = family(*r.tuning.family).smem_bytes(r);
        EXPECT_LE(smem, parse_arch(arch)->max_smem_per_block) << arch << " d" << d;
      }
}

TEST(Resolve, PinnedFieldsAreKept) {
  Config c = make("sm_90a", 128);
  c.tuning.BN = 112;
  c.tuning.num_kv_stages = 3;
  Config r = resolve(c);
  EXPECT_EQ(*r.tuning.BN, 112);
  EXPECT_EQ(*r.tuning.num_kv_stages, 3);
}

TEST(Resolve, OversizedTilesAreRejectedWithTheBudget) {
  Config c = make("sm_90a", 256);
  c.tuning.BN = 256;
  auto issues = check_config(c);
  ASSERT_FALSE(issues.empty());
  EXPECT_EQ(issues[0].path, "tuning.BN");
  EXPECT_NE(issues[0].rule.find("shared memory"), std::string::npos);
}

// What the sm90 family chooses beside a pinned field stays within the tiles measured to compile
// without register spills (generator/sm90_spill_limits.cpp).
TEST(Resolve, Sm90ChoicesAdaptToPinnedFields) {
  Config c = make("sm_90a", 128);
  c.tuning.BN = 208;  // more than two consumers' registers hold at d128
  Config r = resolve(c);
  EXPECT_EQ(*r.tuning.consumer_warpgroups, 1);
  EXPECT_EQ(*r.tuning.BM, 64);

  c = make("sm_90a", 128, Mask::sliding_window);
  c.tuning.consumer_warpgroups = 3;
  EXPECT_EQ(*resolve(c).tuning.BN, 48);
  c.mask = Mask::none;
  c.tuning.pair_cta = true;
  EXPECT_EQ(*resolve(c).tuning.BN, 64);

  // A pin no consumer count can hold is rejected, naming the field and the largest tile that fits.
  c = make("sm_90a", 128, Mask::sliding_window);
  c.tuning.BN = 176;
  const auto issues = check_config(c);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].path, "tuning.BN");
  EXPECT_NE(issues[0].rule.find("tiles up to BN 160 compile without spills"), std::string::npos) << issues[0].rule;
}

// The sm80 family likewise fits its other fields to a pinned one, and rejects pinned tiles that
// spill unless they are its own defaults.
TEST(Resolve, Sm80ChoicesAdaptToPinnedFields) {
  Config c = make("sm_80", 128);
  c.tuning.num_kv_stages = 2;  // the default BN 48 with 32-row warps spills with two stages
  Config r = resolve(c);
  EXPECT_EQ(*r.tuning.BM / *r.tuning.num_warps, 16);
  EXPECT_EQ(*r.tuning.num_kv_stages, 2);

  c = make("sm_80", 96, Mask::causal);
  c.tuning.BN = 128;
  r = resolve(c);
  EXPECT_EQ(*r.tuning.BN, 128);
  EXPECT_EQ(*r.tuning.BM / *r.tuning.num_warps, 16);

  c = make("sm_80", 128);
  c.tuning.BM = 128;
  c.tuning.BN = 64;
  c.tuning.num_warps = 4;
  c.tuning.num_kv_stages = 2;
  const auto issues = check_config(c);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].path, "tuning.BN");
  EXPECT_NE(issues[0].rule.find("spills registers"), std::string::npos) << issues[0].rule;
  // Its defaults stay accepted, also where the rule measured on sm_80 is stricter than the
  // target's ptxas: d256 on sm_90a keeps two K/V stages.
  Config sm80 = make("sm_90a", 256);
  sm80.tuning.family = Family::sm80;
  const Config def = resolve(sm80);
  EXPECT_EQ(*def.tuning.num_kv_stages, 2);
  EXPECT_TRUE(check_config(def).empty());
}

TEST(Resolve, Sm90TuningRules) {
  Config c = make("sm_90a", 128);
  c.tuning.BM = 128;
  c.tuning.consumer_warpgroups = 3;
  c.tuning.BN = 100;
  c.tuning.num_warps = 4;
  const auto paths = issue_paths(c);
  EXPECT_TRUE(paths.count("tuning.BM"));
  EXPECT_TRUE(paths.count("tuning.BN"));
  EXPECT_TRUE(paths.count("tuning.num_warps"));
}

TEST(Resolve, Sm80TuningRules) {
  Config c = make("sm_80", 128);
  c.tuning.BM = 96;
  c.tuning.num_warps = 6;
  c.tuning.consumer_warpgroups = 2;
  const auto paths = issue_paths(c);
  EXPECT_TRUE(paths.count("tuning.BM"));
  EXPECT_TRUE(paths.count("tuning.num_warps"));
  EXPECT_TRUE(paths.count("tuning.consumer_warpgroups"));
}

// Masked tiles differ in length, so sm90 draws them dynamically; "auto" means the family's choice.
TEST(Resolve, SchedulerDefaultsFollowTheMask) {
  EXPECT_EQ(*resolve(make("sm_90a", 128)).tuning.scheduler, Scheduler::persistent);
  EXPECT_EQ(*resolve(make("sm_90a", 128, Mask::causal)).tuning.scheduler, Scheduler::dynamic);
  EXPECT_EQ(*resolve(make("sm_90a", 64, Mask::sliding_window)).tuning.scheduler, Scheduler::dynamic);
  EXPECT_EQ(*resolve(make("sm_80", 128, Mask::causal)).tuning.scheduler, Scheduler::transient);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Config c = make(arch, 128, Mask::causal);
    c.tuning.scheduler = Scheduler::automatic;
    EXPECT_EQ(resolve(c).tuning.scheduler, resolve(make(arch, 128, Mask::causal)).tuning.scheduler) << arch;
  }
  Config pinned = make("sm_90a", 128, Mask::causal);
  pinned.tuning.scheduler = Scheduler::persistent;
  EXPECT_EQ(*resolve(pinned).tuning.scheduler, Scheduler::persistent);
}

// A pair_cta cluster needs both CTAs on one head: without a pinned scheduler it takes the
// static persistent order, and the dynamic one is rejected with the reason.
TEST(Resolve, PairCtaTakesAStaticScheduler) {
  Config c = make("sm_90a", 128, Mask::causal);
  c.tuning.pair_cta = true;
  const Config r = resolve(c);
  EXPECT_TRUE(*r.tuning.pair_cta);
  EXPECT_EQ(*r.tuning.scheduler, Scheduler::persistent);
  c.tuning.scheduler = Scheduler::transient;
  EXPECT_EQ(*resolve(c).tuning.scheduler, Scheduler::transient);
  c.tuning.scheduler = Scheduler::dynamic;
  const auto issues = check_config(c);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].path, "tuning.scheduler");
  EXPECT_NE(issues[0].rule.find("pair_cta"), std::string::npos);
  EXPECT_FALSE(*resolve(make("sm_90a", 128, Mask::causal)).tuning.pair_cta);

  Config short_d256 = make("sm_90a", 256, Mask::causal);
  short_d256.tuning.seqlen_hint = 512;
  EXPECT_FALSE(*resolve(short_d256).tuning.pair_cta);  // opt-in, also where its tiles are short

  Config ampere = make("sm_80", 128);
  ampere.tuning.pair_cta = true;
  EXPECT_TRUE(issue_paths(ampere).count("tuning.pair_cta"));
}

Config hinted(const char* arch, int d, Mask mask, int seqlen) {
  Config c = make(arch, d, mask);
  c.tuning.seqlen_hint = seqlen;
  return c;
}

// The documented length rules of the sm90 family (docs/config.md, tuning.seqlen_hint).
TEST(Resolve, Sm90TilesFollowTheLengthHint) {
  struct Case { int d; Mask mask; int seqlen; int BM, BN; };
  const Case cases[] = {
      {64, Mask::none, 512, 128, 128},     {64, Mask::none, 1024, 128, 128},
      {64, Mask::none, 2048, 192, 112},    {64, Mask::causal, 2048, 128, 128},
      {64, Mask::causal, 4096, 192, 112},  {128, Mask::none, 512, 128, 128},
      {128, Mask::none, 2048, 128, 128},   {128, Mask::none, 4096, 128, 176},
      {128, Mask::causal, 4096, 128, 128},
      {128, Mask::causal, 8192, 128, 176}, {256, Mask::causal, 1024, 128, 64},
      {256, Mask::causal, 2048, 128, 80},  {256, Mask::none, 512, 128, 80},
      // Sliding windows keep the smaller tiles at every length (the larger ones spill).
      {64, Mask::sliding_window, 8192, 128, 128},  {128, Mask::sliding_window, 8192, 128, 128},
      {192, Mask::sliding_window, 8192, 128, 96},  {256, Mask::sliding_window, 8192, 128, 64},
  };
  for (const Case& k : cases) {
    Config r = resolve(hinted("sm_90a", k.d, k.mask, k.seqlen));
    EXPECT_EQ(*r.tuning.BM, k.BM) << "d" << k.d << " " << to_string(k.mask) << " " << k.seqlen;
    EXPECT_EQ(*r.tuning.BN, k.BN) << "d" << k.d << " " << to_string(k.mask) << " " << k.seqlen;
    // Three K/V stages only for the short-tile d64 causal kernel (BM 128).
    const int stages = k.d == 64 && k.mask == Mask::causal && k.BM == 128 ? 3 : 2;
    EXPECT_EQ(*r.tuning.num_kv_stages, stages) << "d" << k.d << " " << to_string(k.mask) << " " << k.seqlen;
  }
  EXPECT_EQ(*resolve(make("sm_90a", 64, Mask::causal)).tuning.num_kv_stages, 3);  // no hint: BM 128
}

// fp8's own tile rules (docs/config.md): d128 without a mask BN 128 on three stages up to 8k
// keys and BN 192 on two beyond, causal BN 192 from 8k; d256 BN 96 (fp8's register table) from
// 1k keys, 64 at 512 and with a sliding window; a pinned BN keeps two stages.
TEST(Resolve, Sm90Fp8TilesFollowTheLengthHint) {
  struct Case { int d; Mask mask; int seqlen; int BN, stages, BM = 128; };
  const Case cases[] = {
      {128, Mask::none, 512, 128, 3},     {128, Mask::none, 8192, 128, 3},    {128, Mask::none, 16384, 192, 2},
      {128, Mask::none, 0, 192, 2},       {128, Mask::causal, 4096, 128, 2},  {128, Mask::causal, 8192, 192, 2},
      {128, Mask::sliding_window, 16384, 128, 2},                             {256, Mask::none, 512, 64, 2},
      {256, Mask::none, 1024, 96, 2},     {256, Mask::causal, 16384, 96, 2},  {256, Mask::none, 0, 96, 2},
      {256, Mask::sliding_window, 16384, 64, 2},
      // d64: three consumers without a mask at every length (BN 128, their register limit) and
      // causal from 2k; two below (causal on three stages).
      {64, Mask::none, 512, 128, 3, 192}, {64, Mask::none, 16384, 128, 2, 192}, {64, Mask::none, 0, 128, 2, 192},
      {64, Mask::causal, 1024, 128, 3},   {64, Mask::causal, 2048, 128, 2, 192},
      {64, Mask::sliding_window, 4096, 128, 2},
  };
  for (const Case& k : cases) {
    Config c = make("sm_90a", k.d, k.mask);
    c.dtype.qkv = DType::e4m3;
    c.dtype.out = DType::bf16;
    if (k.seqlen) c.tuning.seqlen_hint = k.seqlen;
    const Config r = resolve(c);
    const std::string what = "d" + std::to_string(k.d) + " " + to_string(k.mask) + " " + std::to_string(k.seqlen);
    EXPECT_EQ(*r.tuning.BM, k.BM) << what;
    EXPECT_EQ(*r.tuning.BN, k.BN) << what;
    EXPECT_EQ(*r.tuning.num_kv_stages, k.stages) << what;
  }
  Config pinned = make("sm_90a", 128);
  pinned.dtype.qkv = DType::e4m3;
  pinned.dtype.out = DType::bf16;
  pinned.tuning.seqlen_hint = 2048;
  pinned.tuning.BN = 160;
  EXPECT_EQ(*resolve(pinned).tuning.num_kv_stages, 2);
}

// The hint is spent by resolution: the resolved config names tiles, so hints that lead to the
// same tiles give one kernel, and pinned tiles win over the hint.
TEST(Resolve, LengthHintIsNotKeptAndDoesNotOverridePinnedTiles) {
  Config a = resolve(hinted("sm_90a", 128, Mask::none, 4096));
  EXPECT_FALSE(a.tuning.seqlen_hint.has_value());
  EXPECT_EQ(canonical_json(a), canonical_json(resolve(hinted("sm_90a", 128, Mask::none, 8192))));
  EXPECT_EQ(canonical_json(a), canonical_json(resolve(make("sm_90a", 128))));
  Config pinned = hinted("sm_90a", 64, Mask::none, 512);
  pinned.tuning.BM = 192;
  Config r = resolve(pinned);
  EXPECT_EQ(*r.tuning.BM, 192);
  EXPECT_EQ(*r.tuning.BN, 112);
  // sm80 accepts the hint and keeps its own tiles.
  EXPECT_EQ(canonical_json(resolve(hinted("sm_80", 128, Mask::causal, 512))),
            canonical_json(resolve(make("sm_80", 128, Mask::causal))));
}

TEST(Resolve, LengthsRoundUpToAPowerOfTwo) {
  EXPECT_EQ(with_seqlen_hint(Config{}, 1).tuning.seqlen_hint, 16);
  EXPECT_EQ(with_seqlen_hint(Config{}, 512).tuning.seqlen_hint, 512);
  EXPECT_EQ(with_seqlen_hint(Config{}, 513).tuning.seqlen_hint, 1024);
  EXPECT_EQ(with_seqlen_hint(Config{}, 100000).tuning.seqlen_hint, 131072);
  EXPECT_EQ(with_seqlen_hint(Config{}, int64_t{1} << 40).tuning.seqlen_hint, 1 << 30);
  Config c;
  c.tuning.seqlen_hint = 700;
  EXPECT_EQ(with_seqlen_hint(c, 100000).tuning.seqlen_hint, 700);
}

TEST(Resolve, Sm80HasOnlyTheTransientScheduler) {
  for (Scheduler s : {Scheduler::persistent, Scheduler::dynamic}) {
    Config c = make("sm_80", 128);
    c.tuning.scheduler = s;
    auto issues = check_config(c);
    ASSERT_EQ(issues.size(), 1u) << to_string(s);
    EXPECT_EQ(issues[0].path, "tuning.scheduler");
  }
}

TEST(Resolve, IsIdempotentAndDeterministic) {
  Config c = make("sm_90a", 64, Mask::causal);
  Config r1 = resolve(c), r2 = resolve(c);
  EXPECT_EQ(canonical_json(r1), canonical_json(r2));
  EXPECT_EQ(canonical_json(resolve(r1)), canonical_json(r1));
}

TEST(Resolve, ReadableNameDescribesTheKernel) {
  Config c = make("sm_90a", 128, Mask::causal);
  c.group = 4;
  c.lse = true;
  std::string n = readable_name(resolve(c));
  EXPECT_EQ(n.rfind("fwd_sm90a_bf16_d128_causal_g4_lse_sm90_bm128_bn", 0), 0u) << n;
}

}  // namespace
}  // namespace flashjit
