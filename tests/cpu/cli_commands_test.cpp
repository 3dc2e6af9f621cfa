// The flashjit commands run in-process (captured streams, a private cache per test).
#ifdef FLASHJIT_CLI_PATH  // built with the flashjit command (FLASHJIT_BUILD_CLI)

#include "cache/key.hpp"
#include "cli/commands.hpp"
#include "cli_test_support.hpp"
#include "generator/config.hpp"
#include "generator/resolve.hpp"

#include <nlohmann/json.hpp>

#include <set>

namespace flashjit::cli::test {
namespace {

using nlohmann::json;

const std::string kDefault = example("configs/default.json");

TEST(CliGenerate, IsDeterministicAndFlattens) {
  const Outcome a = cli(nullptr, {"generate", kDefault});
  const Outcome b = cli(nullptr, {"generate", kDefault});
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(a.out, b.out);
  EXPECT_TRUE(contains(a.out, "#include \"")) << "the unit includes templates";

  const Outcome flat = cli(nullptr, {"generate", kDefault, "--flat"});
  ASSERT_EQ(flat.code, 0) << flat.err;
  EXPECT_GT(flat.out.size(), a.out.size());
  std::istringstream lines(flat.out);
  for (std::string line; std::getline(lines, line);) {
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 1, "#") == 0) {
      std::string directive = line.substr(first + 1);
      directive.erase(0, directive.find_first_not_of(" \t"));
      EXPECT_FALSE(directive.rfind("include \"", 0) == 0) << line;
    }
  }
  EXPECT_EQ(cli(nullptr, {"generate", kDefault, "--flat"}).out, flat.out);

  Scratch s;
  const std::string file = (s / "unit.cu").string();
  const Outcome to_file = cli(nullptr, {"generate", kDefault, "--arch", "sm_80", "-o", file});
  ASSERT_EQ(to_file.code, 0) << to_file.err;
  EXPECT_TRUE(to_file.out.empty());
  EXPECT_EQ(read_file(file), cli(nullptr, {"generate", kDefault, "--arch", "sm_80"}).out);
  EXPECT_NE(read_file(file), a.out);

  const Outcome ref = cli(nullptr, {"generate", kDefault, "--reference"});
  ASSERT_EQ(ref.code, 0) << ref.err;
  EXPECT_NE(ref.out, a.out);
}

TEST(CliConfig, ValidateReportsEveryErrorWithItsPath) {
  Scratch s;
  const std::string bad = s.write("bad.json", R"({"arch": "sm_90a", "head_dim": {"qk": 100, "v": 7},
      "group": 0, "mask": "diagonal", "bogus": true})");
  const std::string worse = s.write("worse.json", R"({"kv_layout": {"paged": false, "page_size": 3}, "group": 300})");
  const Outcome o = cli(nullptr, {"config", "validate", bad, worse, kDefault});
  EXPECT_EQ(o.code, 2);
  for (const char* part : {"bad.json: head_dim.qk = 100: must be a multiple of 16",
                           "bad.json: head_dim.v = 7:", "bad.json: group = 0:",
                           "bad.json: mask = \"diagonal\": must be one of", "bad.json: bogus = true: unknown key",
                           "worse.json: kv_layout.page_size = 3:", "worse.json: group = 300:"})
    EXPECT_TRUE(contains(o.err, std::string("error: ") + s.path().string() + "/" + part) ||
                contains(o.err, part))
        << part << "\n" << o.err;
  EXPECT_TRUE(contains(o.out, kDefault + ": OK")) << o.out;
  EXPECT_TRUE(contains(o.out, "1 of 3 configs valid")) << o.out;
  EXPECT_FALSE(contains(o.err, "ConfigError"));

  const Outcome good = cli(nullptr, {"config", "validate", kDefault});
  EXPECT_EQ(good.code, 0) << good.err;

  // A number beyond double's range is reported like any other text that is not JSON.
  const std::string huge = s.write("huge.json", R"({"group": 1e999})");
  const Outcome h = cli(nullptr, {"config", "validate", huge});
  EXPECT_EQ(h.code, 2);
  EXPECT_TRUE(contains(h.err, "not valid JSON")) << h.err;
}

TEST(CliConfig, ResolveOutputIsJsonThatResolvesToItself) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const Outcome o = cli(nullptr, {"config", "resolve", kDefault, "--arch", arch});
    ASSERT_EQ(o.code, 0) << o.err;
    const json j = json::parse(o.out);
    const Config c = parse_config(j);
    EXPECT_EQ(c.arch, arch);
    ASSERT_TRUE(c.tuning.family.has_value());
    EXPECT_EQ(canonical_json(resolve(c)), canonical_json(c));
    EXPECT_TRUE(contains(o.err, std::string("family ") + to_string(*c.tuning.family))) << o.err;

    Scratch s;
    const std::string again = s.write("resolved.json", o.out);
    EXPECT_EQ(cli(nullptr, {"config", "resolve", again}).out, o.out);
    const Outcome compact = cli(nullptr, {"config", "resolve", again, "--compact"});
    EXPECT_EQ(compact.out, canonical_json(c) + "\n");
  }
}

