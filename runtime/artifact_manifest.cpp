// The manifest of a kernel's cache entry, checked field by field before anything reads it: a
// manifest that lacks a field or holds one of the wrong type or range is a bad entry (a miss
// that is rebuilt), never an exception from deep inside a lookup.
#include "runtime/artifact.hpp"

#include <climits>
#include <stdexcept>

namespace flashjit {

namespace {

using nlohmann::json;

enum class Kind { string, object, boolean, number, strings };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::string: return "a string";
    case Kind::object: return "an object";
    case Kind::boolean: return "true or false";
    case Kind::number: return "a number";
    case Kind::strings: return "an array of strings";
  }
  return "";
}

bool is_kind(const json& v, Kind k) {
  switch (k) {
    case Kind::string: return v.is_string();
    case Kind::object: return v.is_object();
    case Kind::boolean: return v.is_boolean();
    case Kind::number: return v.is_number();
    case Kind::strings:
      if (!v.is_array()) return false;
      for (const auto& s : v)
        if (!s.is_string()) return false;
      return true;
  }
  return false;
}

// Collects the first problem; later checks are no-ops once one is found.
class Check {
 public:
  bool ok() const { return problem_.empty(); }
  const std::string& problem() const { return problem_; }

  // The field, or nullptr (and a problem) when it is missing or of the wrong kind.
  const json* field(const json& parent, const std::string& where, const char* key, Kind kind) {
    if (!ok()) return nullptr;
    const auto it = parent.find(key);
    if (it == parent.end()) return fail(where + key + " is missing");
    if (!is_kind(*it, kind)) return fail(where + key + " is not " + kind_name(kind));
    return &*it;
  }

  void integer(const json& parent, const std::string& where, const char* key, long long lo, long long hi) {
    if (!ok()) return;
    const auto it = parent.find(key);
    if (it == parent.end()) {
      fail(where + key + " is missing");
      return;
    }
    bool in_range = false;
    if (it->is_number_unsigned()) {  // how the parser stores every integer >= 0
      const auto v = it->get<unsigned long long>();
      in_range = (lo <= 0 || v >= static_cast<unsigned long long>(lo)) && v <= static_cast<unsigned long long>(hi);
    } else if (it->is_number_integer()) {
      const auto v = it->get<long long>();
      in_range = v >= lo && v <= hi;
    }
    if (!in_range)
      fail(where + key + " is not an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  }

 private:
  const json* fail(std::string p) {
    problem_ = "manifest field " + std::move(p);
    return nullptr;
  }
  std::string problem_;
};

}  // namespace

std::string artifact_manifest_problem(const nlohmann::json& m, const std::string& key_hex) {
  if (!m.is_object()) return "the manifest is not a JSON object";
  Check c;
  const json* key = c.field(m, "", "key", Kind::string);
  if (key && !key_hex.empty() && key->get<std::string>() != key_hex)
    return "the manifest's key is not the entry's key " + key_hex.substr(0, 16) + "...";
  c.field(m, "", "name", Kind::string);
  c.field(m, "", "config", Kind::object);
  c.field(m, "", "compile_ms", Kind::number);
  if (const json* l = c.field(m, "", "launch", Kind::object)) {
    c.field(*l, "launch.", "family", Kind::string);
    c.field(*l, "launch.", "entry", Kind::string);
    c.integer(*l, "launch.", "threads", 1, 1024);
    for (const char* k : {"smem_bytes", "block_m", "block_n"}) c.integer(*l, "launch.", k, 0, INT_MAX);
    c.integer(*l, "launch.", "cluster_m", 1, INT_MAX);
    for (const char* k : {"persistent", "tile_counter", "uses_tma", "tma_store_o"}) c.field(*l, "launch.", k, Kind::boolean);
    c.integer(*l, "launch.", "lpt_l2_bytes", 0, LLONG_MAX);
    // Further kernels of an operation: written only when there are some.
    if (c.ok() && l->contains("passes")) {
      const json& passes = l->at("passes");
      if (!passes.is_array()) return "manifest field launch.passes is not an array";
      for (std::size_t i = 0; i < passes.size() && c.ok(); ++i) {
        const std::string where = "launch.passes[" + std::to_string(i) + "].";
        if (!passes[i].is_object()) return "manifest field " + where.substr(0, where.size() - 1) + " is not an object";
        c.field(passes[i], where, "role", Kind::string);
        c.field(passes[i], where, "entry", Kind::string);
        c.integer(passes[i], where, "threads", 1, 1024);
        c.integer(passes[i], where, "smem_bytes", 0, INT_MAX);
      }
    }
  }
  if (const json* p = c.field(m, "", "ptxas", Kind::object)) {
    for (const char* k : {"registers", "spill_stores", "spill_loads", "stack_frame", "static_smem", "barriers"})
      c.integer(*p, "ptxas.", k, 0, INT_MAX);
    c.field(*p, "ptxas.", "advisories", Kind::strings);
  }
  return c.problem();
}

cache::EntryCheck artifact_entry_check() {
  return [](const std::string& key_hex, const nlohmann::json& manifest) {
    return artifact_manifest_problem(manifest, key_hex);
  };
}

Artifact artifact_from_entry(const cache::Entry& e) {
  const auto& m = e.manifest;
  if (const std::string problem = artifact_manifest_problem(m, ""); !problem.empty())
    throw std::runtime_error("not a kernel's cache entry: " + problem);
  Artifact a;
  a.name = m.at("name").get<std::string>();
  a.key = m.at("key").get<std::string>();
  a.launch = launch_info_from_json(m.at("launch"));
  a.config = m.at("config");
  a.ptxas = ptxas_report_from_json(m.at("ptxas"));
  a.compile_ms = m.at("compile_ms").get<double>();
  a.cubin = e.binary;
  return a;
}

}  // namespace flashjit
