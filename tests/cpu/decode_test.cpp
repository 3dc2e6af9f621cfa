// The decode family on the CPU: when "auto" picks it, the tiles it resolves to, the rules it
// enforces, how launches are planned (row blocks, split counts, the combine pass, the
// workspace) and which arguments are refused, and that its kernels compile without spills.
#include "config_issues.hpp"
#include "generator/config.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/compiler.hpp"
#include "runtime/decode_splits.hpp"
#include "runtime/family_host.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>

namespace flashjit {
namespace {

Config decode_config(int group, int tokens, int d = 128) {
  Config c;
  c.arch = "sm_90a";
  c.head_dim = {d, d, 0};
  c.group = group;
  c.tuning.max_seqlen_q = tokens;
  return c;
}

TEST(DecodeFamily, AutoPicksDecodeForFewQueryTokens) {
  EXPECT_EQ(*resolve(decode_config(4, 1)).tuning.family, Family::decode);
  EXPECT_EQ(*resolve(decode_config(8, 16)).tuning.family, Family::decode);
  // More tokens than a decode step: prefill, which has no use for the bound and drops it.
  const Config r = resolve(decode_config(4, 17));
  EXPECT_EQ(*r.tuning.family, Family::sm90);
  EXPECT_FALSE(r.tuning.max_seqlen_q);
  Config plain = decode_config(4, 1);
  plain.tuning.max_seqlen_q.reset();
  EXPECT_EQ(*resolve(plain).tuning.family, Family::sm90);
}

TEST(DecodeFamily, RowsPerCtaFollowGroupTimesTokens) {
  EXPECT_EQ(*resolve(decode_config(1, 1)).tuning.BM, 16);
  EXPECT_EQ(*resolve(decode_config(8, 2)).tuning.BM, 16);
  EXPECT_EQ(*resolve(decode_config(8, 4)).tuning.BM, 32);
  EXPECT_EQ(*resolve(decode_config(16, 4)).tuning.BM, 64);
  EXPECT_EQ(*resolve(decode_config(16, 16)).tuning.BM, 128);  // 256 rows: two 128-row wgmma blocks on sm_90a
  Config sm80 = decode_config(16, 16);
  sm80.arch = "sm_80";
  EXPECT_EQ(*resolve(sm80).tuning.BM, 64);  // four mma.sync row blocks
  const Config r = resolve(decode_config(4, 1));
  EXPECT_EQ(*r.tuning.num_warps, 4);
  EXPECT_EQ(*r.tuning.BN, 64);
  EXPECT_EQ(*r.tuning.splitk_partitions, 0);  // chosen per launch
  EXPECT_GE(*r.tuning.num_kv_stages, 2);
  EXPECT_EQ(readable_name(r), "fwd_sm90a_bf16_d128_none_g4_decode_q1_bm16_bn64");
  // Head dims up to 64 take 128-key tiles in 16-bit caches (half the bytes a key of d128 has).
  EXPECT_EQ(*resolve(decode_config(4, 1, 64)).tuning.BN, 128);
  Config fp8 = decode_config(4, 1, 64);
  fp8.dtype.qkv = DType::e4m3;
  EXPECT_EQ(*resolve(fp8).tuning.BN, 64);
}

TEST(DecodeFamily, RulesNameTheField) {
  Config c = decode_config(4, 1);
  c.tuning.family = Family::decode;
  c.head_dim = {192, 128, 64};
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"head_dim.rope"});
  c = decode_config(4, 1, 80);
  c.tuning.family = Family::decode;
  c.dtype.qkv = DType::e4m3;  // fp8 rows are read 32 values per step
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"head_dim"});
  c = decode_config(4, 1);
  c.tuning.family = Family::decode;
  c.scales.k = ScaleGranularity::per_tensor;  // scales come with fp8 caches
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"scales.k"});
  c = decode_config(4, 1);
  c.tuning.BM = 48;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.BM"});
  c = decode_config(4, 1);
  c.tuning.BN = 48;  // four warps split a 16-row block's keys: multiples of 64
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.BN"});
  c = decode_config(4, 1);
  c.tuning.scheduler = Scheduler::persistent;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.scheduler"});
  c = decode_config(4, 1);
  c.tuning.pair_cta = true;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.pair_cta"});
  c = decode_config(4, 1);
  c.tuning.splitk_partitions = 300;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.splitk_partitions"});
  c = decode_config(4, 1);
  c.tuning.max_seqlen_q = 0;
  EXPECT_TRUE(issue_paths(c).count("tuning.max_seqlen_q"));
  c = decode_config(4, 1, 256);
  c.tuning.num_kv_stages = 8;  // 8 x 64 KB of K/V does not fit
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_kv_stages"});
}

