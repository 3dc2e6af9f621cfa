#include "generator/config.hpp"

#include "generator/element_types.hpp"
#include "generator/excerpt.hpp"
#include "generator/user_json.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <set>

namespace flashjit {

using nlohmann::json;

// ---- enum names -------------------------------------------------------------------------------

const char* to_string(DType d) { return element_type(d).name; }
const char* to_string(Mask m) {
  switch (m) {
    case Mask::none: return "none";
    case Mask::causal: return "causal";
    case Mask::sliding_window: return "sliding_window";
  }
  return "?";
}
const char* to_string(ScaleGranularity s) {
  switch (s) {
    case ScaleGranularity::none: return "none";
    case ScaleGranularity::per_tensor: return "per_tensor";
    case ScaleGranularity::per_head: return "per_head";
    case ScaleGranularity::per_token: return "per_token";
  }
  return "?";
}
const char* to_string(Family f) {
  switch (f) {
    case Family::automatic: return "auto";
    case Family::sm80: return "sm80";
    case Family::sm90: return "sm90";
    case Family::sm100: return "sm100";
    case Family::decode: return "decode";
  }
  return "?";
}
const char* to_string(Scheduler s) {
  switch (s) {
    case Scheduler::automatic: return "auto";
    case Scheduler::transient: return "transient";
    case Scheduler::persistent: return "persistent";
    case Scheduler::dynamic: return "dynamic";
  }
  return "?";
}
const char* to_string(KvLoads l) {
  switch (l) {
    case KvLoads::automatic: return "auto";
    case KvLoads::cp_async: return "cp_async";
    case KvLoads::tma: return "tma";
  }
  return "?";
}
const char* to_string(ScaleLayout l) {
  switch (l) {
    case ScaleLayout::positions: return "positions";
    case ScaleLayout::cache: return "cache";
  }
  return "?";
}
int dtype_bytes(DType d) { return element_type(d).bytes; }

// ---- errors -----------------------------------------------------------------------------------

std::string ConfigIssue::message() const {
  std::string m = path.empty() ? std::string("config") : path;
  if (!value.empty()) m += " = " + value;
  return m + ": " + rule;
}

namespace {
std::string join_issues(const std::vector<ConfigIssue>& issues) {
  std::string s = issues.size() == 1 ? "invalid config: " : "invalid config (" +
                  std::to_string(issues.size()) + " errors):";
  if (issues.size() == 1) return s + issues[0].message();
  for (const auto& i : issues) s += "\n  " + i.message();
  return s;
}
}  // namespace

ConfigError::ConfigError(std::vector<ConfigIssue> issues)
    : std::runtime_error(join_issues(issues)), issues_(std::move(issues)) {}

// ---- parsing ----------------------------------------------------------------------------------

namespace {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

const EnumName<DType> kDTypes[] = {{DType::bf16, "bf16"}, {DType::fp16, "fp16"},
                                   {DType::e4m3, "e4m3"}, {DType::e5m2, "e5m2"},
                                   {DType::fp32, "fp32"}};
const EnumName<Mask> kMasks[] = {{Mask::none, "none"}, {Mask::causal, "causal"},
                                 {Mask::sliding_window, "sliding_window"}};
const EnumName<ScaleGranularity> kScales[] = {{ScaleGranularity::none, "none"},
                                              {ScaleGranularity::per_tensor, "per_tensor"},
                                              {ScaleGranularity::per_head, "per_head"},
                                              {ScaleGranularity::per_token, "per_token"}};
const EnumName<ScaleLayout> kScaleLayouts[] = {{ScaleLayout::positions, "positions"}, {ScaleLayout::cache, "cache"}};
const EnumName<Family> kFamilies[] = {{Family::automatic, "auto"}, {Family::sm80, "sm80"},
                                      {Family::sm90, "sm90"}, {Family::sm100, "sm100"},
                                      {Family::decode, "decode"}};
const EnumName<Scheduler> kSchedulers[] = {{Scheduler::automatic, "auto"},
                                           {Scheduler::transient, "transient"},
                                           {Scheduler::persistent, "persistent"},
                                           {Scheduler::dynamic, "dynamic"}};
const EnumName<KvLoads> kKvLoads[] = {{KvLoads::automatic, "auto"}, {KvLoads::cp_async, "cp_async"},
                                      {KvLoads::tma, "tma"}};

std::string show(const json& v) { return json_excerpt(v); }

// A CUDA target name is a handful of characters; a longer string is not one, and is not kept.
constexpr std::size_t kMaxArchChars = 32;

// Walks one JSON object: typed reads that record issues instead of throwing, and a final check
// that reports every key nobody read.
class ObjectReader {
 public:
  ObjectReader(const json& obj, std::string path, std::vector<ConfigIssue>& issues)
      : obj_(obj), path_(std::move(path)), issues_(issues) {}

