// Build step between the generator and the driver: a generated source becomes a cubin, taken
// from the disk cache when an identical build exists, compiled with NVRTC otherwise. Needs no GPU.
#pragma once

#include "cache/key.hpp"
#include "cache/store.hpp"
#include "generator/kernel_source.hpp"
#include "runtime/ptxas_report.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace flashjit {

const char* version();

struct Artifact {
  std::string name;
  std::string key;        // SHA-256 hex of everything that determines the binary
  LaunchInfo launch;
  nlohmann::json config;  // the resolved config
  std::string cubin;
  PtxasReport ptxas;
  double compile_ms = 0;  // NVRTC time of the build that produced the cubin
  bool compiled = false;  // this call compiled it (a cache miss)
  double load_ms = 0;     // time this call spent (key + cache lookup or compile)
};

// The key inputs: the flat source (every template included), the NVRTC identity, the compile
// options, the target arch, flashjit's version and the cache format version.
nlohmann::json key_inputs(const KernelSource& src);
cache::Key key_from_inputs(const nlohmann::json& inputs);
cache::Key artifact_key(const KernelSource& src);

// The process-wide store configured from the environment (FLASHJIT_CACHE_DIR, ...).
cache::DiskStore& default_store();

// get-or-compile through `store`: one compile across racing threads and processes.
Artifact build_artifact(const KernelSource& src, cache::DiskStore& store = default_store());

// The artifact a cache entry holds (throws std::runtime_error naming a missing field).
Artifact artifact_from_entry(const cache::Entry& entry);

}  // namespace flashjit
