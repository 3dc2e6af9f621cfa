// NVRTC compiles of every example config for sm_80, sm_90a and sm_100a (no GPU needed), the
// ptxas report, and the cache key's sensitivity to everything that changes the binary.
#include "generator/config.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/artifact.hpp"
#include "runtime/compiler.hpp"
#include "runtime/flashjit.hpp"
#include "runtime/nvrtc_targets.hpp"
#include "runtime/ptxas_report.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

namespace flashjit {
namespace {

std::vector<std::string> example_paths() {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::directory_iterator(std::string(FLASHJIT_SOURCE_DIR) + "/examples/configs"))
    if (e.path().extension() == ".json") v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

class ExampleCompiles : public ::testing::TestWithParam<std::string> {};

TEST_P(ExampleCompiles, ForEveryTarget) {
  const std::string arch = GetParam();
  for (const auto& path : example_paths()) {
    Config c = load_config_file(path);
    c.arch = arch;
    if (arch != "sm_90a" && c.tuning.family == Family::sm90) continue;  // pinned to Hopper
    KernelSource src = generate(c);
    CompiledKernel k = compile(src);
    EXPECT_GT(k.cubin.size(), 1000u) << path;
    EXPECT_GT(k.report.registers, 0) << path << "\n" << k.log;
    EXPECT_EQ(k.report.spill_stores, 0) << path << " spills on " << arch << "\n" << k.log;
    EXPECT_FALSE(k.report.has_advisory("C7508")) << path;
    // The cubin is an ELF image.
    EXPECT_EQ(std::string(k.cubin.data(), 4), "\x7f" "ELF");
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, ExampleCompiles, ::testing::Values("sm_80", "sm_90a", "sm_100a"));

// fp8 inputs with scales, and an fp8 nope part beside a bf16 rope part (MLA prefill), compile for
// every target from sm_80 on, sm_89 (the first with fp8 tensor cores) included, without spills.
// On sm_90a fp8_scaled.json (per-token Q and K scales), fp8_sm90.json and fp8_d64.json (64-byte
// panels) take the sm90 family; mla_prefill_fp8.json (per-token K scales beside a rope part) runs
// on the sm80 family everywhere.
TEST(Fp8Examples, CompileForEveryTarget) {
  for (const char* file : {"fp8_scaled.json", "mla_prefill_fp8.json", "fp8_sm90.json", "fp8_d64.json"})
    for (const char* arch : {"sm_80", "sm_89", "sm_90a", "sm_100a"}) {
      Config c = load_config_file(std::string(FLASHJIT_SOURCE_DIR) + "/examples/configs/" + file);
      c.arch = arch;
      const Config r = resolve(c);
      const bool hopper = std::string(file) != "mla_prefill_fp8.json" && std::string(arch) == "sm_90a";
      EXPECT_EQ(*r.tuning.family, hopper ? Family::sm90 : Family::sm80) << file << " " << arch;
      const CompiledKernel k = compile(generate(r));
      EXPECT_EQ(k.report.spill_stores, 0) << file << " spills on " << arch << "\n" << k.log;
      EXPECT_NO_THROW(compile(generate_reference(c))) << file << " " << arch;
    }
}

// Every tile the sm90 family picks by itself (each mask, with and without the LSE, without a
// length hint and for short and long ones, and as pair_cta clusters) compiles without spills or
// serialised wgmma.
class Sm90Defaults : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(Sm90Defaults, CompileWithoutSpills) {
  const auto [qk, v] = GetParam();
  std::set<std::string> seen;
  for (Mask mask : {Mask::none, Mask::causal, Mask::sliding_window})
    for (bool lse : {false, true})
      for (int hint : {0, 512, 8192, -1}) {
        Config c;
        c.arch = "sm_90a";
        c.head_dim = {qk, v, 0};
        c.mask = mask;
        c.lse = lse;
        if (hint > 0) c.tuning.seqlen_hint = hint;
        if (hint < 0) c.tuning.pair_cta = true;
        const Config r = resolve(c);
        if (!seen.insert(canonical_json(r)).second) continue;
        CompiledKernel k = compile(generate(r));
        const std::string what = canonical_json(r);
        EXPECT_EQ(k.report.spill_stores, 0) << what << "\n" << k.log;
        for (const char* code : {"C7508", "C7510", "C7515", "C7518", "C7519", "C7520"})
          EXPECT_FALSE(k.report.has_advisory(code)) << code << " in " << what << "\n" << k.log;
      }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, Sm90Defaults,
                         ::testing::Values(std::pair{64, 64}, std::pair{128, 128}, std::pair{192, 192},
                                           std::pair{256, 256}, std::pair{192, 128}, std::pair{128, 256}),
                         [](const auto& info) {
                           return "qk" + std::to_string(info.param.first) + "_v" + std::to_string(info.param.second);
                         });

// The sm90 fp8 tiles it picks by itself (with and without a length hint), and pinned ones with
// partial Vt panels, compile without spills or serialised wgmma: both fp8 types, every mask,
// with and without the LSE, every scale granularity the family takes, head dims in 128- and
// 64-byte panels.
TEST(Sm90Fp8Defaults, CompileWithoutSpills) {
  struct Case { DType dtype; int qk, v; Mask mask; bool lse; ScaleGranularity q; int bn, hint = 0; };
  using G = ScaleGranularity;
  for (const Case& k : {Case{DType::e4m3, 128, 128, Mask::none, false, G::none, 0},
                        Case{DType::e4m3, 128, 128, Mask::none, true, G::per_token, 0, 2048},   // BN 128, 3 stages
                        Case{DType::e4m3, 128, 128, Mask::causal, true, G::per_token, 0},
                        Case{DType::e4m3, 128, 128, Mask::causal, true, G::per_token, 0, 16384},  // BN 192
                        Case{DType::e4m3, 128, 128, Mask::sliding_window, true, G::per_head, 0},
                        Case{DType::e5m2, 128, 128, Mask::causal, false, G::per_tensor, 0},
                        Case{DType::e4m3, 128, 128, Mask::none, true, G::per_token, 160},
                        Case{DType::e4m3, 256, 256, Mask::none, true, G::per_tensor, 0},
                        Case{DType::e4m3, 256, 256, Mask::none, true, G::per_token, 0, 512},  // BN 64
                        Case{DType::e4m3, 256, 256, Mask::causal, true, G::per_token, 0},
                        Case{DType::e4m3, 256, 128, Mask::sliding_window, false, G::none, 0},
                        Case{DType::e4m3, 128, 256, Mask::causal, true, G::per_head, 0},
                        // 64-byte panels: d64 (three consumers, or two up to 1k keys) and qk 192.
                        Case{DType::e4m3, 64, 64, Mask::none, true, G::per_token, 0},
                        Case{DType::e4m3, 64, 64, Mask::none, false, G::per_tensor, 0, 1024},
                        Case{DType::e5m2, 64, 64, Mask::causal, true, G::per_token, 0, 16384},
                        Case{DType::e4m3, 64, 64, Mask::sliding_window, true, G::per_head, 0},
                        Case{DType::e4m3, 64, 64, Mask::none, true, G::per_tensor, 256},
                        Case{DType::e4m3, 192, 128, Mask::causal, true, G::per_token, 0},
                        Case{DType::e4m3, 192, 128, Mask::none, false, G::per_tensor, 0, 16384}}) {
    Config c;
    c.arch = "sm_90a";
    c.dtype.qkv = k.dtype;
    c.dtype.out = DType::bf16;
    c.head_dim = {k.qk, k.v, 0};
    c.mask = k.mask;
    c.lse = k.lse;
    c.scales = {k.q, k.q == G::per_token ? G::per_head : k.q, k.q == G::per_token ? G::per_tensor : k.q};
    if (k.q == G::per_token) c.dtype.scale = DType::bf16;
    if (k.bn) c.tuning.BN = k.bn;
    if (k.hint) c.tuning.seqlen_hint = k.hint;
    const Config r = resolve(c);
    const std::string what = canonical_json(r);
    ASSERT_EQ(*r.tuning.family, Family::sm90) << what;
    CompiledKernel compiled = compile(generate(r));
    EXPECT_EQ(compiled.report.spill_stores, 0) << what << "\n" << compiled.log;
    for (const char* code : {"C7508", "C7510", "C7515", "C7518", "C7519", "C7520"})
      EXPECT_FALSE(compiled.report.has_advisory(code)) << code << " in " << what << "\n" << compiled.log;
  }
}

// fp8 tiles are held to fp8's own register limits, not the 16-bit ones: d256 BN 96 and d128
// causal BN 192 are taken on two consumers (the 16-bit limits allow 64 and 176; that they compile
// without spills is Tables/Sm90SpillLimits' to check), and the next step up is rejected naming BN
// and the limit.
TEST(Sm90Fp8Tiles, HeldToTheFp8RegisterLimits) {
  auto fp8 = [](int d, Mask mask, int bn) {
    Config c;
    c.arch = "sm_90a";
    c.dtype.qkv = DType::e4m3;
    c.dtype.out = DType::bf16;
    c.head_dim = {d, d, 0};
    c.mask = mask;
    c.lse = true;
    c.scales = {ScaleGranularity::per_tensor, ScaleGranularity::per_tensor, ScaleGranularity::per_tensor};
    c.tuning.BN = bn;
    return c;
  };
  for (const Config& c : {fp8(256, Mask::none, 96), fp8(256, Mask::causal, 96), fp8(128, Mask::causal, 192)}) {
    ASSERT_TRUE(check_config(c).empty()) << check_config(c)[0].message();
    const Config r = resolve(c);
    EXPECT_EQ(*r.tuning.consumer_warpgroups, 2) << canonical_json(r);
  }
  Config over = fp8(256, Mask::none, 128);
  over.tuning.consumer_warpgroups = 2;
  const auto issues = check_config(over);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].path, "tuning.BN");
  EXPECT_NE(issues[0].rule.find("tiles up to BN 96 compile without spills"), std::string::npos) << issues[0].message();
}

// Fields the generator chooses beside ones the user pinned compile without spills too: a spread
// of single pins (the kinds random configs spilled with), each with the LSE on, where the
// families use the most registers.
Config pinned(const char* arch, int qk, int v, Mask mask, void (*pin)(Tuning&), int rope = 0, bool varlen = false) {
  Config c;
  c.arch = arch;
  c.head_dim = {qk, v, rope};
  c.mask = mask;
  c.lse = true;
  c.varlen = varlen;
  pin(c.tuning);
  return c;
}

TEST(PinnedTuning, ChosenFieldsCompileWithoutSpills) {
  const Mask none = Mask::none, causal = Mask::causal, window = Mask::sliding_window;
  const Config configs[] = {
      pinned("sm_90a", 128, 128, window, [](Tuning& t) { t.consumer_warpgroups = 3; }),
      pinned("sm_90a", 256, 128, causal, [](Tuning& t) { t.consumer_warpgroups = 3; }),
      pinned("sm_90a", 192, 192, causal, [](Tuning& t) { t.BM = 192; }),
      pinned("sm_90a", 64, 128, window, [](Tuning& t) { t.BM = 192; }),
      pinned("sm_90a", 256, 256, none, [](Tuning& t) { t.consumer_warpgroups = 1; }),
      pinned("sm_90a", 128, 128, none, [](Tuning& t) { t.consumer_warpgroups = 3; t.pair_cta = true; }),
      pinned("sm_90a", 128, 128, window, [](Tuning& t) { t.BN = 160; }),
      pinned("sm_90a", 128, 128, none, [](Tuning& t) { t.BN = 208; }),  // takes one consumer
      pinned("sm_90a", 64, 64, none, [](Tuning& t) { t.BN = 240; }),    // takes one consumer
      pinned("sm_90a", 192, 128, causal, [](Tuning& t) { t.num_kv_stages = 4; }),
      pinned("sm_80", 96, 64, window, [](Tuning& t) { t.num_kv_stages = 2; }, 64, true),
      pinned("sm_80", 128, 128, window, [](Tuning& t) { t.num_kv_stages = 2; }, 0, true),
      pinned("sm_80", 32, 64, window, [](Tuning& t) { t.BN = 112; }, 0, true),
      pinned("sm_80", 96, 64, causal, [](Tuning& t) { t.BN = 128; }),
  };
  for (const Config& c : configs) {
    const Config r = resolve(c);
    const std::string what = canonical_json(r);
    const CompiledKernel k = compile(generate(r));
    EXPECT_EQ(k.report.spill_stores, 0) << what << "\n" << k.log;
    EXPECT_FALSE(k.report.has_advisory("C7508")) << what;
  }
  // Where no consumer count holds the pinned tile, the config is rejected naming it.
  Config c = pinned("sm_90a", 128, 128, window, [](Tuning& t) { t.BN = 176; });
  auto issues = check_config(c);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].path, "tuning.BN");
  EXPECT_NE(issues[0].rule.find("spills registers"), std::string::npos) << issues[0].message();
  c = pinned("sm_90a", 128, 256, none, [](Tuning& t) { t.consumer_warpgroups = 3; });
  issues = check_config(c);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].path, "tuning.consumer_warpgroups");
  // Three consumers at 192/192 with a window spill even at BN 16 once ragged with the LSE.
  c = pinned("sm_90a", 192, 192, window, [](Tuning& t) { t.BM = 192; });
  issues = check_config(c);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].path, "tuning.consumer_warpgroups");
}