  std::string sub(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  const json* find(const std::string& key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }
  void issue(const std::string& key, const json& v, const std::string& rule) {
    issues_.push_back({sub(key), show(v), rule});
  }

  void read_int(const std::string& key, int& out) {
    if (const json* v = find(key)) read_int_value(key, *v, out);
  }
  void read_int(const std::string& key, std::optional<int>& out) {
    if (const json* v = find(key)) {
      if (v->is_null()) return;
      int x = 0;
      size_t before = issues_.size();
      read_int_value(key, *v, x);
      if (issues_.size() == before) out = x;
    }
  }
  void read_bool(const std::string& key, bool& out) {
    if (const json* v = find(key)) {
      if (v->is_boolean()) out = v->get<bool>();
      else issue(key, *v, "must be true or false");
    }
  }
  void read_bool(const std::string& key, std::optional<bool>& out) {
    if (const json* v = find(key)) {
      if (v->is_null()) return;
      if (v->is_boolean()) out = v->get<bool>();
      else issue(key, *v, "must be true or false");
    }
  }
  void read_string(const std::string& key, std::string& out) {
    if (const json* v = find(key)) {
      if (v->is_string()) out = v->get<std::string>();
      else issue(key, *v, "must be a string");
    }
  }
  template <class E, size_t N>
  bool read_enum(const std::string& key, const EnumName<E> (&names)[N], E& out) {
    const json* v = find(key);
    if (!v) return false;
    if (v->is_string()) {
      for (const auto& n : names)
        if (v->get<std::string>() == n.name) {
          out = n.value;
          return true;
        }
    }
    std::string allowed;
    for (const auto& n : names) allowed += std::string(allowed.empty() ? "" : ", ") + n.name;
    issue(key, *v, "must be one of: " + allowed);
    return false;
  }
  template <class E, size_t N>
  void read_enum(const std::string& key, const EnumName<E> (&names)[N], std::optional<E>& out) {
    const json* v = find(key);
    if (!v || v->is_null()) return;
    E e{};
    if (read_enum(key, names, e)) out = e;
  }
  // Reads a nested object; returns nullptr (with an issue) when the value is not an object.
  const json* object(const std::string& key) {
    const json* v = find(key);
    if (v && !v->is_object()) {
      issue(key, *v, "must be an object");
      return nullptr;
    }
    return v;
  }
  void check_unknown() {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!seen_.count(it.key()))
        issues_.push_back({sub(excerpt(it.key())), show(it.value()), "unknown key"});
  }

 private:
  void read_int_value(const std::string& key, const json& v, int& out) {
    if (!v.is_number_integer()) {
      issue(key, v, "must be an integer");
      return;
    }
    // Unsigned values above INT64_MAX must not wrap to negative ones on the way.
    const bool in_range = v.is_number_unsigned()
                              ? v.get<unsigned long long>() <= (1ULL << 30)
                              : v.get<long long>() >= -(1LL << 30) && v.get<long long>() <= (1LL << 30);
    if (!in_range) issue(key, v, "integer out of range (at most 2^30 in magnitude)");
    else out = static_cast<int>(v.get<long long>());
  }

