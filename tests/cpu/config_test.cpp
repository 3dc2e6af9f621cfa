// Config parsing and validation: every rule, with valid and invalid values, and error messages
// that name the field path, the value and the rule.
#include "generator/arch.hpp"
#include "generator/config.hpp"
#include "generator/resolve.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace flashjit {
namespace {

using nlohmann::json;

json base() {
  return json::parse(R"({"schema": "flashjit.attention.v1", "arch": "sm_90a",
                         "dtype": {"qkv": "bf16", "out": "bf16"},
                         "head_dim": {"qk": 128, "v": 128}, "mask": "causal"})");
}

// The issues check_config reports for `j` (parse errors included).
std::vector<ConfigIssue> issues_of(const json& j) {
  try {
    return check_config(parse_config(j));
  } catch (const ConfigError& e) {
    return e.issues();
  }
}

bool has_issue(const std::vector<ConfigIssue>& issues, const std::string& path) {
  for (const auto& i : issues)
    if (i.path == path) return true;
  return false;
}

std::string first_message(const json& j) {
  auto issues = issues_of(j);
  return issues.empty() ? "" : issues[0].message();
}

TEST(Config, DefaultExampleIsValid) { EXPECT_TRUE(issues_of(base()).empty()); }

// nlohmann reports a number too large for a double as out_of_range, not as a parse error.
TEST(Config, TextThatIsNotJsonIsAConfigError) {
  for (const char* text : {"{\"group\": ", "5E505", "{\"group\": 44E6444444444}"}) {
    try {
      parse_config_text(text, "input.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
    }
  }
}

TEST(Config, RoundTripsThroughJson) {
  Config c = parse_config(base());
  Config again = parse_config(to_json(c));
  EXPECT_EQ(canonical_json(c), canonical_json(again));
}

// Every leaf of the JSON form, changed: the configs compare unequal exactly when their
// canonical forms differ, and equal configs hash equally (the runtime keys loaded kernels so).
// Every tuning field is set, a false one too: each must survive the round trip.
TEST(Config, EqualityAndHashFollowTheCanonicalForm) {
  json full = base();
  full["tuning"] = json::parse(R"({"family": "sm90", "BM": 128, "BN": 128, "num_kv_stages": 2,
      "num_qk_stages": 1, "num_pv_stages": 1, "swizzle": 128, "pair_cta": false,
      "splitk_partitions": 1, "scheduler": "dynamic", "consumer_warpgroups": 2, "seqlen_hint": 512,
      "kv_loads": "tma", "exp2_fma_every": 4, "num_warps": 8, "swap_qk": false, "max_seqlen_q": 4})");
  const Config c = parse_config(full);
  EXPECT_TRUE(c == parse_config(to_json(c)));
  EXPECT_EQ(ConfigHash()(c), ConfigHash()(parse_config(to_json(c))));

  const json canonical = to_json(c);
  const json flat = canonical.flatten();
  const std::vector<json> alternatives = {64, true, "fp16", "bf16", "none", "per_head", "sm80", "persistent",
                                          "sliding_window", "cp_async"};
  int changed = 0;
  for (const auto& [path, value] : flat.items()) {
    if (path == "/schema") continue;
    std::vector<json> tries;
    if (value.is_number()) tries = {value.get<int>() + 16};
    else if (value.is_boolean()) tries = {!value.get<bool>()};
    else if (path == "/arch") tries = {"sm_80"};
    else tries = alternatives;
    bool done = false;
    for (const json& v : tries) {
      if (v == value) continue;
      json mutated = flat;
      mutated[path] = v;
      Config m;
      try {
        m = parse_config(mutated.unflatten());
      } catch (const ConfigError&) {
        continue;
      }
      EXPECT_FALSE(m == c) << path << " = " << v.dump();
      EXPECT_NE(canonical_json(m), canonical_json(c)) << path;
      done = true;
      break;
    }
    EXPECT_TRUE(done) << "no other value of " << path << " parses";
    changed += done;
  }
  EXPECT_GE(changed, 25);  // every field of the config, tuning included
}

