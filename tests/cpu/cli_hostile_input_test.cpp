// Hostile configs and manifests through the built binary (a crash shows as a signal, not an exit
// status) and through the manifest loader: every one is a usage error naming what is wrong.
#ifdef FLASHJIT_CLI_PATH  // built with the flashjit command (FLASHJIT_BUILD_CLI)

#include "cli/errors.hpp"
#include "cli/manifest.hpp"
#include "cli_test_support.hpp"

namespace flashjit::cli::test {
namespace {

Outcome flashjit_cmd(const Scratch& s, const std::vector<std::string>& args) {
  return run_binary(args, {{"FLASHJIT_CACHE_DIR", (s / "cache").string()}, {"FLASHJIT_CACHE_PATH", ""}}, s.path());
}

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(CliHostileInput, DeeplyNestedConfigsAreUsageErrors) {
  Scratch s;
  const std::string deep = s.write("deep.json", "{\"tuning\": " + nested(100000) + "}");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"config", "validate", deep}, {"config", "resolve", deep}, {"compile", deep}, {"generate", deep}}) {
    const Outcome o = flashjit_cmd(s, args);
    EXPECT_EQ(o.code, 2) << args[0] << " " << args[1] << "\n" << o.err.substr(0, 500);
    EXPECT_TRUE(contains(o.err, "nested deeper than 64 levels")) << o.err.substr(0, 500);
    EXPECT_LT(o.err.size(), 1000u);
  }
}

TEST(CliHostileInput, RepeatedKeysAreUsageErrors) {
  Scratch s;
  const std::string dup = s.write("dup.json", R"({"mask": "causal", "mask": "none"})");
  for (const char* cmd : {"validate", "resolve"}) {
    const Outcome o = flashjit_cmd(s, {"config", cmd, dup});
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_TRUE(contains(o.err, "mask: duplicate key")) << o.err;
  }
  const std::string manifest = s.write("m.json", R"({"schema": "flashjit.manifest.v1",
      "matrix": [{"base": {"head_dim": {"qk": 64, "v": 64, "qk": 128}}, "vary": {"mask": ["none"]}}]})");
  const Outcome o = flashjit_cmd(s, {"precompile", "--dry-run", manifest});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_TRUE(contains(o.err, "matrix[0].base.head_dim.qk: duplicate key")) << o.err;
}

TEST(CliHostileInput, ManifestsAreBoundedInNestingAndInTheirConfigFiles) {
  Scratch s;
  const std::string deep = s.write("deep.json", "{\"schema\": \"flashjit.manifest.v1\", \"configs\": " + nested(100000) + "}");
  Outcome o = flashjit_cmd(s, {"precompile", "--dry-run", deep});
  EXPECT_EQ(o.code, 2) << o.err.substr(0, 500);
  EXPECT_TRUE(contains(o.err, "nested deeper than 64 levels")) << o.err.substr(0, 500);

  s.write("cfg/deep.json", "{\"a\": " + nested(1000) + "}");
  const std::string by_file = s.write("files.json", R"({"schema": "flashjit.manifest.v1", "configs": ["cfg/deep.json"]})");
  o = flashjit_cmd(s, {"precompile", "--dry-run", by_file});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_TRUE(contains(o.err, "configs[0]: ")) << o.err;
  EXPECT_TRUE(contains(o.err, "deep.json: a[0]")) << o.err;

  // A FIFO where a config file should be would block the build: it is not opened for reading.
  ASSERT_EQ(::mkfifo((s / "cfg/fifo.json").c_str(), 0600), 0);
  const std::string fifo = s.write("fifo.json", R"({"schema": "flashjit.manifest.v1", "configs": ["cfg/fifo.json"]})");
  o = flashjit_cmd(s, {"precompile", "--dry-run", fifo});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_TRUE(contains(o.err, "cfg/fifo.json: not a regular file")) << o.err;

  // A vary path of many parts would build a value as deep as it is long.
  std::string path = "a";
  for (int i = 0; i < 5000; ++i) path += ".a";
  const std::string dotted = s.write("dotted.json", "{\"schema\": \"flashjit.manifest.v1\", \"matrix\": [{\"vary\": {\"" +
                                                        path + "\": [1]}}]}");
  o = flashjit_cmd(s, {"precompile", "--dry-run", dotted});
  EXPECT_EQ(o.code, 2) << o.err.substr(0, 500);
  EXPECT_TRUE(contains(o.err, "has more than 64 parts")) << o.err.substr(0, 500);
}

