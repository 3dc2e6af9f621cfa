// Source generation: determinism, flattening, template embedding, per-family units.
#include "generator/config.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "generator/templates.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace flashjit {
namespace {

Config example(const std::string& name) {
  return load_config_file(std::string(FLASHJIT_SOURCE_DIR) + "/examples/configs/" + name);
}

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(std::string(FLASHJIT_SOURCE_DIR) + "/examples/configs"))
    if (e.path().extension() == ".json") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Generator, SameConfigGivesByteIdenticalSource) {
  for (const auto& n : example_names()) {
    KernelSource a = generate(example(n)), b = generate(example(n));
    EXPECT_EQ(a.unit, b.unit) << n;
    EXPECT_EQ(flatten(a.unit), flatten(b.unit)) << n;
    EXPECT_EQ(a.launch.entry, b.launch.entry) << n;
  }
}

// The fp32 reference reads 16-bit Q, K, V from contiguous K/V and applies no scales: configs it
// cannot compute are rejected field by field, as the fast kernels reject them.
// The reference computes every problem a config can state: fp8 inputs and scales (dequantised
// as it reads them), rope parts in their own type, paged caches.
TEST(Generator, ReferenceComputesEveryProblem) {
  Config fp8 = example("default.json");
  fp8.dtype.qkv = DType::e4m3;
  Config scaled = example("default.json");
  scaled.scales.q = ScaleGranularity::per_token;
  scaled.dtype.scale = DType::bf16;
  scaled.scales.v = ScaleGranularity::per_tensor;
  Config paged = example("default.json");
  paged.kv_layout = {true, 64};
  for (const Config& c : {fp8, scaled, paged, example("mla_rope.json")}) {
    const KernelSource src = generate_reference(c);
    EXPECT_NE(src.unit.find("using ComputeElement"), std::string::npos);
  }
  // The sm90 family takes fp8 rows of whole 64-byte panels; it names a head dim it cannot tile.
  fp8.tuning.family = Family::sm90;
  fp8.arch = "sm_90a";
  fp8.head_dim = {96, 96, 0};
  ASSERT_FALSE(check_config(fp8).empty());
  EXPECT_EQ(check_config(fp8)[0].path, "head_dim.qk");
}

TEST(Generator, DifferentConfigsGiveDifferentEntries) {
  Config a = example("default.json"), b = a;
  b.lse = true;
  EXPECT_NE(generate(a).launch.entry, generate(b).launch.entry);
}

TEST(Generator, FlatSourceIncludesNoTemplates) {
  for (const auto& n : example_names()) {
    std::string flat = flatten(generate(example(n)).unit);
    EXPECT_EQ(flat.find("#include \""), std::string::npos) << n;
    EXPECT_EQ(flat.find("#pragma once"), std::string::npos) << n;
  }
}

TEST(Generator, EveryIncludedTemplateIsEmbedded) {
  auto paths = template_paths();
  EXPECT_FALSE(paths.empty());
  for (const auto& n : example_names())
    for (const auto& t : included_templates(generate(example(n)).unit))
      EXPECT_NE(find_template(t), nullptr) << t;
}

TEST(Generator, MissingTemplateIsAnError) {
  EXPECT_THROW(flatten("#include \"sm80/nope.cuh\"\n"), std::runtime_error);
}

TEST(Generator, UnitCarriesTheResolvedConfig) {
  Config c = example("causal_d128.json");
  KernelSource s = generate(c);
  EXPECT_NE(s.unit.find(canonical_json(resolve(c))), std::string::npos);
  EXPECT_NE(s.unit.find("kMask = flashjit::MaskKind::kCausal"), std::string::npos);
  EXPECT_NE(s.unit.find("kWriteLse = true"), std::string::npos);
}

TEST(Generator, Sm90UnitsCarryOnlyTheWgmmaWidthsTheyUse) {
  Config c = example("default.json");
  c.tuning.BN = 128;
  KernelSource s = generate(c);
  EXPECT_EQ(s.launch.family, "sm90");
  EXPECT_NE(s.unit.find("struct Wgmma<flashjit::bf16_t, 128>"), std::string::npos);
  EXPECT_EQ(s.unit.find("struct Wgmma<flashjit::bf16_t, 176>"), std::string::npos);
  EXPECT_TRUE(s.launch.uses_tma);
  EXPECT_EQ(s.launch.threads, 384);
}

// The runtime hands a tile counter only to kernels that say they draw from one.
TEST(Generator, LaunchInfoNamesTheDynamicScheduler) {
  Config c = example("causal_d128.json");
  c.arch = "sm_90a";
  KernelSource dynamic = generate(c);
  EXPECT_TRUE(dynamic.launch.persistent);
  EXPECT_TRUE(dynamic.launch.tile_counter);
  EXPECT_NE(dynamic.unit.find("kDynamic = true"), std::string::npos);
  c.tuning.scheduler = Scheduler::persistent;
  KernelSource fixed = generate(c);
  EXPECT_TRUE(fixed.launch.persistent);
  EXPECT_FALSE(fixed.launch.tile_counter);
  const LaunchInfo back = launch_info_from_json(to_json(dynamic.launch));
  EXPECT_TRUE(back.tile_counter);
  EXPECT_EQ(to_json(back), to_json(dynamic.launch));
}