TEST(Config, UnknownKeysAreErrorsAtTheirPath) {
  json j = base();
  j["dtype"]["qvk"] = "bf16";
  j["tuning"] = {{"BNN", 64}};
  j["extra"] = 1;
  auto issues = issues_of(j);
  EXPECT_TRUE(has_issue(issues, "dtype.qvk"));
  EXPECT_TRUE(has_issue(issues, "tuning.BNN"));
  EXPECT_TRUE(has_issue(issues, "extra"));
}

TEST(Config, WrongTypesNameTheField) {
  json j = base();
  j["head_dim"]["qk"] = "128";
  j["varlen"] = 1;
  j["mask"] = "diagonal";
  auto issues = issues_of(j);
  EXPECT_TRUE(has_issue(issues, "head_dim.qk"));
  EXPECT_TRUE(has_issue(issues, "varlen"));
  EXPECT_TRUE(has_issue(issues, "mask"));
}

TEST(Config, ReportsAllErrorsAtOnce) {
  json j = base();
  j["head_dim"]["qk"] = 100;
  j["group"] = 0;
  j["dtype"]["out"] = "e4m3";
  auto issues = issues_of(j);
  EXPECT_GE(issues.size(), 3u);
}

TEST(Config, MessageNamesPathValueAndRule) {
  json j = base();
  j["head_dim"]["qk"] = 100;
  EXPECT_EQ(first_message(j), "head_dim.qk = 100: must be a multiple of 16 between 16 and 576");
}

TEST(Config, SchemaMustMatch) {
  json j = base();
  j["schema"] = "flashjit.attention.v0";
  EXPECT_TRUE(has_issue(issues_of(j), "schema"));
}

TEST(Config, ArchMustBeATarget) {
  for (const char* bad : {"sm_75", "sm90", "compute_90a", "sm_9x", ""}) {
    json j = base();
    j["arch"] = bad;
    EXPECT_TRUE(has_issue(issues_of(j), "arch")) << bad;
  }
  for (const char* good : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120"}) {
    json j = base();
    j["arch"] = good;
    EXPECT_FALSE(has_issue(issues_of(j), "arch")) << good;
  }
  json native = base();
  native["arch"] = "native";
  EXPECT_TRUE(has_issue(issues_of(native), "arch"));  // only the runtime knows the device
}

TEST(Config, HeadDimRules) {
  json j = base();
  j["head_dim"] = {{"qk", 8}, {"v", 600}, {"rope", 8}};
  auto issues = issues_of(j);
  EXPECT_TRUE(has_issue(issues, "head_dim.qk"));
  EXPECT_TRUE(has_issue(issues, "head_dim.v"));
  EXPECT_TRUE(has_issue(issues, "head_dim.rope"));
}

TEST(Config, RopeMustBeSmallerThanQk) {
  json j = base();
  j["head_dim"] = {{"qk", 64}, {"v", 64}, {"rope", 64}};
  EXPECT_NE(first_message(j).find("rope < qk"), std::string::npos);
  j["head_dim"]["rope"] = 32;
  j["tuning"] = {{"family", "sm80"}};
  EXPECT_TRUE(issues_of(j).empty());
}

TEST(Config, RopeDtypeOnlyWithRope) {
  json j = base();
  j["dtype"]["rope"] = "bf16";
  EXPECT_TRUE(has_issue(issues_of(j), "dtype.rope"));
}

TEST(Config, Fp8NeedsA16BitOutput) {
  json j = base();
  j["dtype"] = {{"qkv", "e4m3"}, {"out", "e4m3"}};
  EXPECT_NE(first_message(j).find("fp8 inputs need a 16-bit output"), std::string::npos);
}

TEST(Config, Fp32InputsAreRejected) {
  json j = base();
  j["dtype"]["qkv"] = "fp32";
  EXPECT_TRUE(has_issue(issues_of(j), "dtype.qkv"));
}

