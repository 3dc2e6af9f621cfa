// Precompile manifests: parsing, matrix expansion, exclusion, deduplication, sharding. No NVRTC.
#ifdef FLASHJIT_CLI_PATH  // built with the flashjit command (FLASHJIT_BUILD_CLI)

#include "cli/build.hpp"
#include "cli/errors.hpp"
#include "cli/manifest.hpp"
#include "generator/generate.hpp"
#include "cli_test_support.hpp"

#include <set>

namespace flashjit::cli::test {
namespace {

using nlohmann::json;

std::vector<std::string> usage_lines(const std::string& text, const fs::path& dir = ".") {
  try {
    parse_manifest(text, dir, "m.json");
  } catch (const UsageError& e) {
    return e.lines();
  }
  return {};
}

bool any_line(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines)
    if (contains(l, part)) return true;
  return false;
}

TEST(CliManifest, DottedPathsSetNestedFields) {
  json j = {{"head_dim", {{"qk", 64}}}};
  EXPECT_EQ(set_dotted(j, "head_dim.v", 64), "");
  EXPECT_EQ(set_dotted(j, "tuning.family", "sm80"), "");
  EXPECT_EQ(set_dotted(j, "dtype", json{{"qkv", "fp16"}}), "");
  EXPECT_EQ(j["head_dim"], (json{{"qk", 64}, {"v", 64}}));
  EXPECT_EQ(j["tuning"]["family"], "sm80");
  EXPECT_EQ(set_dotted(j, "head_dim", json{{"qk", 128}}), "");  // objects merge
  EXPECT_EQ(j["head_dim"], (json{{"qk", 128}, {"v", 64}}));
  EXPECT_NE(set_dotted(j, "tuning.family.x", 1), "");  // not an object
  EXPECT_NE(set_dotted(j, "a..b", 1), "");
  ASSERT_NE(get_dotted(j, "head_dim.v"), nullptr);
  EXPECT_EQ(*get_dotted(j, "head_dim.v"), 64);
  EXPECT_EQ(get_dotted(j, "head_dim.rope"), nullptr);
}

TEST(CliManifest, ReportsEveryProblemWithItsPlace) {
  Scratch s;
  const auto lines = usage_lines(R"({
    "schema": "flashjit.manifest.v0",
    "archs": ["sm_90a", "sm_75", 3],
    "bogus": 1,
    "configs": [{"head_dim": {"qk": "x"}}, "missing.json", 7],
    "matrix": [{"base": {}, "vary": {"mask": []}}, {"vary": {"mask": ["none"]}, "extra": 1}]
  })", s.path());
  EXPECT_TRUE(any_line(lines, "m.json: schema")) << ::testing::PrintToString(lines);
  EXPECT_TRUE(any_line(lines, "archs[1]"));
  EXPECT_TRUE(any_line(lines, "archs[2]"));
  EXPECT_TRUE(any_line(lines, "bogus: unknown key"));
  EXPECT_TRUE(any_line(lines, "configs[0]: head_dim.qk = \"x\": must be an integer"));
  EXPECT_TRUE(any_line(lines, "configs[1]: cannot read config file"));
  EXPECT_TRUE(any_line(lines, "configs[2]"));
  EXPECT_TRUE(any_line(lines, "matrix[0].vary.mask: must be a non-empty array"));
  EXPECT_TRUE(any_line(lines, "matrix[1].extra: unknown key"));
  EXPECT_TRUE(any_line(usage_lines("{\"schema\": \"flashjit.manifest.v1\"}"), "lists no kernels"));
  EXPECT_TRUE(any_line(usage_lines("[1, 2]"), "must be a JSON object"));
  EXPECT_TRUE(any_line(usage_lines("{"), "not valid JSON"));
  EXPECT_TRUE(any_line(usage_lines("{\"schema\": 1e999}"), "not valid JSON"));
}

TEST(CliManifest, ExpandsMatricesInOrderAndExcludes) {
  Scratch s;
  s.write("configs/base.json", R"({"arch": "sm_90a", "head_dim": {"qk": 128, "v": 128}})");
  s.write("configs/other.json", R"({"arch": "sm_80", "mask": "causal"})");
  const Manifest m = parse_manifest(R"({
    "schema": "flashjit.manifest.v1",
    "configs": ["configs/o*.json", {"arch": "sm_90a", "group": 2}],
    "matrix": [{"base": "configs/base.json",
                "vary": {"mask": ["none", "causal"], "dtype.qkv": ["bf16", "fp16"], "head_dim.qk": [64, 128]},
                "exclude": [{"mask": "causal", "dtype.qkv": ["fp16"]}]}]
  })", s.path(), "m.json");
  // 2 configs + 2*2*2 combinations; exclusions apply when the plan sets each target.
  ASSERT_EQ(m.configs.size(), 10u);
  EXPECT_EQ(m.configs[0].config.mask, Mask::causal);
  EXPECT_TRUE(contains(m.configs[0].origin, "other.json"));
  EXPECT_EQ(m.configs[1].config.group, 2);
  // The first vary key varies slowest.
  EXPECT_EQ(m.configs[2].config.mask, Mask::none);
  EXPECT_EQ(m.configs[2].config.dtype.qkv, DType::bf16);
  EXPECT_EQ(m.configs[2].config.head_dim.qk, 64);
  EXPECT_EQ(m.configs[3].config.head_dim.qk, 128);
  EXPECT_EQ(m.configs[4].config.dtype.qkv, DType::fp16);
  EXPECT_EQ(m.configs[6].config.mask, Mask::causal);
  EXPECT_EQ(m.configs[7].config.dtype.qkv, DType::bf16);
  EXPECT_TRUE(contains(m.configs[2].origin, "matrix[0]"));
  EXPECT_TRUE(contains(m.configs[2].origin, "head_dim.qk=64"));

  const Plan p = make_plan(m, {});
  EXPECT_EQ(p.excluded, 2u);  // causal fp16, both head dims
  for (const auto& it : p.items)
    EXPECT_FALSE(it.config.mask == Mask::causal && it.config.dtype.qkv == DType::fp16) << it.name;
}