// MLA prefill (qk 192 = 128 nope + 64 rope in their own tensors, v 128) on sm_90a: a 16-bit rope
// part in dtype.qkv, or a bf16 one beside fp8 nope columns, takes the sm90 family, whose Q and K
// tiles get one more TMA box each and compile spill-free with no advisories; the rope parts it
// cannot take (half panels, fp16 beside fp8) are named, and "auto" sends them to the sm80 family.
TEST(Compiler, Sm90TakesSixteenBitRopeTensors) {
  Config c = load_config_file(std::string(FLASHJIT_SOURCE_DIR) + "/examples/configs/mla_rope.json");
  for (DType dt : {DType::bf16, DType::fp16}) {
    c.dtype = {dt, dt, dt, std::nullopt};
    const Config r = resolve(c);
    EXPECT_EQ(*r.tuning.family, Family::sm90) << to_string(dt);
    const KernelSource src = generate(r);
    EXPECT_TRUE(src.launch.uses_tma);
    const CompiledKernel k = compile(src);
    EXPECT_EQ(k.report.spill_stores, 0) << k.log;
    EXPECT_EQ(k.log.find("C75"), std::string::npos) << k.log;
  }
  auto sm90_issue = [](Config c) {
    c.tuning.family = Family::sm90;
    const std::vector<ConfigIssue> issues = check_config(c);
    return issues.empty() ? std::string() : issues.front().path;
  };
  Config narrow = c;
  narrow.head_dim = {224, 128, 32};  // half a panel of rope columns beside three nope panels
  EXPECT_EQ(sm90_issue(narrow), "head_dim.rope");
  EXPECT_EQ(*resolve(narrow).tuning.family, Family::sm80);
  // fp8 nope columns (whole 128-column panels) beside a bf16 rope part, scales the sm90 family
  // takes (per-token Q, per-head K): QGMMA for the nope k-steps and P V, HGMMA for the rope ones.
  Config fp8 = load_config_file(std::string(FLASHJIT_SOURCE_DIR) + "/examples/configs/mla_prefill_fp8.json");
  fp8.scales.k = ScaleGranularity::per_head;
  for (const HeadDims dims : {HeadDims{192, 128, 64}, HeadDims{256, 128, 128}}) {
    fp8.head_dim = dims;
    const Config r = resolve(fp8);
    EXPECT_EQ(*r.tuning.family, Family::sm90) << dims.qk;
    const CompiledKernel k = compile(generate(r));
    EXPECT_EQ(k.report.spill_stores, 0) << k.log;
    EXPECT_EQ(k.log.find("C75"), std::string::npos) << k.log;
  }
  Config fp16_rope = fp8;
  fp16_rope.head_dim = {192, 128, 64};
  fp16_rope.dtype.rope = DType::fp16;
  EXPECT_EQ(sm90_issue(fp16_rope), "dtype.rope");
  EXPECT_EQ(*resolve(fp16_rope).tuning.family, Family::sm80);
  Config fp8_nope_half_panel = fp8;
  fp8_nope_half_panel.head_dim = {256, 128, 192};  // 64 fp8 nope columns: half a panel
  EXPECT_EQ(sm90_issue(fp8_nope_half_panel), "head_dim.qk");
}