// sm_90a brings fp8 caches' K/V tiles in as TMA boxes where a box can take them: a contiguous
// cache, or pages of at least 8 rows that a tile holds whole or lies inside, in whole 128-byte
// panels without per-token K scales; cp.async gathers everywhere else, and for 16-bit caches
// unless tuning.kv_loads names TMA.
TEST(DecodeFamily, TmaLoadsForFp8CachesWhereBoxesFit) {
  auto paged = [](int page, DType dtype = DType::e4m3, int d = 128) {
    Config c = decode_config(4, 1, d);
    c.dtype.qkv = dtype;
    if (dtype == DType::e4m3) c.dtype.out = DType::bf16;
    c.kv_layout = {true, page};
    return c;
  };
  auto loads = [](const Config& c) { return *resolve(c).tuning.kv_loads; };
  Config contiguous = decode_config(4, 1);
  contiguous.dtype = {DType::e4m3, DType::bf16};
  EXPECT_EQ(loads(contiguous), KvLoads::tma);
  for (int page : {8, 16, 64, 256}) EXPECT_EQ(loads(paged(page)), KvLoads::tma) << page;
  for (int page : {1, 2, 4}) EXPECT_EQ(loads(paged(page)), KvLoads::cp_async) << page;
  EXPECT_EQ(loads(paged(16, DType::e4m3, 64)), KvLoads::cp_async);  // 64 bytes a row
  EXPECT_EQ(loads(paged(16, DType::bf16)), KvLoads::cp_async);      // 16-bit: gathers
  EXPECT_EQ(loads(decode_config(4, 16)), KvLoads::cp_async);
  Config per_token = paged(16);
  per_token.scales = {ScaleGranularity::per_token, ScaleGranularity::per_token, ScaleGranularity::per_tensor};
  per_token.dtype.scale = DType::fp32;
  EXPECT_EQ(loads(per_token), KvLoads::cp_async);
  Config ampere = paged(16);
  ampere.arch = "sm_80";
  EXPECT_EQ(loads(ampere), KvLoads::cp_async);
  const Config r = resolve(paged(16));
  EXPECT_EQ(readable_name(r), "fwd_sm90a_e4m3_d128_obf16_none_g4_paged16_decode_q1_tma_bm16_bn64");
  const KernelSource s = generate(r);
  EXPECT_TRUE(s.launch.uses_tma);
  EXPECT_NE(s.unit.find("kTmaKv = true"), std::string::npos);
  EXPECT_FALSE(generate(resolve(ampere)).launch.uses_tma);
  // 16-bit caches take TMA where it is named, with 96 and 128 columns' panels as the rules say.
  Config named = paged(16, DType::bf16);
  named.tuning.kv_loads = KvLoads::tma;
  const KernelSource sn = generate(resolve(named));
  EXPECT_TRUE(sn.launch.uses_tma);
  // No row offsets in TMA's ring: less shared memory than the same tile's gathers.
  Config gathers = paged(16, DType::bf16);
  EXPECT_LT(sn.launch.smem_bytes, generate(resolve(gathers)).launch.smem_bytes);
}

TEST(DecodeFamily, TmaRulesNameTheField) {
  auto tma = [](Config c) {
    c.tuning.kv_loads = KvLoads::tma;
    return c;
  };
  EXPECT_TRUE(check_config(tma(decode_config(4, 1))).empty());
  Config c = tma(decode_config(4, 1));
  c.arch = "sm_80";
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
  c = tma(decode_config(4, 1));
  c.kv_layout = {true, 4};
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
  c = tma(decode_config(4, 1));
  c.kv_layout = {true, 128};
  c.tuning.BN = 192;  // pages of 128 straddle tiles of 192 keys
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
  c.tuning.kv_loads = KvLoads::cp_async;
  EXPECT_TRUE(check_config(c).empty());
  c = tma(decode_config(4, 1, 96));
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
  c = tma(decode_config(4, 1));
  c.tuning.family = Family::sm90;
  c.tuning.max_seqlen_q.reset();
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
  c = tma(decode_config(4, 1));
  c.tuning.family = Family::sm80;
  c.tuning.max_seqlen_q.reset();
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
}