// A length hint picks the tiles and is spent: the resolved config names the tiles only.
TEST(CliConfig, ResolveSpendsTheLengthHint) {
  Scratch s;
  const std::string cfg = s.write("short.json", R"({"schema": "flashjit.attention.v1", "arch": "sm_90a",
      "dtype": {"qkv": "bf16", "out": "bf16"}, "head_dim": {"qk": 64, "v": 64}, "mask": "none",
      "tuning": {"seqlen_hint": 512}})");
  const Outcome o = cli(nullptr, {"config", "resolve", cfg});
  ASSERT_EQ(o.code, 0) << o.err;
  const json t = json::parse(o.out)["tuning"];
  EXPECT_FALSE(t.contains("seqlen_hint")) << t;
  EXPECT_EQ(t["BM"], 128);
  EXPECT_EQ(t["BN"], 128);
  const Outcome bad = cli(nullptr, {"config", "validate", s.write("bad.json", R"({"tuning": {"seqlen_hint": -4}})")});
  EXPECT_NE(bad.code, 0);
  EXPECT_TRUE(contains(bad.err + bad.out, "tuning.seqlen_hint")) << bad.err << bad.out;
}

TEST(CliConfig, SchemaCoversEveryField) {
  const Outcome o = cli(nullptr, {"config", "schema"});
  ASSERT_EQ(o.code, 0);
  const json schema = json::parse(o.out);
  EXPECT_EQ(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
  // Every field a fully resolved config has (both families' tuning) appears in the schema.
  Config c = parse_config(json::parse(read_file(kDefault)));
  c.arch = "sm_90a";
  json fields = to_json(resolve(c));
  c.arch = "sm_80";
  fields["tuning"].update(to_json(resolve(c))["tuning"]);
  const json& props = schema["properties"];
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    ASSERT_TRUE(props.contains(it.key())) << it.key();
    if (it.value().is_object())
      for (auto sub = it.value().begin(); sub != it.value().end(); ++sub)
        EXPECT_TRUE(props[it.key()]["properties"].contains(sub.key())) << it.key() << "." << sub.key();
  }
  for (const char* t : {"family", "BM", "BN", "num_kv_stages", "num_qk_stages", "num_pv_stages", "swizzle", "pair_cta",
                        "splitk_partitions", "scheduler", "consumer_warpgroups", "num_warps",
                        "seqlen_hint", "kv_loads", "exp2_fma_every", "lazy_rescale"}) {
    ASSERT_TRUE(props["tuning"]["properties"].contains(t)) << t;
    EXPECT_TRUE(props["tuning"]["properties"][t].contains("description")) << t;
  }
  EXPECT_EQ(props["mask"]["enum"], (json{"none", "causal", "sliding_window"}));
}

TEST(CliCompile, CompilesForTargetsWithoutAGpuAndHitsTheCacheAfter) {
  Scratch s;
  auto store = private_store(s / "cache");
  const Outcome first = cli(store.get(), {"compile", kDefault, "--arch", "sm_90a,sm_100a", "--json"});
  ASSERT_EQ(first.code, 0) << first.err;
  const json a = json::parse(first.out);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0]["arch"], "sm_90a");
  EXPECT_EQ(a[1]["arch"], "sm_100a");
  for (const auto& r : a) {
    EXPECT_EQ(r["status"], "compiled");
    EXPECT_EQ(r["key"].get<std::string>().size(), 64u);
    EXPECT_GT(r["registers"].get<int>(), 0);
    ASSERT_TRUE(r["file"].is_string());
    EXPECT_TRUE(fs::exists(r["file"].get<std::string>()));
  }
  const Outcome second = cli(store.get(), {"compile", kDefault, "-a", "sm_90a", "-a", "sm_100a", "--json"});
  ASSERT_EQ(second.code, 0) << second.err;
  const json b = json::parse(second.out);
  ASSERT_EQ(b.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(b[i]["status"], "hit");
    EXPECT_EQ(b[i]["key"], a[i]["key"]);
  }
  const Outcome text = cli(store.get(), {"compile", kDefault});
  ASSERT_EQ(text.code, 0) << text.err;
  for (const char* part : {"status      cache hit", "key         ", "cache file  ", "registers   ", "spills      ",
                           "smem        ", "advisories  "})
    EXPECT_TRUE(contains(text.out, part)) << part << "\n" << text.out;

  // The launch line names what the generator chose: here TMA loads and pair_cta clusters.
  Scratch t;
  const std::string pair = t.write("pair.json", R"({"arch": "sm_90a", "tuning": {"pair_cta": true}})");
  const Outcome clustered = cli(store.get(), {"compile", pair});
  ASSERT_EQ(clustered.code, 0) << clustered.err;
  EXPECT_TRUE(contains(clustered.out, ", clusters of 2 CTAs sharing K/V, persistent, TMA")) << clustered.out;

  // A target the config's family rejects: exit 2, the reason on stderr, the others still built.
  const std::string pinned = t.write("pinned.json", R"({"arch": "sm_90a", "tuning": {"family": "sm90"}})");
  const Outcome mixed = cli(store.get(), {"compile", pinned, "--arch", "sm_80,sm_90a"});
  EXPECT_EQ(mixed.code, 2);
  EXPECT_TRUE(contains(mixed.err, "error: sm_80: arch = \"sm_80\": the sm90 family needs")) << mixed.err;
  EXPECT_TRUE(contains(mixed.out, "(sm_90a)")) << mixed.out;
}