TEST(Config, ScaleDtypeOnlyWithPerTokenScales) {
  json j = base();
  j["dtype"]["scale"] = "fp32";
  EXPECT_TRUE(has_issue(issues_of(j), "dtype.scale"));
  json k = base();
  k["scales"] = {{"q", "per_token"}};
  EXPECT_TRUE(has_issue(issues_of(k), "dtype.scale"));
  json v = base();
  v["scales"] = {{"v", "per_token"}};  // per-token V scales need their type too
  EXPECT_TRUE(has_issue(issues_of(v), "dtype.scale"));
  EXPECT_FALSE(has_issue(issues_of(v), "scales.v"));
  json layout = base();
  layout["scales"] = {{"k", "per_head"}, {"token_layout", "cache"}};  // a layout of per-token scales only
  EXPECT_TRUE(has_issue(issues_of(layout), "scales.token_layout"));
  layout["scales"]["token_layout"] = "pages";
  EXPECT_TRUE(has_issue(issues_of(layout), "scales.token_layout"));
}

TEST(Config, PageSizeRules) {
  json j = base();
  j["kv_layout"] = {{"paged", true}, {"page_size", 24}};
  EXPECT_TRUE(has_issue(issues_of(j), "kv_layout.page_size"));
  json k = base();
  k["kv_layout"] = {{"paged", false}, {"page_size", 64}};
  EXPECT_TRUE(has_issue(issues_of(k), "kv_layout.page_size"));
}

TEST(Config, GroupRange) {
  json j = base();
  j["group"] = 0;
  EXPECT_TRUE(has_issue(issues_of(j), "group"));
  j["group"] = 8;
  EXPECT_TRUE(issues_of(j).empty());
}

TEST(Config, SeqlenHintMustBeALength) {
  json j = base();
  j["tuning"] = {{"seqlen_hint", 0}};
  EXPECT_TRUE(has_issue(issues_of(j), "tuning.seqlen_hint"));
  j["tuning"]["seqlen_hint"] = "long";
  EXPECT_TRUE(has_issue(issues_of(j), "tuning.seqlen_hint"));
  j["tuning"]["seqlen_hint"] = 512;
  EXPECT_TRUE(issues_of(j).empty());
  Config c = parse_config(j);
  EXPECT_EQ(c.tuning.seqlen_hint, 512);
  EXPECT_EQ(canonical_json(parse_config(to_json(c))), canonical_json(c));
}

TEST(Config, UnimplementedFeaturesAreRejectedByName) {
  // Paged caches are the sm80 and decode families' (row gathers); the sm90 family names the field.
  json paged = base();
  paged["kv_layout"] = {{"paged", true}, {"page_size", 64}};
  paged["tuning"] = {{"family", "sm90"}};
  EXPECT_NE(first_message(paged).find("kv_layout.paged"), std::string::npos);
}

