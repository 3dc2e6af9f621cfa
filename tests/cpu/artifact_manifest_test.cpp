// A kernel's cache manifest is checked field by field before the runtime reads it; an entry
// whose manifest fails is a miss that is compiled again and replaced, never a permanent error.
#include "cache/entry_file.hpp"
#include "cache/store.hpp"
#include "cache_test_support.hpp"
#include "generator/config.hpp"
#include "generator/generate.hpp"
#include "runtime/artifact.hpp"

#include <gtest/gtest.h>

namespace flashjit {
namespace {

using nlohmann::json;

// What build_artifact writes, less the bulky fields.
json good_manifest(const std::string& key) {
  LaunchInfo l;
  l.family = "sm80";
  l.entry = "k";
  l.threads = 128;
  l.smem_bytes = 49152;
  PtxasReport r;
  r.registers = 128;
  r.advisories = {"a note"};
  return {{"name", "fwd"}, {"key", key}, {"launch", to_json(l)}, {"config", {{"arch", "sm_80"}}},
          {"ptxas", to_json(r)}, {"compile_ms", 12.5}};
}

TEST(ArtifactManifest, EveryFieldTheRuntimeReadsIsChecked) {
  const std::string key(64, 'a');
  EXPECT_EQ(artifact_manifest_problem(good_manifest(key), key), "");
  EXPECT_NO_THROW(artifact_from_entry(cache::Entry{good_manifest(key), "cubin"}));
  struct Case {
    const char* pointer;  // JSON pointer of the field to change
    json value;           // nullptr: remove it
    const char* problem;
  };
  const std::vector<Case> cases = {
      {"/ptxas", nullptr, "ptxas is missing"},
      {"/launch", nullptr, "launch is missing"},
      {"/name", 7, "name is not a string"},
      {"/config", "sm_80", "config is not an object"},
      {"/compile_ms", "fast", "compile_ms is not a number"},
      {"/launch/threads", 0, "launch.threads is not an integer from 1 to 1024"},
      {"/launch/threads", 1e308, "launch.threads is not an integer"},
      {"/launch/threads", 18446744073709551615ull, "launch.threads is not an integer"},
      {"/launch/smem_bytes", -1, "launch.smem_bytes is not an integer"},
      {"/launch/smem_bytes", 4294967296ll, "launch.smem_bytes is not an integer"},
      {"/launch/cluster_m", 0, "launch.cluster_m"},
      {"/launch/persistent", 1, "launch.persistent is not true or false"},
      {"/launch/entry", nullptr, "launch.entry is missing"},
      {"/launch/lpt_l2_bytes", -5, "launch.lpt_l2_bytes"},
      {"/ptxas/registers", "many", "ptxas.registers is not an integer"},
      {"/ptxas/advisories", json::array({1}), "ptxas.advisories is not an array of strings"},
      {"/key", std::string(64, 'b'), "not the entry's key"},
      {"/launch/passes", 5, "launch.passes is not an array"},
      {"/launch/passes", json::array({7}), "launch.passes[0] is not an object"},
      {"/launch/passes", json::array({{{"role", "combine"}, {"entry", "c"}, {"threads", 0}, {"smem_bytes", 0}}}),
       "launch.passes[0].threads is not an integer from 1 to 1024"},
      {"/launch/passes", json::array({{{"role", "combine"}, {"threads", 64}, {"smem_bytes", 0}}}),
       "launch.passes[0].entry is missing"},
  };
  for (const auto& c : cases) {
    json m = good_manifest(key);
    const json::json_pointer p(c.pointer);
    if (c.value.is_null()) m[p.parent_pointer()].erase(p.back());
    else m[p] = c.value;
    const std::string problem = artifact_manifest_problem(m, key);
    EXPECT_NE(problem.find(c.problem), std::string::npos) << c.pointer << ": " << problem;
    if (std::string(c.pointer) != "/key") {
      EXPECT_THROW(artifact_from_entry(cache::Entry{m, "cubin"}), std::runtime_error) << c.pointer;
    }
  }
  EXPECT_NE(artifact_manifest_problem(json::array(), key).find("not a JSON object"), std::string::npos);
  // an operation's further kernels, as the generator writes them, pass
  LaunchInfo with_pass = launch_info_from_json(good_manifest(key)["launch"]);
  with_pass.passes.push_back({"combine", "combine_kernel", 128, 0});
  json m = good_manifest(key);
  m["launch"] = to_json(with_pass);
  EXPECT_EQ(artifact_manifest_problem(m, key), "");
  EXPECT_EQ(artifact_from_entry(cache::Entry{m, "cubin"}).launch.passes.size(), 1u);
}

TEST(ArtifactManifest, AnEntryLackingAFieldIsCompiledAgainAndReplaced) {
  cache::test::ScratchDir scratch;
  cache::DiskStore store(cache::test::options_for(scratch.path()));
  Config c = load_config_file(std::string(FLASHJIT_SOURCE_DIR) + "/examples/configs/default.json");
  c.arch = "sm_80";
  const KernelSource src = generate(c);
  const cache::Key key = artifact_key(src);
  json m = good_manifest(key.hex);
  m.erase("ptxas");
  ASSERT_TRUE(store.store(key, src.name, cache::Entry{m, "not a cubin"}));  // checksum and all: a valid file
  const std::filesystem::path file = store.entry_path(scratch.path(), key, src.name);
  cache::test::LogCapture log;
  const Artifact a = build_artifact(src, store);
  EXPECT_TRUE(a.compiled);
  EXPECT_EQ(a.cache_file, file.string());
  EXPECT_EQ(log.count_warnings({file.string(), "ptxas is missing", "removed"}), 1u)
      << ::testing::PrintToString(log.warnings());
  const Artifact again = build_artifact(src, store);
  EXPECT_FALSE(again.compiled);
  EXPECT_EQ(again.cubin, a.cubin);
  EXPECT_GT(again.ptxas.registers, 0);
}

}  // namespace
}  // namespace flashjit
