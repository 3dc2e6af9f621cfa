// Precompile manifests (schema "flashjit.manifest.v1"): which configs to build for which targets.
// docs/cli.md describes the format; in short:
//
//   {"schema": "flashjit.manifest.v1",
//    "archs": ["sm_80", "sm_90a"],                 // optional: replaces each config's arch
//    "reference": false,                           // optional: also the reference kernels
//    "configs": [{...config...}, "relative/path.json"],
//    "matrix": [{"base": {...} | "path.json",
//                "vary": {"head_dim.qk": [64, 128], "mask": ["none", "causal"]},
//                "exclude": [{"head_dim.qk": 256, "mask": "causal"}]}],
//    "exclude": [{"tuning.family": "sm90", "arch": ["sm_80", "sm_100a"]}]}
//
// A plan expands the manifest (configs in order, then each matrix, first vary key slowest) times
// the archs, resolves every kernel, drops duplicates (same resolved config and target) and
// records configs a family rejects as failures with the reason. Sources are generated only when
// an item is compiled. A manifest holds at most kMaxManifestItems configs, and its plan at most
// that many kernels, in all.
#pragma once

#include "generator/config.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace flashjit::cli {

inline constexpr const char* kManifestSchema = "flashjit.manifest.v1";
inline constexpr std::size_t kMaxManifestItems = 100000;

// An exclusion: dotted field paths and values (an array value: any of them). A config whose
// JSON (as written, defaults filled, arch set to the target) matches every pair is dropped.
using Exclusion = nlohmann::json;

struct ManifestConfig {
  Config config;
  std::string origin;  // "configs[1] (a.json)", "matrix[0] {head_dim.qk=64, mask=\"causal\"}"
  std::shared_ptr<const std::vector<Exclusion>> excludes;  // its matrix's (shared), or null
};

struct Manifest {
  std::vector<std::string> archs;
  bool reference = false;
  std::vector<ManifestConfig> configs;
  std::vector<Exclusion> excludes;  // top-level, for every config
};

// True when `config` (a config's JSON) matches one of `excludes`.
bool excluded(const nlohmann::json& config, const std::vector<Exclusion>& excludes);

// Throws UsageError listing every problem (unknown keys, bad types, unreadable files, configs
// that do not parse), each naming its place in the manifest.
Manifest parse_manifest(const std::string& text, const std::filesystem::path& base_dir, const std::string& origin);
Manifest load_manifest(const std::string& path);

// Sets a dotted path ("head_dim.qk") in a JSON object, creating intermediate objects; an object
// value is merged into an object already there. Returns an error text, empty on success (a path
// of more than kMaxJsonDepth parts is one).
std::string set_dotted(nlohmann::json& j, const std::string& path, const nlohmann::json& value);
// The value at a dotted path, or nullptr.
const nlohmann::json* get_dotted(const nlohmann::json& j, const std::string& path);

struct PlanItem {
  std::string name;     // readable kernel name
  std::string arch;
  bool reference = false;
  std::string origin;   // where in the manifest it came from
  std::string error;    // non-empty: rejected (a failure, never compiled)
  // What is compiled: the resolved config, or the reference's problem (reference_problem());
  // as written (arch set) when rejected. cli/build.hpp's source_for() generates its source.
  Config config;
};

struct Plan {
  std::vector<PlanItem> items;  // unique, in manifest order
  size_t expanded = 0;          // before dropping duplicates
  size_t duplicates = 0;
  size_t excluded = 0;          // dropped by an "exclude" entry
};

// `archs` (from --arch) replaces the manifest's archs when not empty; with neither, each config
// keeps its own arch. Throws UsageError when the plan would exceed kMaxManifestItems kernels.
Plan make_plan(const Manifest& m, const std::vector<std::string>& archs);

struct Shard {
  int index = 0;
  int count = 1;
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};
// "I/N" with 0 <= I < N; throws UsageError.
Shard parse_shard(const std::string& s);
// Items whose index (in the deduplicated plan) % count == index, in order.
std::vector<PlanItem> take_shard(const std::vector<PlanItem>& items, const Shard& shard);

}  // namespace flashjit::cli