// The sm90 family computes fp8 at head dims of whole swizzled panels whose register limits are
// measured (64, 128, 256; 192 / 128) with per-tensor or per-head scales and per-token Q scales;
// what else it lacks it names, and "auto" runs such configs on the sm80 family.
TEST(Config, Sm90Fp8RulesNameWhatTheFamilyLacks) {
  json fp8 = base();
  fp8["arch"] = "sm_90a";
  fp8["dtype"] = {{"qkv", "e4m3"}, {"out", "bf16"}, {"scale", "bf16"}};
  fp8["head_dim"] = {{"qk", 128}, {"v", 128}};
  fp8["scales"] = {{"q", "per_token"}, {"k", "per_head"}, {"v", "per_tensor"}};
  fp8["tuning"] = {{"family", "sm90"}};
  EXPECT_TRUE(issues_of(fp8).empty()) << first_message(fp8);
  json d64 = fp8;
  d64["head_dim"] = {{"qk", 64}, {"v", 64}};
  EXPECT_TRUE(issues_of(d64).empty()) << first_message(d64);  // 64-byte panels
  json d96 = fp8;
  d96["head_dim"] = {{"qk", 96}, {"v", 96}};
  EXPECT_TRUE(has_issue(issues_of(d96), "head_dim.qk"));
  json unmeasured = fp8;
  unmeasured["head_dim"] = {{"qk", 128}, {"v", 64}};
  EXPECT_TRUE(has_issue(issues_of(unmeasured), "head_dim"));
  // Per-token K scales, by position or laid out like the cache's rows, run on it; beside a rope
  // part they do not.
  json k_tokens = fp8;
  k_tokens["scales"]["k"] = "per_token";
  EXPECT_TRUE(issues_of(k_tokens).empty()) << first_message(k_tokens);
  json k_tokens_cache = k_tokens;
  k_tokens_cache["scales"]["token_layout"] = "cache";
  EXPECT_TRUE(issues_of(k_tokens_cache).empty()) << first_message(k_tokens_cache);
  json k_tokens_rope = k_tokens;
  k_tokens_rope["head_dim"] = {{"qk", 256}, {"v", 128}, {"rope", 128}};
  k_tokens_rope["dtype"]["rope"] = "bf16";
  EXPECT_TRUE(has_issue(issues_of(k_tokens_rope), "scales.k"));
  json pair = fp8;  // K/V shared by a cluster; Vt is each CTA's own
  pair["tuning"]["pair_cta"] = true;
  pair["tuning"]["scheduler"] = "persistent";
  EXPECT_TRUE(issues_of(pair).empty()) << first_message(pair);
  json pair_k_tokens = pair;  // a K stage's per-token scales are written by its own CTA
  pair_k_tokens["scales"]["k"] = "per_token";
  EXPECT_TRUE(has_issue(issues_of(pair_k_tokens), "tuning.pair_cta"));
  json odd_bn = fp8;
  odd_bn["tuning"]["BN"] = 80;
  EXPECT_TRUE(has_issue(issues_of(odd_bn), "tuning.BN"));
  for (json* c : {&d96, &unmeasured, &k_tokens_rope}) {
    c->erase("tuning");
    EXPECT_TRUE(issues_of(*c).empty()) << first_message(*c);  // auto: the sm80 family
    EXPECT_EQ(resolve(parse_config(*c)).tuning.family, Family::sm80);
  }
  for (json* c : {&fp8, &d64}) {
    c->erase("tuning");
    EXPECT_EQ(resolve(parse_config(*c)).tuning.family, Family::sm90);
  }
}

// tuning.exp2_fma_every: the sm90 family's, 0 to 8; the other families name it as not theirs;
// unset, the resolved config does not name it (the canonical forms of other configs stay as they
// were), set, it stays.
TEST(Config, Exp2FmaEveryRules) {
  json j = base();
  for (int ok : {0, 1, 2, 8}) {
    j["tuning"]["exp2_fma_every"] = ok;
    EXPECT_TRUE(issues_of(j).empty()) << ok << ": " << first_message(j);
    EXPECT_EQ(*resolve(parse_config(j)).tuning.exp2_fma_every, ok);
  }
  for (int bad : {-1, 9}) {
    j["tuning"]["exp2_fma_every"] = bad;
    EXPECT_TRUE(has_issue(issues_of(j), "tuning.exp2_fma_every")) << bad;
  }
  j["tuning"]["exp2_fma_every"] = 2;
  j["arch"] = "sm_80";
  EXPECT_TRUE(has_issue(issues_of(j), "tuning.exp2_fma_every"));
  json decode = base();
  decode["tuning"] = {{"max_seqlen_q", 1}, {"exp2_fma_every", 2}};
  decode["kv_layout"] = {{"paged", true}, {"page_size", 16}};
  EXPECT_TRUE(has_issue(issues_of(decode), "tuning.exp2_fma_every"));
  EXPECT_FALSE(resolve(parse_config(base())).tuning.exp2_fma_every.has_value());
}