// Per-token K scales on the sm90 family (fp8): the producer warp writes each stage's beside its
// TMA, by position or laid out like the cache's rows, ragged or not. Every such kernel the
// defaults give (every mask, long and unknown lengths) compiles without spills (the producer's
// 40 registers included) or advisories.
TEST(Compiler, Sm90PerTokenKeyScalesCompileWithoutSpills) {
  for (ScaleLayout layout : {ScaleLayout::positions, ScaleLayout::cache})
    for (bool varlen : {false, true})
      for (auto [qk, v] : {std::pair{128, 128}, std::pair{256, 256}, std::pair{64, 64}, std::pair{192, 128}})
        for (Mask mask : {Mask::none, Mask::causal, Mask::sliding_window})
          for (int hint : {0, 16384}) {
            Config c;
            c.arch = "sm_90a";
            c.dtype = {DType::e4m3, DType::bf16, std::nullopt, DType::fp32};
            c.head_dim = {qk, v, 0};
            c.scales = {ScaleGranularity::per_token, ScaleGranularity::per_token, ScaleGranularity::per_head};
            c.scales.token_layout = layout;
            c.varlen = varlen;
            c.mask = mask;
            if (hint) c.tuning.seqlen_hint = hint;
            const Config r = resolve(c);
            ASSERT_EQ(*r.tuning.family, Family::sm90) << canonical_json(r);
            const CompiledKernel k = compile(generate(r));
            EXPECT_EQ(k.report.spill_stores, 0) << canonical_json(r) << "\n" << k.log;
            EXPECT_EQ(k.log.find("C75"), std::string::npos) << k.log;
          }
}