const char* kPlanManifest = R"({
  "schema": "flashjit.manifest.v1",
  "archs": ["sm_90a", "sm_80"],
  "configs": [
    {"head_dim": {"qk": 128, "v": 128}},
    {"mask": "none", "head_dim": {"v": 128, "qk": 128}},
    {"head_dim": {"qk": 64, "v": 64}, "tuning": {"family": "sm90"}},
    {"head_dim": {"qk": 96, "v": 96}, "mask": "causal"}
  ],
  "exclude": [{"head_dim.qk": 96, "arch": "sm_90a"}]
})";

TEST(CliManifest, PlanDropsDuplicatesAndRecordsRejections) {
  const Manifest m = parse_manifest(kPlanManifest, ".", "m.json");
  const Plan p = make_plan(m, {});
  // 4 configs x 2 archs = 8; one excluded; the second config is the first: 2 duplicates.
  EXPECT_EQ(p.excluded, 1u);
  EXPECT_EQ(p.expanded, 7u);
  EXPECT_EQ(p.duplicates, 2u);
  ASSERT_EQ(p.items.size(), 5u);
  size_t rejected = 0;
  for (const auto& it : p.items) {
    if (!it.error.empty()) {
      ++rejected;
      EXPECT_EQ(it.arch, "sm_80");
      EXPECT_TRUE(contains(it.error, "sm90 family needs the sm_90a target")) << it.error;
    } else {
      // The plan holds the resolved config; its source, generated when compiled, matches it.
      EXPECT_TRUE(it.config.tuning.family.has_value()) << it.name;
      const KernelSource src = source_for(it.config, it.reference);
      EXPECT_EQ(src.arch, it.arch);
      EXPECT_EQ(src.name, it.name);
      Config as_written = m.configs[0].config;
      as_written.arch = it.arch;
      if (it.config.head_dim.qk == 128) EXPECT_EQ(src.unit, generate(as_written).unit);
    }
  }
  EXPECT_EQ(rejected, 1u);

  // --arch replaces the manifest's targets; "reference" adds one reference kernel per problem.
  Manifest with_ref = m;
  with_ref.reference = true;
  const Plan r = make_plan(with_ref, {"sm_90a"});
  size_t refs = 0;
  for (const auto& it : r.items) {
    EXPECT_EQ(it.arch, "sm_90a");
    refs += it.reference;
  }
  EXPECT_EQ(refs, 2u);  // d128 and d64 (d96 is excluded on sm_90a)
}

TEST(CliManifest, ShardsCoverEveryItemExactlyOnce) {
  const Plan p = make_plan(parse_manifest(kPlanManifest, ".", "m.json"), {});
  for (int n : {1, 2, 3, 7}) {
    std::multiset<std::string> seen;
    for (int i = 0; i < n; ++i)
      for (const auto& it : take_shard(p.items, parse_shard(std::to_string(i) + "/" + std::to_string(n))))
        seen.insert(it.name + "|" + it.arch);
    EXPECT_EQ(seen.size(), p.items.size());
    for (const auto& it : p.items) EXPECT_EQ(seen.count(it.name + "|" + it.arch), 1u);
  }
  const auto s0 = take_shard(p.items, parse_shard("0/2"));
  ASSERT_FALSE(s0.empty());
  EXPECT_EQ(s0[0].name, p.items[0].name);
  if (p.items.size() > 2) EXPECT_EQ(s0[1].name, p.items[2].name);
  for (const char* bad : {"2/2", "-1/2", "0/0", "1", "a/b", "1/2/3", "0/2x"})
    EXPECT_THROW(parse_shard(bad), UsageError) << bad;
}

TEST(CliManifest, ExampleManifestsParse) {
  for (const char* name : {"manifests/ci.json", "manifests/test-matrix.json"}) {
    const Manifest m = load_manifest(example(name));
    EXPECT_FALSE(m.configs.empty()) << name;
  }
  const Plan ci = make_plan(load_manifest(example("manifests/ci.json")), {});
  for (const auto& it : ci.items) EXPECT_EQ(it.error, "") << it.name << " " << it.arch << " " << it.origin;
}

}  // namespace
}  // namespace flashjit::cli::test

#endif  // FLASHJIT_CLI_PATH