// sm_90a gives 16-bit caches whose packed rows fill a 64-row tile the wgmma pass: two
// warpgroups of 64 keys each by default, one if four warps are named; fewer keys where two stages
// would not fit; mma.sync below 64 rows, for fp8, for head dims off 64-column panels, on other
// targets, or where a tile wgmma cannot take is named.
TEST(DecodeFamily, WgmmaPassFromSixtyFourPackedRows) {
  const Config r = resolve(decode_config(4, 16));
  EXPECT_EQ(*r.tuning.consumer_warpgroups, 2);
  EXPECT_EQ(*r.tuning.BM, 64);
  EXPECT_EQ(*r.tuning.num_warps, 8);
  EXPECT_EQ(*r.tuning.BN, 128);
  EXPECT_EQ(*r.tuning.num_kv_stages, 3);
  EXPECT_EQ(readable_name(r), "fwd_sm90a_bf16_d128_none_g4_decode_q16_wgmma_bm64_bn128");
  EXPECT_EQ(*resolve(decode_config(16, 4)).tuning.consumer_warpgroups, 2);
  EXPECT_EQ(*resolve(decode_config(4, 8)).tuning.consumer_warpgroups, 0);  // 32 rows
  Config four = decode_config(4, 16);
  four.tuning.num_warps = 4;
  const Config r4 = resolve(four);
  EXPECT_EQ(*r4.tuning.consumer_warpgroups, 1);
  EXPECT_EQ(*r4.tuning.BN, 64);
  const Config d256 = resolve(decode_config(4, 16, 256));
  EXPECT_EQ(*d256.tuning.consumer_warpgroups, 2);
  EXPECT_EQ(*d256.tuning.BN, 64);  // 128 keys of 2 x 256 columns, two stages: 288 KB
  EXPECT_EQ(*d256.tuning.num_kv_stages, 2);
  Config d256_tma = decode_config(4, 16, 256);
  d256_tma.tuning.kv_loads = KvLoads::tma;
  EXPECT_EQ(*resolve(d256_tma).tuning.BN, 96);  // TMA's ring keeps no row offsets: 96 keys fit two stages
  EXPECT_LE(generate(d256).launch.smem_bytes, 232448);
  for (const char* arch : {"sm_80", "sm_100a"}) {
    Config c = decode_config(4, 16);
    c.arch = arch;
    EXPECT_EQ(*resolve(c).tuning.consumer_warpgroups, 0) << arch;
  }
  Config fp8 = decode_config(4, 16);
  fp8.dtype.qkv = DType::e4m3;
  EXPECT_EQ(*resolve(fp8).tuning.consumer_warpgroups, 0);
  EXPECT_EQ(*resolve(decode_config(4, 16, 96)).tuning.consumer_warpgroups, 0);
  Config bm32 = decode_config(4, 16);
  bm32.tuning.BM = 32;
  EXPECT_EQ(*resolve(bm32).tuning.consumer_warpgroups, 0);
}

// From 128 packed rows (8 query heads x 16 tokens) the wgmma pass takes a 128-row tile: two
// warpgroups of 64 rows, each on all 128 keys of a tile, two stages; so one CTA reads the
// cache where two 64-row CTAs would each read it. A 64-row tile stays available by name.
TEST(DecodeFamily, WgmmaPassTakesOneHundredTwentyEightRowsWhereAStepPacksThem) {
  const Config r = resolve(decode_config(8, 16));
  EXPECT_EQ(*r.tuning.consumer_warpgroups, 2);
  EXPECT_EQ(*r.tuning.BM, 128);
  EXPECT_EQ(*r.tuning.num_warps, 8);
  EXPECT_EQ(*r.tuning.BN, 128);
  EXPECT_EQ(*r.tuning.num_kv_stages, 2);
  EXPECT_EQ(readable_name(r), "fwd_sm90a_bf16_d128_none_g8_decode_q16_wgmma_bm128_bn128");
  EXPECT_EQ(*resolve(decode_config(16, 16)).tuning.BM, 128);  // 256 rows: two row blocks
  EXPECT_EQ(*resolve(decode_config(8, 8)).tuning.BM, 64);     // 64 rows
  const Config d256 = resolve(decode_config(8, 16, 256));
  EXPECT_EQ(*d256.tuning.BM, 128);
  EXPECT_EQ(*d256.tuning.BN, 80);  // 64 KB of Q and two stages of 80 keys: 224 KB
  EXPECT_EQ(*d256.tuning.num_kv_stages, 2);
  EXPECT_LE(generate(d256).launch.smem_bytes, 232448);
  Config narrow = decode_config(8, 16);
  narrow.tuning.BM = 64;
  const Config r64 = resolve(narrow);
  EXPECT_EQ(*r64.tuning.consumer_warpgroups, 2);
  EXPECT_EQ(*r64.tuning.BN, 128);
  Config one = decode_config(8, 16);
  one.tuning.num_warps = 4;
  EXPECT_EQ(*resolve(one).tuning.BM, 64);  // one warpgroup takes 64 rows
  Config sm80 = decode_config(8, 16);
  sm80.arch = "sm_80";
  EXPECT_EQ(*resolve(sm80).tuning.BM, 64);  // mma.sync: at most four 16-row warps
}

TEST(DecodeFamily, OneHundredTwentyEightRowRulesNameTheField) {
  auto wide = [](int warpgroups) {
    Config c = decode_config(8, 16);
    c.tuning.BM = 128;
    c.tuning.consumer_warpgroups = warpgroups;
    return c;
  };
  EXPECT_TRUE(check_config(wide(2)).empty());
  EXPECT_EQ(issue_paths(wide(1)), std::set<std::string>{"tuning.BM"});
  EXPECT_EQ(issue_paths(wide(0)), std::set<std::string>{"tuning.BM"});
  Config c = wide(2);
  c.tuning.num_warps = 4;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_warps"});
  c = wide(2);
  c.tuning.BN = 80;  // each warpgroup takes all of a tile's keys, 16 at a time
  EXPECT_TRUE(check_config(c).empty());
  c.tuning.BN = 72;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.BN"});
  c = wide(2);
  c.tuning.num_kv_stages = 6;  // 32 KB of Q and 6 x 32 KB of K/V
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_kv_stages"});
  c = wide(2);
  c.tuning.kv_loads = KvLoads::tma;
  EXPECT_TRUE(check_config(c).empty());
}