TEST(Compiler, ReferenceKernelCompiles) {
  Config c = load_config_file(std::string(FLASHJIT_SOURCE_DIR) + "/examples/configs/mla_rope.json");
  CompiledKernel k = compile(generate_reference(c));
  EXPECT_GT(k.cubin.size(), 1000u);
}

TEST(Compiler, FailedCompileCarriesTheLogAndTheSource) {
  Config c = load_config_file(std::string(FLASHJIT_SOURCE_DIR) + "/examples/configs/default.json");
  KernelSource src = generate(c);
  src.unit += "\nthis is not C++;\n";
  try {
    compile(src);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("error"), std::string::npos);
    EXPECT_TRUE(std::filesystem::exists(e.source_path())) << e.source_path();
    EXPECT_NE(std::string(e.what()).find(e.source_path()), std::string::npos);
  }
}

TEST(Compiler, NvrtcListsTheTargetsWeUse) {
  auto ccs = nvrtc_supported_compute_capabilities();
  for (int cc : {80, 90, 100}) EXPECT_NE(std::find(ccs.begin(), ccs.end(), cc), ccs.end()) << cc;
  EXPECT_FALSE(nvrtc_identity().empty());
}

TEST(PtxasReport, ParsesRegistersSpillsAndAdvisories) {
  const std::string log =
      "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry\n"
      "ptxas info    : Compiling entry function 'other' for 'sm_90a'\n"
      "ptxas info    : Used 40 registers\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : Function properties for k\n"
      "    24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 16 barriers, 12 bytes smem\n";
  PtxasReport r = parse_ptxas_report(log, "k");
  EXPECT_EQ(r.registers, 168);
  EXPECT_EQ(r.spill_stores, 16);
  EXPECT_EQ(r.spill_loads, 8);
  EXPECT_EQ(r.stack_frame, 24);
  EXPECT_EQ(r.barriers, 16);
  EXPECT_EQ(r.static_smem, 12);
  EXPECT_TRUE(r.has_advisory("C7508"));
  PtxasReport round = ptxas_report_from_json(to_json(r));
  EXPECT_EQ(round.registers, 168);
  EXPECT_TRUE(round.has_advisory("C7508"));
}

