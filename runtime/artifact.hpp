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
  std::string cache_file;       // the entry's file: where it was found or stored; empty: not stored
  bool cache_read_only = false;  // cache_file lies in a read-only layer
  std::string store_error;      // compiled but not stored: why (the path and the system's reason)
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

// "" when a manifest holds every field build_artifact() writes, with the right types and ranges
// (and, unless key_hex is empty, that key); else the first field that does not.
std::string artifact_manifest_problem(const nlohmann::json& manifest, const std::string& key_hex);
// That check as the cache calls it: an entry it rejects is a miss that is rebuilt.
cache::EntryCheck artifact_entry_check();

// The artifact a cache entry holds (throws std::runtime_error naming a bad or missing field).
Artifact artifact_from_entry(const cache::Entry& entry);

}  // namespace flashjit
