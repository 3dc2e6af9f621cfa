#include "runtime/artifact.hpp"

#include "cache/log.hpp"
#include "runtime/compiler.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>

#ifndef FLASHJIT_VERSION
#define FLASHJIT_VERSION "0.0.0"
#endif

namespace flashjit {

const char* version() { return FLASHJIT_VERSION; }

namespace {

std::string join(const std::vector<std::string>& v, char sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : std::string(1, sep)) + x;
  return s;
}

std::string fmt_ms(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f ms", ms);
  return b;
}

}  // namespace

nlohmann::json key_inputs(const KernelSource& src) {
  const std::string source = compilation_source(src);
  auto options = compile_options(src);
  options.insert(options.end(), src.options.begin(), src.options.end());
  // The launch metadata is stored with the cubin and used as loaded, so it is part of the key: a
  // generator change that only moves launch values (grid rules, L2 budgets) must miss.
  return {{"source_sha256", cache::sha256_hex(source)},
          {"launch_sha256", cache::sha256_hex(to_json(src.launch).dump())},
          {"nvrtc", nvrtc_identity()},
          {"options", options},
          {"arch", src.arch},
          {"flashjit", version()},
          {"cache_format", cache::kFormatVersion}};
}

cache::Key key_from_inputs(const nlohmann::json& in) {
  cache::KeyBuilder b;
  b.add("source_sha256", in.at("source_sha256").get<std::string>())
      .add("launch_sha256", in.at("launch_sha256").get<std::string>())
      .add("nvrtc", in.at("nvrtc").get<std::string>())
      .add("options", join(in.at("options").get<std::vector<std::string>>(), '\n'))
      .add("arch", in.at("arch").get<std::string>())
      .add("flashjit", in.at("flashjit").get<std::string>())
      .add("cache_format", std::to_string(in.at("cache_format").get<unsigned>()));
  return b.finish();
}

cache::Key artifact_key(const KernelSource& src) { return key_from_inputs(key_inputs(src)); }

cache::DiskStore& default_store() {
  static cache::DiskStore* store = new cache::DiskStore(cache::StoreOptions::from_env());
  return *store;
}

Artifact build_artifact(const KernelSource& src, cache::DiskStore& store) {
  auto start = std::chrono::steady_clock::now();
  const cache::Key key = artifact_key(src);
  cache::Provenance where;
  cache::Entry entry;
  try {
    entry = store.get_or_create(key, src.name, [&] {
      log(LogLevel::info, "compiling " + src.name + " for " + src.arch + " (key " +
                              key.hex.substr(0, 12) + ")");
      CompiledKernel k = compile(src);
      log(LogLevel::info, "compiled " + src.name + " in " + fmt_ms(k.compile_ms) + ": " +
                              std::to_string(k.report.registers) + " registers, " +
                              std::to_string(k.report.spill_stores) + " bytes spilled");
      cache::Entry e;
      e.binary.assign(k.cubin.begin(), k.cubin.end());
      e.manifest = {{"name", src.name},
                    {"key", key.hex},
                    {"launch", to_json(src.launch)},
                    {"config", src.config},
                    {"ptxas", to_json(k.report)},
                    {"compile_ms", k.compile_ms},
                    {"compile_log", k.log},
                    {"key_inputs", key_inputs(src)},
                    {"created_unix", static_cast<long long>(std::time(nullptr))},
                    {"source", compilation_source(src)}};
      return e;
    }, artifact_entry_check(), &where);
  } catch (const cache::MissError& e) {
    throw cache::MissError(std::string(e.what()) + "\n  config: " + src.config.dump());
  }
  Artifact a = artifact_from_entry(entry);
  a.compiled = where.produced;
  a.cache_file = where.file.string();
  a.cache_read_only = where.read_only;
  a.store_error = where.store_error;
  a.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return a;
}

}  // namespace flashjit
