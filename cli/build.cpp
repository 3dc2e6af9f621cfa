#include "cli/build.hpp"

#include "cache/printable.hpp"
#include "cli/format.hpp"
#include "generator/generate.hpp"

namespace flashjit::cli {

namespace fs = std::filesystem;

KernelSource source_for(const Config& c, bool reference) {
  return reference ? generate_reference(c) : generate(c);
}

std::string status_text(const Artifact& a) {
  if (a.compiled) return "compiled in " + format_ms(a.compile_ms);
  return "cache hit (" + format_ms(a.load_ms) + "; compiled in " + format_ms(a.compile_ms) + " when built)";
}

nlohmann::json artifact_json(const Artifact& a) {
  nlohmann::json j;
  j["name"] = a.name;
  j["arch"] = a.config.value("arch", "");
  j["key"] = a.key;
  j["file"] = a.cache_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(cache::printable(a.cache_file));
  if (a.cache_read_only) j["read_only"] = true;
  if (!a.store_error.empty()) j["store_error"] = a.store_error;
  j["status"] = a.compiled ? "compiled" : "hit";
  j["compile_ms"] = a.compile_ms;
  j["load_ms"] = a.load_ms;
  j["family"] = a.launch.family;
  j["registers"] = a.ptxas.registers;
  j["spill_stores"] = a.ptxas.spill_stores;
  j["spill_loads"] = a.ptxas.spill_loads;
  j["stack_frame"] = a.ptxas.stack_frame;
  j["static_smem"] = a.ptxas.static_smem;
  j["dynamic_smem"] = a.launch.smem_bytes;
  j["threads"] = a.launch.threads;
  j["advisories"] = a.ptxas.advisories;
  j["cubin_bytes"] = a.cubin.size();
  return j;
}

std::string artifact_text(const Artifact& a, const std::string& in) {
  const LaunchInfo& l = a.launch;
  const PtxasReport& r = a.ptxas;
  std::string s;
  s += in + "status      " + status_text(a) + "\n";
  s += in + "key         " + a.key + "\n";
  const std::string file = a.cache_file.empty()  ? "(not stored: " + a.store_error + ")"
                           : a.cache_read_only ? cache::printable(a.cache_file) + " (read-only layer)"
                                               : cache::printable(a.cache_file);
  s += in + "cache file  " + file + "\n";
  std::string launch = l.family + ", " + std::to_string(l.threads) + " threads";
  if (l.block_m) launch += ", tile " + std::to_string(l.block_m) + "x" + std::to_string(l.block_n);
  if (l.cluster_m > 1) launch += ", clusters of " + std::to_string(l.cluster_m) + " CTAs sharing K/V";
  if (l.persistent) launch += l.tile_counter ? ", persistent (dynamic tiles)" : ", persistent";
  if (l.uses_tma) launch += l.tma_store_o ? ", TMA (O stored by TMA)" : ", TMA";
  s += in + "launch      " + launch + "\n";
  s += in + "registers   " + std::to_string(r.registers) + " per thread\n";
  s += in + "spills      " + std::to_string(r.spill_stores) + " B stored, " + std::to_string(r.spill_loads) +
       " B loaded (stack frame " + std::to_string(r.stack_frame) + " B)\n";
  s += in + "smem        " + std::to_string(l.smem_bytes) + " B dynamic + " + std::to_string(r.static_smem) +
       " B static\n";
  if (r.advisories.empty()) {
    s += in + "advisories  none\n";
  } else {
    s += in + "advisories  " + r.advisories.front() + "\n";
    for (size_t i = 1; i < r.advisories.size(); ++i) s += in + "            " + r.advisories[i] + "\n";
  }
  return s;
}

}  // namespace flashjit::cli