TEST(CliPrecompile, BuildsAManifestInParallelWithDedupeAndShards) {
  Scratch s;
  auto store = private_store(s / "cache");
  const std::string manifest = s.write("m.json", R"({
    "schema": "flashjit.manifest.v1",
    "archs": ["sm_90a"],
    "configs": [{"head_dim": {"qk": 64, "v": 64}, "mask": "causal"},
                {"mask": "causal", "head_dim": {"v": 64, "qk": 64}},
                {"head_dim": {"qk": 64, "v": 64}, "varlen": true, "tuning": {"family": "sm80"}},
                {"head_dim": {"qk": 64, "v": 64}, "group": 0}],
    "reference": false,
    "matrix": [{"base": {"head_dim": {"qk": 64, "v": 64}}, "vary": {"mask": ["none", "causal"]}}]
  })");
  const std::string summary = (s / "summary.json").string();
  const Outcome o = cli(store.get(), {"precompile", manifest, "-j", "2", "--keep-going", "--json-summary", summary});
  EXPECT_EQ(o.code, 1) << "a rejected config is a failure\n" << o.out << o.err;
  EXPECT_TRUE(contains(o.out, "failed      1")) << o.out;
  EXPECT_TRUE(contains(o.out, "group = 0: query heads per KV head")) << o.out;
  const json j = json::parse(read_file(summary));
  EXPECT_EQ(j["kernels"], 4);     // causal, sm80 varlen, rejected, none (matrix causal = duplicate)
  EXPECT_EQ(j["duplicates"], 2);
  EXPECT_EQ(j["compiled"], 3);
  EXPECT_EQ(j["hits"], 0);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["jobs"], 2);
  std::set<std::string> names;
  for (const auto& it : j["items"]) {
    names.insert(it["name"].get<std::string>());
    if (it["status"] == "compiled") EXPECT_TRUE(fs::exists(it["file"].get<std::string>()));
  }
  EXPECT_EQ(names.size(), 4u);

  // Shards split the same deduplicated list; together they hold every item once.
  std::multiset<std::string> sharded;
  size_t hits = 0;
  for (const char* shard : {"0/2", "1/2"}) {
    const std::string sum = (s / (std::string("shard") + shard[0] + ".json")).string();
    const Outcome part = cli(store.get(), {"precompile", manifest, "--shard", shard, "-k", "--json-summary", sum});
    EXPECT_NE(part.code, 2) << part.err;
    const json p = json::parse(read_file(sum));
    EXPECT_EQ(p["compiled"], 0) << "everything is cached now";
    hits += p["hits"].get<size_t>();
    for (const auto& it : p["items"]) sharded.insert(it["name"].get<std::string>());
  }
  EXPECT_EQ(hits, 3u);
  EXPECT_EQ(sharded.size(), names.size());
  for (const auto& n : names) EXPECT_EQ(sharded.count(n), 1u) << n;

  // Without --keep-going the run stops scheduling after the first failure.
  const Outcome stop = cli(store.get(), {"precompile", manifest, "-j", "1"});
  EXPECT_EQ(stop.code, 1);
  EXPECT_TRUE(contains(stop.err, "FAILED")) << stop.err;

  const Outcome dry = cli(store.get(), {"precompile", manifest, "--dry-run", "--arch", "sm_80"});
  EXPECT_EQ(dry.code, 1) << "the rejected config is listed as rejected";
  EXPECT_TRUE(contains(dry.out, "fwd_sm80_")) << dry.out;
  EXPECT_TRUE(contains(dry.out, "rejected: group = 0")) << dry.out;
}