// A change of source, launch metadata, options, arch, NVRTC version, flashjit version or cache
// format changes the key; nothing else does.
TEST(CacheKey, ChangesWithEveryInput) {
  Config c = load_config_file(std::string(FLASHJIT_SOURCE_DIR) + "/examples/configs/default.json");
  KernelSource src = generate(c);
  const nlohmann::json base = key_inputs(src);
  const std::string k0 = key_from_inputs(base).hex;
  EXPECT_EQ(k0, artifact_key(src).hex);
  EXPECT_EQ(k0, artifact_key(generate(c)).hex);
  EXPECT_EQ(k0.size(), 64u);

  auto changed = [&](const char* field, nlohmann::json value) {
    nlohmann::json in = base;
    in[field] = value;
    return key_from_inputs(in).hex;
  };
  EXPECT_NE(changed("nvrtc", "13.1 libnvrtc.so.13.1.20"), k0);
  EXPECT_NE(changed("arch", "sm_100a"), k0);
  EXPECT_NE(changed("flashjit", "9.9.9"), k0);
  EXPECT_NE(changed("cache_format", 999), k0);
  auto opts = base["options"];
  opts.push_back("-lineinfo");
  EXPECT_NE(changed("options", opts), k0);

  KernelSource edited = src;
  edited.unit += "\n// a template edit\n";
  EXPECT_NE(artifact_key(edited).hex, k0);

  // Launch values come from the entry as stored: one the source does not show must miss too.
  KernelSource relaunched = src;
  relaunched.launch.lpt_l2_bytes += 1 << 20;
  EXPECT_EQ(relaunched.unit, src.unit);
  EXPECT_NE(artifact_key(relaunched).hex, k0);
}

// Well-formed targets this NVRTC does not know are rejected by name before anything is compiled.
TEST(NvrtcTargets, UnknownTargetsAreRejectedNamingTheSupportedOnes) {
  const auto issues = nvrtc_target_issues("sm_999");
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].path, "arch");
  EXPECT_EQ(issues[0].value, "\"sm_999\"");
  for (const char* listed : {"sm_80", "sm_90a", "sm_100f"})
    EXPECT_NE(issues[0].rule.find(listed), std::string::npos) << issues[0].rule;
  for (const char* absent : {"sm_75", "sm_89a", "sm_90f"})
    EXPECT_EQ((", " + nvrtc_target_list() + ",").find(std::string(" ") + absent + ","), std::string::npos) << absent;
  for (const char* known : {"sm_80", "sm_90a", "sm_100a"}) EXPECT_TRUE(nvrtc_target_issues(known).empty()) << known;
  EXPECT_TRUE(nvrtc_target_issues("sm_89a").empty()) << "malformed names are check_config's";

  Config c;
  c.arch = "sm_999";
  EXPECT_TRUE(check_config(c).empty()) << "the generator knows no NVRTC";
  EXPECT_THROW(build(c), ConfigError);
}

}  // namespace
}  // namespace flashjit
