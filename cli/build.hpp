// The build step shared by `compile` and `precompile`: config -> source -> artifact through the
// cache, and how an artifact is described (text and JSON).
#pragma once

#include "cache/store.hpp"
#include "generator/config.hpp"
#include "generator/kernel_source.hpp"
#include "runtime/artifact.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace flashjit::cli {

// The fast kernel's source (config resolved first) or the reference kernel's.
KernelSource source_for(const Config& c, bool reference);

// "compiled in 812 ms" / "cache hit (compiled in 812 ms when built)".
std::string status_text(const Artifact& a);

// Machine-readable description: name, arch, key, file (null and store_error when it could not
// be stored), status, timings, ptxas report, launch.
nlohmann::json artifact_json(const Artifact& a);

// Multi-line human description, each line indented by `indent`.
std::string artifact_text(const Artifact& a, const std::string& indent);

}  // namespace flashjit::cli