TEST(CliCache, ListInfoVerifyClearExportImport) {
  Scratch s;
  auto store = private_store(s / "cache");
  const cache::Key k1 = cache::KeyBuilder().add("t", "one").finish();
  const cache::Key k2 = cache::KeyBuilder().add("t", "two").finish();
  ASSERT_TRUE(store->store(k1, "fwd_sm90a_test_one", kernel_entry("fwd_sm90a_test_one", "sm_90a", k1)));
  ASSERT_TRUE(store->store(k2, "fwd_sm80_test_two", kernel_entry("fwd_sm80_test_two", "sm_80", k2)));

  Outcome o = cli(store.get(), {"cache", "list"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "fwd_sm90a_test_one")) << o.out;
  EXPECT_TRUE(contains(o.out, k2.hex.substr(0, 12)));
  EXPECT_TRUE(contains(o.out, "2 entries"));
  o = cli(store.get(), {"cache", "list", "--json"});
  EXPECT_EQ(json::parse(o.out).size(), 2u);

  o = cli(store.get(), {"cache", "info", "fwd_sm80_test_two"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(contains(o.out, k2.hex));
  EXPECT_TRUE(contains(o.out, "resolved config:"));
  EXPECT_TRUE(contains(o.out, "\"registers\": 96"));
  o = cli(store.get(), {"cache", "info", k1.hex.substr(0, 10), "--source"});
  EXPECT_EQ(o.out, "// source of fwd_sm90a_test_one\n");
  EXPECT_EQ(cli(store.get(), {"cache", "info", "nothing_like_this"}).code, 1);

  o = cli(store.get(), {"cache", "path"});
  EXPECT_EQ(o.out, (s / "cache").string() + "\n");

  EXPECT_EQ(cli(store.get(), {"cache", "verify"}).code, 0);
  // Corrupt one entry: verify reports it (exit 1) until --remove deletes it.
  const fs::path victim = store->entry_path(store->options().dir, k1, "fwd_sm90a_test_one");
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-4, std::ios::end);
    f.write("BAD!", 4);
  }
  o = cli(store.get(), {"cache", "verify"});
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(contains(o.out, victim.string())) << o.out;
  EXPECT_TRUE(contains(o.out, "1 invalid"));
  o = cli(store.get(), {"cache", "verify", "--remove"});
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_FALSE(fs::exists(victim));

  const std::string exported = (s / "shipped").string();
  o = cli(store.get(), {"cache", "export", exported});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "exported 1 entry"));
  o = cli(store.get(), {"cache", "clear"});
  EXPECT_TRUE(contains(o.out, "removed 1 entry"));
  EXPECT_TRUE(contains(cli(store.get(), {"cache", "list"}).out, "no entries"));
  o = cli(store.get(), {"cache", "import", exported});
  EXPECT_TRUE(contains(o.out, "imported 1 entry")) << o.out << o.err;
  EXPECT_TRUE(contains(cli(store.get(), {"cache", "list"}).out, "fwd_sm80_test_two"));

  o = cli(store.get(), {"cache", "prune", "--max-bytes", "0"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(contains(cli(store.get(), {"cache", "list"}).out, "no entries"));
  EXPECT_EQ(cli(store.get(), {"cache", "prune", "--max-bytes", "lots"}).code, 2);
}

TEST(CliUsage, BadCommandLinesExitWithUsageErrors) {
  Scratch s;
  auto store = private_store(s / "cache");
  const std::string manifest = s.write("m.json", R"({"schema": "flashjit.manifest.v1", "configs": []})");
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"frobnicate"},
      {"generate"},
      {"generate", kDefault, "--no-such-flag"},
      {"generate", (s / "missing.json").string()},
      {"compile", kDefault, "--arch", "sm_75"},
      {"config"},
      {"config", "validate"},
      {"cache", "prune"},
      {"precompile", manifest, "--shard", "2/2"},
      {"precompile", manifest, "-j", "0"},
      {"precompile", (s / "missing.json").string()},
      {"-v", "-q", "config", "schema"},
      {"run", kDefault, "--layout", "sbhd"},
      {"run", kDefault, "--load-k-scale", (s / "k_scale.npy").string()},  // without --load-k
      {"bench", kDefault, "--iters", "5"},
  };
  for (const auto& args : bad) {
    const Outcome o = cli(store.get(), args);
    EXPECT_EQ(o.code, 2) << ::testing::PrintToString(args) << "\n" << o.err;
    EXPECT_TRUE(contains(o.err, "error: ")) << ::testing::PrintToString(args) << "\n" << o.err;
  }
  const Outcome help = cli(store.get(), {"precompile", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_TRUE(contains(help.out, "--shard"));
}

}  // namespace
}  // namespace flashjit::cli::test

#endif  // FLASHJIT_CLI_PATH
