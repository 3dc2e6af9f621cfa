// Compiles (or finds in the cache) every distinct kernel of a benchmark run before timing starts,
// on several threads, so the timed loop never waits on NVRTC and a 16-core machine builds the
// grid's kernels at once. Needs no GPU: the arch is named.
#pragma once

#include "generator/config.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace flashjit::bench {

struct PrebuildOptions {
  int jobs = 0;             // threads; 0: the CPU count
  bool references = false;  // also the fp32 reference kernels (for --check)
};

struct BuildOutcome {
  std::string kernel;      // readable name
  bool compiled = false;   // a cache miss: NVRTC ran
  double compile_ms = 0;   // NVRTC time recorded in the entry
  double wall_ms = 0;      // generate + key + lookup/compile, on a busy machine
  std::string error;       // empty on success
  std::string reference_error;
  nlohmann::json to_json() const;
};

// Identifies a config for one device arch ("native" replaced by `arch`).
std::string prebuild_key(const Config& config, const std::string& arch);

// Builds through the default store (FLASHJIT_CACHE_DIR ...), as get_kernel would. Never throws
// for a config's failure: the outcome holds the error. Progress goes to `log` (may be null).
std::map<std::string, BuildOutcome> prebuild(const std::vector<Config>& configs, const std::string& arch,
                                             const PrebuildOptions& options, std::ostream* log);

}  // namespace flashjit::bench