// tuning.lazy_rescale: resolved by the O accumulator's width (on from head_dim.v 128 for 16-bit
// inputs, from 256 for fp8), a named value kept; a bool; the sm90 family's only.
TEST(Config, LazyRescaleDefaultsAndRules) {
  auto resolved = [](int qk, int v, const char* qkv) {
    json j = base();
    j["head_dim"] = {{"qk", qk}, {"v", v}};
    j["dtype"]["qkv"] = qkv;
    return resolve(parse_config(j)).tuning.lazy_rescale;
  };
  EXPECT_EQ(resolved(64, 64, "bf16"), false);
  EXPECT_EQ(resolved(128, 128, "fp16"), true);
  EXPECT_EQ(resolved(256, 256, "bf16"), true);
  EXPECT_EQ(resolved(128, 128, "e4m3"), false);
  EXPECT_EQ(resolved(256, 256, "e5m2"), true);
  json j = base();
  j["tuning"]["lazy_rescale"] = false;
  EXPECT_TRUE(issues_of(j).empty()) << first_message(j);
  EXPECT_EQ(resolve(parse_config(j)).tuning.lazy_rescale, false);
  EXPECT_EQ(to_json(resolve(parse_config(j)))["tuning"]["lazy_rescale"], false);
  j["tuning"]["lazy_rescale"] = 1;
  EXPECT_TRUE(has_issue(issues_of(j), "tuning.lazy_rescale"));
  j["tuning"]["lazy_rescale"] = true;
  j["arch"] = "sm_80";
  EXPECT_TRUE(has_issue(issues_of(j), "tuning.lazy_rescale"));
  json decode = base();
  decode["tuning"] = {{"max_seqlen_q", 1}, {"lazy_rescale", true}};
  decode["kv_layout"] = {{"paged", true}, {"page_size", 16}};
  EXPECT_TRUE(has_issue(issues_of(decode), "tuning.lazy_rescale"));
}

// 'a' targets exist from sm_90 on and 'f' targets from sm_100 on; anything else is rejected with
// the rule it breaks (NVRTC would only fail later).
// An SM's shared memory: the opt-in limit plus 1 KB, and 1 KB reserved beside each CTA's own
// (228 KB on sm_90a, 164 KB on sm_80, 100 KB on sm_89).
TEST(Config, CtasThatAnSmsSharedMemoryHolds) {
  EXPECT_EQ(parse_arch("sm_90a")->ctas_by_smem(69008), 3);   // 3 x 70,032 <= 233,472
  EXPECT_EQ(parse_arch("sm_90a")->ctas_by_smem(76800), 3);   // 3 x 77,824 = 233,472 exactly
  EXPECT_EQ(parse_arch("sm_90a")->ctas_by_smem(76801), 2);
  EXPECT_EQ(parse_arch("sm_80")->ctas_by_smem(69008), 2);    // 167,936 bytes an SM
  EXPECT_EQ(parse_arch("sm_89")->ctas_by_smem(49152), 2);    // 102,400 bytes an SM
  EXPECT_EQ(parse_arch("sm_90a")->ctas_by_smem(232448), 1);
}

TEST(Config, ArchSuffixesFollowTheRulesOfEachArch) {
  for (const char* good : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f", "sm_103f",
                           "sm_120a", "sm_121f"})
    EXPECT_EQ(arch_problem(good), "") << good;
  const std::pair<const char*, const char*> bad[] = {
      {"sm_89a", "sm_89 has no 'a' variant"}, {"sm_80f", "sm_80 has no 'f' variant"},
      {"sm_90f", "sm_90 has no 'f' variant"}, {"sm_86a", "from sm_90a on"},
      {"sm_75", "sm_80 or newer"},           {"sm_090", "must be a CUDA target"},
      {"compute_90a", "virtual arch"},       {"sm_9", "must be a CUDA target"},
      {"sm_90af", "must be a CUDA target"}};
  for (const auto& [arch, rule] : bad) {
    EXPECT_FALSE(parse_arch(arch)) << arch;
    json j = base();
    j["arch"] = arch;
    const auto issues = issues_of(j);
    ASSERT_EQ(issues.size(), 1u) << arch;
    EXPECT_EQ(issues[0].path, "arch");
    EXPECT_EQ(issues[0].value, std::string("\"") + arch + "\"");
    EXPECT_NE(issues[0].rule.find(rule), std::string::npos) << arch << ": " << issues[0].rule;
  }
}

TEST(Config, ParseErrorsOfTextNameTheOrigin) {
  try {
    parse_config_text("{not json", "my.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("my.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace flashjit