  const json& obj_;
  std::string path_;
  std::vector<ConfigIssue>& issues_;
  std::set<std::string> seen_;
};

void parse_tuning(const json& j, std::vector<ConfigIssue>& issues, Tuning& t) {
  ObjectReader r(j, "tuning", issues);
  r.read_enum("family", kFamilies, t.family);
  r.read_int("BM", t.BM);
  r.read_int("BN", t.BN);
  r.read_int("num_kv_stages", t.num_kv_stages);
  r.read_int("num_qk_stages", t.num_qk_stages);
  r.read_int("num_pv_stages", t.num_pv_stages);
  r.read_int("swizzle", t.swizzle);
  r.read_bool("pair_cta", t.pair_cta);
  r.read_int("splitk_partitions", t.splitk_partitions);
  r.read_enum("scheduler", kSchedulers, t.scheduler);
  r.read_int("consumer_warpgroups", t.consumer_warpgroups);
  r.read_int("num_warps", t.num_warps);
  r.read_enum("kv_loads", kKvLoads, t.kv_loads);
  r.read_int("exp2_fma_every", t.exp2_fma_every);
  r.read_bool("lazy_rescale", t.lazy_rescale);
  r.read_bool("swap_qk", t.swap_qk);
  r.read_int("seqlen_hint", t.seqlen_hint);
  r.read_int("max_seqlen_q", t.max_seqlen_q);
  r.check_unknown();
}

}  // namespace

Config parse_config(const json& j) {
  std::vector<ConfigIssue> issues;
  Config c;
  if (!j.is_object()) throw ConfigError({{"", show(j), "the config must be a JSON object"}});
  ObjectReader r(j, "", issues);

  if (const json* s = r.find("schema")) {
    if (!s->is_string() || s->get<std::string>() != kConfigSchema)
      r.issue("schema", *s, std::string("must be \"") + kConfigSchema + "\"");
  }
  r.read_string("arch", c.arch);
  if (c.arch.size() > kMaxArchChars) {
    r.issue("arch", c.arch, "not a CUDA target (longer than " + std::to_string(kMaxArchChars) + " characters)");
    c.arch.clear();
  }
  if (const json* d = r.object("dtype")) {
    ObjectReader dr(*d, "dtype", issues);
    dr.read_enum("qkv", kDTypes, c.dtype.qkv);
    dr.read_enum("out", kDTypes, c.dtype.out);
    dr.read_enum("q", kDTypes, c.dtype.q);
    dr.read_enum("rope", kDTypes, c.dtype.rope);
    dr.read_enum("scale", kDTypes, c.dtype.scale);
    dr.check_unknown();
  }
  if (const json* h = r.object("head_dim")) {
    ObjectReader hr(*h, "head_dim", issues);
    hr.read_int("qk", c.head_dim.qk);
    hr.read_int("v", c.head_dim.v);
    hr.read_int("rope", c.head_dim.rope);
    hr.check_unknown();
  }
  r.read_int("group", c.group);
  r.read_enum("mask", kMasks, c.mask);
  if (const json* k = r.object("kv_layout")) {
    ObjectReader kr(*k, "kv_layout", issues);
    kr.read_bool("paged", c.kv_layout.paged);
    kr.read_int("page_size", c.kv_layout.page_size);
    kr.read_bool("shared_kv", c.kv_layout.shared_kv);
    kr.check_unknown();
  }
  r.read_bool("varlen", c.varlen);
  if (const json* s = r.object("scales")) {
    ObjectReader sr(*s, "scales", issues);
    sr.read_enum("q", kScales, c.scales.q);
    sr.read_enum("k", kScales, c.scales.k);
    sr.read_enum("v", kScales, c.scales.v);
    sr.read_enum("token_layout", kScaleLayouts, c.scales.token_layout);
    sr.read_int("k_block", c.scales.k_block);
    sr.check_unknown();
  }
  if (const json* o = r.object("outputs")) {
    ObjectReader orr(*o, "outputs", issues);
    orr.read_bool("lse", c.lse);
    orr.check_unknown();
  }
  if (const json* t = r.object("tuning")) parse_tuning(*t, issues, c.tuning);
  r.check_unknown();

  if (!issues.empty()) throw ConfigError(std::move(issues));
  return c;
}

json parse_config_json(const std::string& text, const std::string& origin) {
  try {
    return parse_user_json(text, kMaxConfigBytes, "a config");
  } catch (const JsonInputError& e) {  // too large, not JSON, too deep, a key repeated
    if (e.path().empty()) throw ConfigError({{"", origin, e.rule()}});
    throw ConfigError({{e.path(), "", e.rule()}});
  }
}

Config parse_config_text(const std::string& text, const std::string& origin) {
  return parse_config(parse_config_json(text, origin));
}

std::string read_config_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ConfigError({{"", path, "cannot open config file"}});
  std::string text;
  if (!read_at_most(f, kMaxConfigBytes, text)) throw ConfigError({{"", path, "read error"}});
  return text;
}

Config load_config_file(const std::string& path) { return parse_config_text(read_config_file(path), path); }

// ---- serialisation ----------------------------------------------------------------------------

namespace {
template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
template <class E>
json opt_enum(const std::optional<E>& v) {
  return v ? json(to_string(*v)) : json(nullptr);
}
}  // namespace