// Ten matrices of 20 000 configs each: the limit is on the manifest as a whole, not per matrix,
// and it is checked before anything is expanded.
TEST(CliHostileInput, TheItemLimitCountsEveryMatrixTogether) {
  std::string matrices;
  for (int m = 0; m < 10; ++m) {
    std::string values;
    for (int i = 0; i < 20000; ++i) values += (i ? "," : "") + std::to_string(i);
    matrices += std::string(m ? "," : "") + "{\"vary\": {\"group\": [" + values + "]}}";
  }
  const std::string text = "{\"schema\": \"flashjit.manifest.v1\", \"matrix\": [" + matrices + "]}";
  std::vector<std::string> lines;
  try {
    parse_manifest(text, ".", "m.json");
  } catch (const UsageError& e) {
    lines = e.lines();
  }
  ASSERT_FALSE(lines.empty());
  bool named = false;
  for (const auto& l : lines)
    named = named || (contains(l, "m.json: expands to 200000 configs; at most 100000 in all (configs and every "
                                  "matrix together; matrix[5] crosses the limit)"));
  EXPECT_TRUE(named) << lines.front();
  EXPECT_LE(lines.size(), 101u) << "problems are capped";
}

// A manifest's configs times its targets (and references) count against the same limit.
TEST(CliHostileInput, ThePlanLimitCountsTargetsAndReferences) {
  Manifest m;
  m.configs.assign(40000, ManifestConfig{Config{}, "configs[0]", nullptr});
  m.archs = {"sm_90a", "sm_80"};
  EXPECT_NO_THROW(make_plan(Manifest{{"sm_80"}, false, {m.configs.front()}, {}}, {}));
  m.reference = true;
  try {
    make_plan(m, {});
    ADD_FAILURE() << "planned 160000 kernels";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "expands to 160000 kernels (40000 configs x 2 targets x 2 with the references); "
                                   "at most 100000"))
        << e.what();
  }
  try {
    make_plan(m, {"sm_80", "sm_86", "sm_89"});
    ADD_FAILURE() << "planned 240000 kernels";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "40000 configs x 3 targets")) << e.what();
  }
}

// Every expanded config keeps its origin label: long vary values and many axes are cut there.
TEST(CliHostileInput, OriginLabelsAreBounded) {
  const Manifest m = parse_manifest(R"({"schema": "flashjit.manifest.v1", "matrix": [{"vary": {
      "arch": ["sm_90a"], "dtype.qkv": ["bf16"], "dtype.out": ["bf16"], "head_dim.qk": [128], "head_dim.v": [128],
      "group": [1, 2], "mask": ["none"], "varlen": [false], "outputs.lse": [false], "kv_layout.paged": [false],
      "tuning.seqlen_hint": [1024], "tuning.scheduler": ["persistent"], "tuning.num_kv_stages": [2]}}]})",
                                    ".", "m.json");
  ASSERT_EQ(m.configs.size(), 2u);
  EXPECT_LT(m.configs[0].origin.size(), 300u) << m.configs[0].origin;
  EXPECT_TRUE(contains(m.configs[0].origin, "matrix[0] {arch=\"sm_90a\", dtype.qkv=\"bf16\"")) << m.configs[0].origin;

  std::vector<std::string> lines;
  try {
    parse_manifest("{\"schema\": \"flashjit.manifest.v1\", \"matrix\": [{\"vary\": {\"arch\": [\"" +
                       std::string(100000, 'x') + "\"]}}]}",
                   ".", "m.json");
  } catch (const UsageError& e) {
    lines = e.lines();
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LT(lines[0].size(), 400u) << lines[0];
  EXPECT_TRUE(contains(lines[0], "(100000 bytes)")) << lines[0];
}

// validate says what NVRTC would say later, and compile never gets that far.
TEST(CliHostileInput, TargetsTheArchRulesOrNvrtcRejectAreUsageErrors) {
  Scratch s;
  const std::string config = s.write("c.json", "{}");
  for (const auto& [arch, part] : std::vector<std::pair<std::string, std::string>>{
           {"sm_89a", "sm_89 has no 'a' variant"}, {"sm_80f", "sm_80 has no 'f' variant"},
           {"sm_999", "cannot compile for it; it supports sm_80, "}}) {
    for (const char* cmd : {"validate", "resolve"}) {
      const Outcome o = cli(nullptr, {"config", cmd, config, "--arch", arch});
      EXPECT_EQ(o.code, 2) << cmd << " " << arch << "\n" << o.out;
      EXPECT_TRUE(contains(o.err, "arch = \"" + arch + "\": ")) << o.err;
      EXPECT_TRUE(contains(o.err, part)) << o.err;
    }
    const Outcome o = cli(nullptr, {"compile", config, "--arch", arch});
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_TRUE(contains(o.err, part)) << o.err;
  }
  const std::string manifest = s.write("m.json", R"({"schema": "flashjit.manifest.v1", "archs": ["sm_90a", "sm_999"],
      "configs": ["c.json"]})");
  const Outcome o = cli(nullptr, {"precompile", "--dry-run", manifest});
  EXPECT_EQ(o.code, 2);
  EXPECT_TRUE(contains(o.err, "archs[1]: \"sm_999\": NVRTC")) << o.err;
}

}  // namespace
}  // namespace flashjit::cli::test

#endif  // FLASHJIT_CLI_PATH