// pair_cta launches clusters of two CTAs, and the kernel is built for them.
TEST(Generator, PairCtaLaunchesClustersOfTwo) {
  Config c = example("default.json");
  c.arch = "sm_90a";
  KernelSource single = generate(c);
  EXPECT_EQ(single.launch.cluster_m, 1);
  EXPECT_NE(single.unit.find("kPairCta = false"), std::string::npos);
  c.tuning.pair_cta = true;
  KernelSource pair = generate(c);
  EXPECT_EQ(pair.launch.cluster_m, 2);
  EXPECT_NE(pair.unit.find("kPairCta = true"), std::string::npos);
  EXPECT_NE(pair.launch.entry, single.launch.entry);
  EXPECT_EQ(launch_info_from_json(to_json(pair.launch)).cluster_m, 2);
}

// The L2 budget of the causal order's head groups comes with the kernel (docs/sm90.md, step 3).
TEST(Generator, CausalKernelsCarryTheirHeadGroupBudget) {
  Config c = example("causal_d128.json");
  c.arch = "sm_90a";
  const KernelSource grouped = generate(c);
  EXPECT_EQ(grouped.launch.lpt_l2_bytes, 32ll << 20);
  EXPECT_EQ(launch_info_from_json(to_json(grouped.launch)).lpt_l2_bytes, 32ll << 20);
  c.tuning.scheduler = Scheduler::persistent;
  EXPECT_EQ(generate(c).launch.lpt_l2_bytes, 32ll << 20);
  // Above d128 only the dynamic scheduler (the causal default) groups heads.
  c.head_dim = {256, 256, 0};
  EXPECT_EQ(generate(c).launch.lpt_l2_bytes, 0);
  c.tuning.scheduler.reset();
  EXPECT_EQ(generate(c).launch.lpt_l2_bytes, 32ll << 20);
  c.tuning.scheduler = Scheduler::dynamic;
  EXPECT_EQ(generate(c).launch.lpt_l2_bytes, 32ll << 20);
  c.tuning.scheduler.reset();
  c.head_dim = {128, 128, 0};
  c.mask = Mask::none;
  EXPECT_EQ(generate(c).launch.lpt_l2_bytes, 0);
}

// Beside one Q buffer and the K/V ring, shared memory takes O slabs for a TMA store (not for
// ragged batches, where it cannot be exact), then a second Q buffer, each where it fits in
// 227 KB on sm_90a.
TEST(Generator, Sm90SharedMemoryTakesOSlabsThenASecondQ) {
  Config c = example("default.json");
  c.arch = "sm_90a";
  c.head_dim = {128, 128, 0};
  c.tuning.BN = 128;  // Q 32 KB + 2 x (32 + 32) KB of K/V + 2 x 16 KB of O + Q 32 KB
  KernelSource both = generate(c);
  EXPECT_TRUE(both.launch.tma_store_o);
  EXPECT_NE(both.unit.find("kTmaStoreO = true"), std::string::npos);
  EXPECT_NE(both.unit.find("kQStages = 2"), std::string::npos);
  EXPECT_TRUE(launch_info_from_json(to_json(both.launch)).tma_store_o);
  EXPECT_EQ(both.launch.smem_bytes, (32 + 2 * 64 + 32 + 32 + 1) * 1024);

  Config ragged = c;
  ragged.varlen = true;
  KernelSource r = generate(ragged);
  EXPECT_FALSE(r.launch.tma_store_o);
  EXPECT_NE(r.unit.find("kTmaStoreO = false"), std::string::npos);
  EXPECT_NE(r.unit.find("kQStages = 2"), std::string::npos);
  EXPECT_EQ(r.launch.smem_bytes, (32 + 2 * 64 + 32 + 1) * 1024);

  Config wide = c;
  wide.tuning.BN = 176;  // 32 + 2 x 88 + 32 KB would pass 227 KB, and so would a second Q
  KernelSource w = generate(wide);
  EXPECT_FALSE(w.launch.tma_store_o);
  EXPECT_NE(w.unit.find("kQStages = 1"), std::string::npos);
  EXPECT_EQ(w.launch.smem_bytes, (32 + 2 * 88 + 1) * 1024);
}

TEST(Generator, ReferenceIgnoresTuningAndFamilyLimits) {
  Config c = example("default.json");
  c.tuning.BN = 999;  // invalid for the fast kernel, irrelevant to the reference
  KernelSource r = generate_reference(c);
  EXPECT_EQ(r.launch.family, "reference");
  EXPECT_NE(r.unit.find("flashjit::reference::attention"), std::string::npos);
}

TEST(Generator, InvalidConfigThrowsConfigError) {
  Config c = example("default.json");
  c.head_dim.qk = 100;
  EXPECT_THROW(generate(c), ConfigError);
}

}  // namespace
}  // namespace flashjit
