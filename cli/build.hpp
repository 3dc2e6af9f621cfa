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

// Where the entry of `a` lives: the first read-only layer holding it, else the writable
// directory (empty when neither has the file, e.g. the directory is not writable).
std::filesystem::path cache_file_of(const cache::DiskStore& store, const Artifact& a, bool* read_only = nullptr);

// "compiled in 812 ms" / "cache hit (compiled in 812 ms when built)".
std::string status_text(const Artifact& a);

// Machine-readable description: name, arch, key, file, status, timings, ptxas report, launch.
nlohmann::json artifact_json(const Artifact& a, const std::filesystem::path& file);

// Multi-line human description, each line indented by `indent`.
std::string artifact_text(const Artifact& a, const std::filesystem::path& file, const std::string& indent);

}  // namespace flashjit::cli