json to_json(const Config& c) {
  json t = json::object();
  const Tuning& tu = c.tuning;
  // Only set tuning fields are written: an unresolved config round-trips unchanged.
  if (tu.family) t["family"] = to_string(*tu.family);
  if (tu.BM) t["BM"] = *tu.BM;
  if (tu.BN) t["BN"] = *tu.BN;
  if (tu.num_kv_stages) t["num_kv_stages"] = *tu.num_kv_stages;
  if (tu.num_qk_stages) t["num_qk_stages"] = *tu.num_qk_stages;
  if (tu.num_pv_stages) t["num_pv_stages"] = *tu.num_pv_stages;
  if (tu.swizzle) t["swizzle"] = *tu.swizzle;
  if (tu.pair_cta) t["pair_cta"] = *tu.pair_cta;
  if (tu.splitk_partitions) t["splitk_partitions"] = *tu.splitk_partitions;
  if (tu.scheduler) t["scheduler"] = to_string(*tu.scheduler);
  if (tu.consumer_warpgroups) t["consumer_warpgroups"] = *tu.consumer_warpgroups;
  if (tu.num_warps) t["num_warps"] = *tu.num_warps;
  if (tu.kv_loads) t["kv_loads"] = to_string(*tu.kv_loads);
  if (tu.exp2_fma_every) t["exp2_fma_every"] = *tu.exp2_fma_every;
  if (tu.lazy_rescale) t["lazy_rescale"] = *tu.lazy_rescale;
  if (tu.swap_qk) t["swap_qk"] = *tu.swap_qk;  // false too: "auto" may swap where it is unset
  if (tu.seqlen_hint) t["seqlen_hint"] = *tu.seqlen_hint;
  if (tu.max_seqlen_q) t["max_seqlen_q"] = *tu.max_seqlen_q;

  // shared_kv only when set, so the canonical form (and the cache key) of every other config
  // stays what it was.
  json kv_layout = {{"paged", c.kv_layout.paged}, {"page_size", c.kv_layout.page_size}};
  if (c.kv_layout.shared_kv) kv_layout["shared_kv"] = true;
  json dtype = {{"qkv", to_string(c.dtype.qkv)},
                {"out", to_string(c.dtype.out)},
                {"rope", opt_enum(c.dtype.rope)},
                {"scale", opt_enum(c.dtype.scale)}};
  if (c.dtype.q) dtype["q"] = to_string(*c.dtype.q);  // only where set: other configs keep their keys
  json scales = {{"q", to_string(c.scales.q)}, {"k", to_string(c.scales.k)}, {"v", to_string(c.scales.v)}};
  if (c.scales.token_layout != ScaleLayout::positions) scales["token_layout"] = to_string(c.scales.token_layout);
  if (c.scales.k_block != 0) scales["k_block"] = c.scales.k_block;
  return json{
      {"schema", kConfigSchema},
      {"arch", c.arch},
      {"dtype", dtype},
      {"head_dim", {{"qk", c.head_dim.qk}, {"v", c.head_dim.v}, {"rope", c.head_dim.rope}}},
      {"group", c.group},
      {"mask", to_string(c.mask)},
      {"kv_layout", kv_layout},
      {"varlen", c.varlen},
      {"scales", scales},
      {"outputs", {{"lse", c.lse}}},
      {"tuning", t},
  };
}

std::size_t ConfigHash::operator()(const Config& c) const {
  std::size_t h = std::hash<std::string>()(c.arch);
  auto mix = [&h](long long v) { h ^= std::hash<long long>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  const Tuning& t = c.tuning;
  for (long long v : {(long long)c.dtype.qkv, (long long)c.dtype.out, (long long)c.dtype.q.value_or(c.dtype.qkv), (long long)c.scales.token_layout,
                      (long long)c.scales.k_block,
                      (long long)c.head_dim.qk,
                      (long long)c.head_dim.v, (long long)c.head_dim.rope, (long long)c.group,
                      (long long)c.mask, (long long)c.varlen, (long long)c.lse,
                      (long long)t.seqlen_hint.value_or(-1), (long long)t.max_seqlen_q.value_or(-1),
                      (long long)t.family.value_or(Family::automatic), (long long)t.BN.value_or(-1),
                      (long long)t.BM.value_or(-1)})
    mix(v);
  return h;
}

std::string canonical_json(const Config& c) {
  // nlohmann::json objects are std::map-backed: keys come out sorted, so dump() is canonical.
  return to_json(c).dump();
}

}  // namespace flashjit