TEST(DecodeFamily, WgmmaRulesNameTheField) {
  auto with = [](int warpgroups) {
    Config c = decode_config(4, 16);
    c.tuning.consumer_warpgroups = warpgroups;
    return c;
  };
  EXPECT_TRUE(check_config(with(1)).empty());
  EXPECT_TRUE(check_config(with(2)).empty());
  EXPECT_EQ(issue_paths(with(3)), std::set<std::string>{"tuning.consumer_warpgroups"});
  Config c = with(2);
  c.arch = "sm_80";
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.consumer_warpgroups"});
  c = with(1);
  c.dtype.qkv = DType::e4m3;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.consumer_warpgroups"});
  c = with(2);
  c.head_dim = {96, 96, 0};
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.consumer_warpgroups"});
  c = with(2);
  c.tuning.BM = 32;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.BM"});
  c = with(2);
  c.tuning.num_warps = 4;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_warps"});
  c = with(2);
  c.tuning.BN = 80;  // two warpgroups take 16-key steps each
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.BN"});
  c = with(2);
  c.tuning.num_kv_stages = 4;  // 16 KB of Q and 4 x 64 KB of K/V
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_kv_stages"});
}

// fp8 caches: "auto" still picks decode, with every scale granularity the FP8 issue defines; the
// ring has the stages a 16-bit cache of the same shape gets (half its bytes); per-token K scales
// add a slot per stage (and one more) of BN floats.
TEST(DecodeFamily, Fp8CachesTakeEveryScaleGranularity) {
  Config c = decode_config(4, 1);
  c.kv_layout = {true, 16};
  c.dtype.qkv = DType::e4m3;
  c.dtype.scale = DType::bf16;
  c.scales = {ScaleGranularity::per_token, ScaleGranularity::per_token, ScaleGranularity::per_head};
  c.tuning.kv_loads = KvLoads::cp_async;  // the region arithmetic of the gathers' ring
  const Config r = resolve(c);
  EXPECT_EQ(*r.tuning.family, Family::decode);
  Config bf16 = decode_config(4, 1);
  bf16.kv_layout = {true, 16};
  bf16.tuning.kv_loads = KvLoads::cp_async;
  const Config rb = resolve(bf16);
  EXPECT_EQ(*r.tuning.num_kv_stages, *rb.tuning.num_kv_stages);
  EXPECT_EQ(generate(resolve(bf16)).launch.smem_bytes - generate(r).launch.smem_bytes,
            *r.tuning.num_kv_stages * *r.tuning.BN * 2 * 128 - (*r.tuning.num_kv_stages + 1) * *r.tuning.BN * 4);
  Config unscaled = c;
  unscaled.scales = {ScaleGranularity::none, ScaleGranularity::none, ScaleGranularity::none};
  unscaled.dtype.scale.reset();
  unscaled.tuning.num_kv_stages = *r.tuning.num_kv_stages;
  const int key_scale_bytes = (*r.tuning.num_kv_stages + 1) * *r.tuning.BN * 4;
  EXPECT_EQ(generate(r).launch.smem_bytes, generate(resolve(unscaled)).launch.smem_bytes + key_scale_bytes);
  for (DType d : {DType::e4m3, DType::e5m2})
    for (ScaleGranularity g : {ScaleGranularity::none, ScaleGranularity::per_tensor, ScaleGranularity::per_head}) {
      Config k = decode_config(8, 4, 64);
      k.dtype.qkv = d;
      k.scales = {g, g, g};
      EXPECT_EQ(*resolve(k).tuning.family, Family::decode) << to_string(d) << " " << to_string(g);
    }
}

// A 16-bit Q beside an fp8 cache (dtype.q, as vLLM and FlashInfer call fp8 decode): the decode
// family reads it unquantised; the config names it only where it differs from dtype.qkv.
TEST(DecodeFamily, SixteenBitQueriesBesideAnFp8Cache) {
  Config c = decode_config(8, 4);
  c.kv_layout = {true, 16};
  c.dtype = {DType::e4m3, DType::bf16, std::nullopt, std::nullopt};
  c.dtype.q = DType::bf16;
  c.scales = {ScaleGranularity::none, ScaleGranularity::per_tensor, ScaleGranularity::per_tensor};
  const Config r = resolve(c);
  EXPECT_EQ(*r.tuning.family, Family::decode);
  EXPECT_EQ(readable_name(r).rfind("fwd_sm90a_e4m3_d128_qbf16_obf16_none_g8_paged16_scaled_decode_q4", 0), 0u)
      << readable_name(r);
  const KernelSource src = generate(r);
  EXPECT_NE(src.unit.find("using QElement = flashjit::bf16_t;"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(canonical_json(r))["dtype"]["q"], "bf16");
  EXPECT_EQ(parse_config(to_json(r)).dtype.q, DType::bf16);  // round trip
  // Q in dtype.qkv is the same kernel as no dtype.q; without one the source has no QElement.
  Config same = c;
  same.dtype.q = DType::e4m3;
  Config none = c;
  none.dtype.q.reset();
  EXPECT_EQ(generate(resolve(same)).unit, generate(resolve(none)).unit);
  EXPECT_EQ(generate(resolve(none)).unit.find("QElement ="), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(canonical_json(resolve(none)))["dtype"].contains("q"));
  // Rules, each naming its field.
  Config bad = c;
  bad.dtype.qkv = DType::fp16;  // a 16-bit cache reads Q in its own type
  EXPECT_EQ(issue_paths(bad), std::set<std::string>{"dtype.q"});
  bad = c;
  bad.dtype.q = DType::e5m2;  // another fp8 type
  EXPECT_EQ(issue_paths(bad), std::set<std::string>{"dtype.q"});
  bad = c;
  bad.scales.q = ScaleGranularity::per_tensor;  // a 16-bit Q is not quantised
  EXPECT_EQ(issue_paths(bad), std::set<std::string>{"scales.q"});
  bad = c;
  bad.tuning = Tuning{};
  bad.tuning.family = Family::sm90;  // the sm90 family reads Q in dtype.qkv
  bad.kv_layout = {};
  EXPECT_EQ(issue_paths(bad), std::set<std::string>{"dtype.q"});
  Config prefill = c;  // the sm80 family converts it on load (chunked prefill against the cache)
  prefill.tuning = Tuning{};
  prefill.tuning.family = Family::sm80;
  EXPECT_TRUE(check_config(prefill).empty());
  Config prefill_rope = prefill;  // beside fp8 nope columns and a bf16 rope part
  prefill_rope.head_dim = {192, 128, 64};
  prefill_rope.dtype.rope = DType::bf16;
  prefill_rope.dtype.q = DType::fp16;
  // It compiles, without spills, for every target, with per-token K scales too (and a latent
  // cache's mma.sync pass).
  Config latent = c;
  latent.head_dim = {576, 512, 64};
  latent.dtype.rope = DType::bf16;
  latent.group = 16;
  latent.kv_layout = {true, 64, true};
  latent.tuning.max_seqlen_q = 1;
  latent.scales.v = ScaleGranularity::none;  // V takes K's scale
  for (const char* arch : {"sm_80", "sm_90a", "sm_100a"})
    for (Config k : {c, latent, prefill, prefill_rope}) {
      k.arch = arch;
      k.dtype.scale = DType::fp32;
      k.scales.k = ScaleGranularity::per_token;
      const CompiledKernel kernel = compile(generate(resolve(k)));
      EXPECT_EQ(kernel.report.spill_stores, 0) << arch << "\n" << kernel.log;
      EXPECT_NO_THROW(compile(generate_reference(k))) << arch;
    }
}

TEST(DecodeFamily, PageSizesArePowersOfTwoUpTo256) {
  for (int page : {1, 2, 16, 64, 256}) {
    Config c = decode_config(4, 1);
    c.kv_layout = {true, page};
    EXPECT_TRUE(check_config(c).empty()) << page;
  }
  for (int page : {0, 3, 48, 512}) {
    Config c = decode_config(4, 1);
    c.kv_layout = {true, page};
    EXPECT_EQ(issue_paths(c), std::set<std::string>{"kv_layout.page_size"}) << page;
  }
}

TEST(DecodeSplits, FillTheGpuWhenTheCtasAreFew) {
  // 8 CTAs (batch 1 x 8 KV heads), 128k keys in 64-key tiles, 2 CTAs per SM on 132 SMs: 30
  // splits make 240 of the 264 slots busy, the first count within 10 % of a full wave.
  EXPECT_EQ(choose_decode_splits({8, 2048, 264}), 30);
  // 32 CTAs on 132 slots: 4 splits fill 128 of them.
  EXPECT_EQ(choose_decode_splits({32, 512, 132}), 4);
  // A wave's worth of CTAs already: no split.
  EXPECT_EQ(choose_decode_splits({1024, 2048, 264}), 1);
  EXPECT_EQ(choose_decode_splits({220, 2048, 264}), 1);
  // Too few keys to split: at least kMinTilesPerSplit tiles per split.
  EXPECT_EQ(choose_decode_splits({8, 3, 264}), 1);
  EXPECT_EQ(choose_decode_splits({8, 8, 264}), 2);
  // Never more than kMaxDecodeSplits.
  EXPECT_LE(choose_decode_splits({1, 1 << 20, 100000}), kMaxDecodeSplits);
}

struct Planned {
  Config config;
  KernelSource source;
  AttentionArgs args;
};

Planned planned(Config c, int batch, int seqlen_q, int seqlen_k, int heads_k) {
  Planned p;
  p.config = resolve(c);
  p.source = generate(p.config);
  const void* data = reinterpret_cast<const void*>(uintptr_t(1) << 20);  // never dereferenced
  AttentionArgs& a = p.args;
  const int hq = heads_k * c.group, d = c.head_dim.qk;
  a.q = a.o = Tensor::bshd(data, seqlen_q, hq, d);
  if (c.kv_layout.paged) {
    a.k = a.v = Tensor::paged(data, c.kv_layout.page_size, heads_k, d);
    a.page_table = reinterpret_cast<const int*>(data);
    a.max_pages = (seqlen_k + c.kv_layout.page_size - 1) / c.kv_layout.page_size;
    a.num_pages = batch * a.max_pages;
  } else {
    a.k = a.v = Tensor::bshd(data, seqlen_k, heads_k, d);
  }
  a.batch = batch;
  a.seqlen_q = seqlen_q;
  a.seqlen_k = seqlen_k;
  a.heads_q = hq;
  a.heads_k = heads_k;
  return p;
}

LaunchPlan plan_of(const Planned& p, int ctas_per_sm = 2) {
  DeviceLimits device;
  device.ctas_per_sm = ctas_per_sm;
  return family_host(p.source.launch.family).plan(p.config, p.source.launch, p.args, device);
}

TEST(DecodePlan, OneLongSequenceSplitsAndCombines) {
  const Planned p = planned(decode_config(4, 1), 1, 1, 131072, 8);
  const LaunchPlan plan = plan_of(p);
  ASSERT_EQ(plan.num_passes, 2);
  EXPECT_EQ(plan.params.num_splits, 30);
  EXPECT_EQ(plan.passes[0].grid[0], 30u);
  EXPECT_EQ(plan.passes[0].grid[1], 8u);  // one row block per KV head: 4 heads x 1 token
  EXPECT_EQ(plan.passes[0].grid[2], 1u);
  EXPECT_EQ(plan.passes[1].kernel, 1);
  EXPECT_EQ(plan.passes[1].grid[0], 32u);  // one CTA per (row, head) pair
  EXPECT_FALSE(plan.passes[0].overlaps_previous);
  EXPECT_TRUE(plan.passes[1].overlaps_previous);  // launched as the split pass's dependent
  // Partial O and LSE for 30 splits x 32 rows x 129 floats.
  EXPECT_EQ(plan.workspace_bytes, size_t(30) * 32 * 129 * 4);
}

TEST(DecodePlan, LargeBatchesNeedNoSplit) {
  const LaunchPlan plan = plan_of(planned(decode_config(4, 1), 128, 1, 2048, 8));
  ASSERT_EQ(plan.num_passes, 1);
  EXPECT_EQ(plan.params.num_splits, 1);
  EXPECT_EQ(plan.workspace_bytes, 0u);
}

TEST(DecodePlan, SplitOverridesAndRowBlocks) {
  Planned p = planned(decode_config(16, 16), 2, 16, 4096, 2);
  p.args.num_splits = 3;
  const LaunchPlan plan = plan_of(p);
  EXPECT_EQ(plan.params.num_splits, 3);
  EXPECT_EQ(plan.passes[0].grid[1], 4u);  // 256 packed rows in blocks of 128, x 2 KV heads
  Config pinned = decode_config(4, 1);
  pinned.tuning.splitk_partitions = 5;
  EXPECT_EQ(plan_of(planned(pinned, 1, 1, 65536, 8)).params.num_splits, 5);
}

TEST(DecodePlan, SlidingWindowsSplitByTheirSpan) {
  Config c = decode_config(4, 1);
  c.mask = Mask::sliding_window;
  Planned p = planned(c, 1, 1, 131072, 8);
  p.args.window_left = 511;
  p.args.window_right = 0;
  // 512 visible keys: 8 tiles, so at most two splits of four tiles.
  EXPECT_EQ(plan_of(p).params.num_splits, 2);
}

TEST(DecodePlan, EmptyLaunchesPlanNothing) {
  EXPECT_EQ(plan_of(planned(decode_config(4, 1), 2, 0, 100, 2)).num_passes, 0);
}

void expect_refused(const Planned& p, const std::string& needle) {
  try {
    plan_of(p);
    ADD_FAILURE() << "expected an error naming " << needle;
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(DecodePlan, BadArgumentsAreNamed) {
  Config paged = decode_config(4, 4);
  paged.kv_layout = {true, 16};
  Planned p = planned(paged, 2, 4, 1000, 2);
  EXPECT_NO_THROW(plan_of(p));
  Planned q = p;
  q.args.seqlen_q = 5;
  expect_refused(q, "tuning.max_seqlen_q");
  q = p;
  q.args.page_table = nullptr;
  expect_refused(q, "args.page_table is required");
  q = p;
  q.args.max_pages = 62;  // 1000 keys in pages of 16 need 63
  expect_refused(q, "args.max_pages");
  q = p;
  q.args.num_pages = 0;
  expect_refused(q, "args.num_pages");
  q = p;
  q.args.page_table_stride = 10;
  expect_refused(q, "args.page_table_stride");
  q = p;
  q.args.k.batch_stride = 12;  // the page axis
  expect_refused(q, "args.k.batch_stride");
  q = p;
  q.args.num_splits = -1;
  expect_refused(q, "args.num_splits");
  // fp8 caches copy 16-byte chunks of 16 values: strides of 8 values are refused by name.
  Config fp8 = paged;
  fp8.dtype.qkv = DType::e4m3;
  Planned e = planned(fp8, 2, 4, 1000, 2);
  EXPECT_NO_THROW(plan_of(e));
  e.args.v.row_stride = 8 * 2 + 8;
  expect_refused(e, "args.v.row_stride = 24: strides must be positive multiples of 16 elements (16 bytes of e4m3)");
  Planned contiguous = planned(decode_config(4, 1), 2, 1, 1000, 2);
  contiguous.args.page_table = reinterpret_cast<const int*>(uintptr_t(1) << 20);
  expect_refused(contiguous, "not paged");
  // Splits are a decode launch's: a prefill kernel refuses the override.
  Config prefill;
  prefill.arch = "sm_90a";
  Planned f = planned(prefill, 1, 128, 128, 2);
  f.args.num_splits = 2;
  expect_refused(f, "only decode kernels split");
}

// Every tile the family picks by itself compiles without spills, paged or not, on the targets
// the CI builds for.
// Per-token K scales laid out like the cache's rows (scales.token_layout "cache": [num_pages,
// page_size, heads_k] paged, as engines keep them beside their pages): the rule, the kernel's
// trait, the default strides and given ones, and compiles for the decode and sm80 families.
TEST(DecodePlan, PerTokenKeyScalesLaidOutLikeTheCache) {
  Config c = decode_config(4, 1);
  c.kv_layout = {true, 16};
  c.dtype = {DType::e4m3, DType::bf16, std::nullopt, DType::fp32};
  c.scales = {ScaleGranularity::none, ScaleGranularity::per_token, ScaleGranularity::per_tensor};
  c.scales.token_layout = ScaleLayout::cache;
  Planned p = planned(c, 2, 1, 1000, 8);
  EXPECT_NE(p.source.unit.find("kTokenScalesInCache = true"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(canonical_json(p.config))["scales"]["token_layout"], "cache");
  const void* data = reinterpret_cast<const void*>(uintptr_t(1) << 20);
  p.args.k_scale.data = p.args.v_scale.data = data;
  LaunchPlan plan = plan_of(p);
  EXPECT_EQ(plan.params.k_scale_strides[0], 16 * 8);  // a page: 16 rows of 8 KV heads
  EXPECT_EQ(plan.params.k_scale_row_stride, 8);
  EXPECT_EQ(plan.params.k_scale_strides[1], 1);
  p.args.k_scale.batch_stride = 656 / 4 * 16;  // a view into 656-byte cache rows
  p.args.k_scale.row_stride = 656 / 4;
  p.args.k_scale.head_stride = 0;
  plan = plan_of(p);
  EXPECT_EQ(plan.params.k_scale_strides[0], 656 / 4 * 16);
  EXPECT_EQ(plan.params.k_scale_row_stride, 656 / 4);
  EXPECT_EQ(plan.params.k_scale_strides[1], 0);
  // By position (the default) a row stride is refused by name.
  Config by_position = c;
  by_position.scales.token_layout = ScaleLayout::positions;
  Planned q = planned(by_position, 2, 1, 1000, 8);
  q.args.k_scale.data = q.args.v_scale.data = data;
  q.args.k_scale.row_stride = 8;
  expect_refused(q, "args.k_scale.row_stride is set");
  EXPECT_EQ(generate(q.config).unit.find("kTokenScalesInCache"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(canonical_json(q.config))["scales"].contains("token_layout"));
  // Only per-token K and V scales have a layout.
  Config bad = c;
  bad.scales.k = ScaleGranularity::per_tensor;
  bad.dtype.scale.reset();
  EXPECT_EQ(issue_paths(bad), std::set<std::string>{"scales.token_layout"});
  // Per-token V scales (vLLM's per-token-head fp8 cache: K and V both), by position or beside
  // the pages: a slot of the tile's V scales beside K's in shared memory; the sm90 family
  // refuses them by name.
  Config kv = c;
  kv.scales.v = ScaleGranularity::per_token;
  const Config rkv = resolve(kv);
  EXPECT_EQ(*rkv.tuning.family, Family::decode);
  EXPECT_EQ(*rkv.tuning.kv_loads, KvLoads::cp_async);  // their slots ride with the gathers
  EXPECT_EQ(generate(rkv).launch.smem_bytes - generate(resolve(c)).launch.smem_bytes,
            (*rkv.tuning.num_kv_stages + 1) * *rkv.tuning.BN * 4);
  Planned pkv = planned(kv, 2, 1, 1000, 8);
  pkv.args.k_scale.data = pkv.args.v_scale.data = data;
  pkv.args.v_scale.row_stride = 24;
  const LaunchPlan kv_plan = plan_of(pkv);
  EXPECT_EQ(kv_plan.params.v_scale_row_stride, 24);
  EXPECT_EQ(kv_plan.params.v_scale_strides[0], 16 * 8);
  Config only_v = kv;
  only_v.scales.k = ScaleGranularity::per_tensor;  // the layout of V's alone
  EXPECT_TRUE(check_config(only_v).empty());
  Config unscaled_type = kv;
  unscaled_type.dtype.scale.reset();
  EXPECT_EQ(issue_paths(unscaled_type), std::set<std::string>{"dtype.scale"});
  Config hopper = kv;
  hopper.tuning = Tuning{};
  hopper.tuning.family = Family::sm90;
  hopper.kv_layout = {};
  hopper.scales = {ScaleGranularity::per_tensor, ScaleGranularity::per_head, ScaleGranularity::per_token};
  EXPECT_EQ(issue_paths(hopper), std::set<std::string>{"scales.v"});
  // The decode family (GQA and latent caches), the sm80 family (chunked prefill against a paged
  // cache) and the reference compile with it.
  Config latent = c;
  latent.head_dim = {576, 512, 64};
  latent.dtype.rope = DType::bf16;
  latent.group = 16;
  latent.kv_layout = {true, 64, true};
  latent.scales.v = ScaleGranularity::none;
  Config prefill = c;
  prefill.tuning = Tuning{};
  prefill.tuning.family = Family::sm80;
  Config prefill_kv = prefill;
  prefill_kv.scales.v = ScaleGranularity::per_token;
  for (const Config& k : {c, latent, prefill, kv, prefill_kv}) {
    const CompiledKernel kernel = compile(generate(resolve(k)));
    EXPECT_EQ(kernel.report.spill_stores, 0) << canonical_json(k) << "\n" << kernel.log;
    EXPECT_NO_THROW(compile(generate_reference(k)));
  }
}

TEST(DecodeFamily, DefaultTilesCompileWithoutSpills) {
  struct Case {
    int d, group, tokens, page;
    Mask mask;
    bool varlen;
    const char* arch;
    DType dtype = DType::bf16;
    ScaleGranularity k_scale = ScaleGranularity::none;
  };
  for (const Case& k : {Case{128, 4, 1, 0, Mask::none, false, "sm_90a"},
                        Case{128, 8, 4, 16, Mask::causal, false, "sm_90a"},
                        Case{64, 1, 1, 1, Mask::none, true, "sm_90a"},
                        Case{256, 16, 16, 64, Mask::causal, false, "sm_90a"},  // wgmma, as below
                        Case{128, 4, 16, 16, Mask::causal, false, "sm_90a"},
                        Case{128, 8, 16, 16, Mask::causal, false, "sm_90a"},  // 128-row wgmma tile
                        Case{64, 16, 8, 0, Mask::sliding_window, true, "sm_90a"},
                        Case{64, 16, 4, 0, Mask::sliding_window, false, "sm_90a"},
                        Case{192, 8, 8, 32, Mask::none, true, "sm_90a"},
                        Case{128, 4, 2, 256, Mask::sliding_window, true, "sm_80"},
                        Case{96, 2, 1, 0, Mask::none, false, "sm_100a"},
                        // fp8 caches, widened in registers on every target
                        Case{128, 4, 1, 16, Mask::none, false, "sm_90a", DType::e4m3, ScaleGranularity::per_tensor},
                        Case{128, 8, 16, 64, Mask::causal, false, "sm_90a", DType::e4m3, ScaleGranularity::per_token},
                        Case{256, 16, 4, 1, Mask::causal, true, "sm_80", DType::e5m2, ScaleGranularity::per_head},
                        Case{64, 1, 1, 0, Mask::sliding_window, false, "sm_100a", DType::e4m3, ScaleGranularity::per_token}}) {
    Config c = decode_config(k.group, k.tokens, k.d);
    c.dtype.qkv = k.dtype;
    c.scales.k = k.k_scale;
    if (k.k_scale == ScaleGranularity::per_token) c.dtype.scale = DType::fp32;
    c.arch = k.arch;
    c.mask = k.mask;
    c.varlen = k.varlen;
    c.lse = true;
    if (k.page) c.kv_layout = {true, k.page};
    const Config r = resolve(c);
    ASSERT_EQ(*r.tuning.family, Family::decode);
    const KernelSource src = generate(r);
    ASSERT_EQ(src.launch.passes.size(), 1u);
    CompiledKernel kernel = compile(src);
    EXPECT_EQ(kernel.report.spill_stores, 0) << canonical_json(r) << "\n" << kernel.log;
  }
}

}  // namespace
}  // namespace flashjit
