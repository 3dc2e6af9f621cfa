// flashjit_jit_latency: what the JIT costs a user.
//   (a) cold compile: each example config for each target arch, every run into a fresh empty
//       cache directory (a real NVRTC compile); no GPU needed.
//   (b) cache hit in a fresh process: this program runs itself against a warm cache directory and
//       the child reports parse / generate / key / disk read+verify / (GPU) module load, and the
//       first get_kernel() (GPU) or build() (no GPU) of the process as a whole.
//   (c) in-memory hit: get_kernel() in a loop (GPU), or the build() disk-hit path (no GPU).
//   (d) host launch overhead (GPU): Kernel::launch() wall time without and with a sync.
// Exit status: 0 ok; 1 something failed (recorded in the report); 2 usage; 4 a step ran past
// --step-timeout (the process ends there; the JSON holds what came before).
#include "bench/args.hpp"
#include "bench/env_info.hpp"
#include "bench/jit_steps.hpp"
#include "bench/json_report.hpp"
#include "bench/stats.hpp"
#include "bench/watchdog.hpp"
#include "cache/log.hpp"
#include "cache/store.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/artifact.hpp"
#include "runtime/device.hpp"
#include "runtime/driver.hpp"
#include "runtime/flashjit.hpp"
#include "runtime/harness.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

using namespace flashjit;
using namespace flashjit::bench;
using json = nlohmann::json;
namespace fs = std::filesystem;

#ifndef FLASHJIT_EXAMPLE_CONFIGS
#define FLASHJIT_EXAMPLE_CONFIGS "examples/configs"
#endif

namespace {

const char* kUsage = R"(usage: flashjit_jit_latency [options]
  --configs DIR|F1,F2   config files (default: every *.json in the source tree's examples/configs)
  --archs A,B           cold-compile targets (default sm_80,sm_90a,sm_100a)
  --runs N              cold compiles per config and arch (default 3)
  --hit-runs N          fresh processes per config for the cache-hit measurement (default 5)
  --hit-arch A          arch of the hit measurements (default: the GPU's, else sm_90a)
  --mem-iters N         in-memory hit loop length (default 20000 with a GPU, 50 without)
  --launch-iters N      launches per batch for the launch overhead (default 100; 20 batches)
  --skip-cold           skip (a)
  --step-timeout S      end the run when one step takes longer (default 300; 0: never)
  --json FILE           the report
)";

using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

// A fresh directory under $TMPDIR, removed by the destructor.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    std::string tmpl = (fs::temp_directory_path() / ("flashjit-" + tag + "-XXXXXX")).string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

cache::DiskStore store_at(const fs::path& dir) {
  cache::StoreOptions o;
  o.dir = dir;
  return cache::DiskStore(o);
}

std::vector<std::string> config_files(const Args& a) {
  std::vector<std::string> files;
  const std::string spec = a.get_or("configs", FLASHJIT_EXAMPLE_CONFIGS);
  if (fs::is_directory(spec)) {
    for (const auto& e : fs::directory_iterator(spec))
      if (e.path().extension() == ".json") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
  } else {
    files = split(spec, ',');
  }
  if (files.empty()) throw UsageError("no config files in " + spec);
  for (const auto& f : files)
    if (!fs::is_regular_file(f)) throw UsageError("not a file: " + f);
  return files;
}

std::string base(const std::string& path) { return fs::path(path).filename().string(); }

// ---- (a) cold compiles -------------------------------------------------------------------------

// A config that does not build for an arch by design (e.g. one that pins the sm90 family, on
// sm_80) is recorded as skipped, not failed.
// The config of `file` for `arch`, or nothing after recording in `r` why it was skipped.
std::optional<Config> config_for(const std::string& file, const std::string& arch, json& r) {
  Config c = load_config_file(file);
  c.arch = arch;
  auto issues = check_config(c);
  if (issues.empty()) return c;
  std::string why;
  for (const auto& i : issues) why += (why.empty() ? "" : "; ") + i.message();
  r["skipped"] = why;
  return std::nullopt;
}

// `warm`, when set, receives the entry of the last run (the hit measurements start from it).
json cold_compile(const std::string& file, const std::string& arch, int runs, const fs::path* warm) {
  json r = {{"config", base(file)}, {"arch", arch}, {"runs", runs}};
  try {
    const std::optional<Config> loaded = config_for(file, arch, r);
    if (!loaded) return r;
    const Config& c = *loaded;
    std::vector<double> gen, build, nvrtc;
    Artifact last;
    for (int i = 0; i < runs; ++i) {
      auto t = clock_type::now();
      KernelSource src = generate(resolve(c));
      gen.push_back(ms_since(t));
      TempDir dir("cold");
      cache::DiskStore store = store_at(dir.path);
      t = clock_type::now();
      last = build_artifact(src, store);
      build.push_back(ms_since(t));
      nvrtc.push_back(last.compile_ms);
      if (!last.compiled) throw std::runtime_error("expected a compile, got a cache hit");
      if (warm && i + 1 == runs) store_at(*warm).import_from(dir.path);
    }
    r["kernel"] = last.name;
    r["generate_ms"] = to_json(summarize(gen));
    r["compile_ms"] = to_json(summarize(nvrtc));
    r["build_ms"] = to_json(summarize(build));
    r["cubin_bytes"] = last.cubin.size();
    r["registers"] = last.ptxas.registers;
    r["spill_stores"] = last.ptxas.spill_stores;
    r["smem_bytes"] = last.launch.smem_bytes;
  } catch (const std::exception& e) {
    r["error"] = e.what();
  }
  return r;
}

// ---- (b) cache hit in a fresh process ------------------------------------------------------------

json child_json(const ChildRun& run) {
  if (run.exit_status != 0)
    throw std::runtime_error("child exited with status " + std::to_string(run.exit_status));
  std::string text = run.stdout_text;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  auto nl = text.rfind('\n');
  return json::parse(nl == std::string::npos ? text : text.substr(nl + 1));
}

json fresh_process_hit(const std::string& file, const std::string& arch, bool gpu, int runs,
                       const fs::path& warm) {
  json r = {{"config", base(file)}, {"arch", arch}, {"runs", runs}};
  try {
    {  // warm the directory (a hit when the cold runs left the entry there)
      const std::optional<Config> loaded = config_for(file, arch, r);
      if (!loaded) return r;
      const Config& c = *loaded;
      cache::DiskStore store = store_at(warm);
      r["kernel"] = build_artifact(generate(resolve(c)), store).name;
    }
    const std::vector<std::pair<std::string, std::string>> env = {
        {"FLASHJIT_CACHE_DIR", warm.string()}, {"FLASHJIT_LOG_LEVEL", "warn"}};
    const std::vector<std::string> unset = {"FLASHJIT_CACHE_PATH", "FLASHJIT_OFFLINE"};
    std::map<std::string, std::vector<double>> steps;
    std::vector<double> wall_steps, wall_first;
    for (int i = 0; i < runs; ++i) {
      ChildRun s = spawn_self({"--child", "steps", "--config", file, "--arch", arch, "--gpu", gpu ? "1" : "0"},
                              env, unset);
      json sj = child_json(s);
      for (const auto& [k, v] : sj.items())
        if (k.size() > 3 && k.substr(k.size() - 3) == "_ms") steps[k].push_back(v.get<double>());
      wall_steps.push_back(s.wall_ms);
      ChildRun f = spawn_self({"--child", "first", "--config", file, "--arch", arch, "--gpu", gpu ? "1" : "0"},
                              env, unset);
      json fj = child_json(f);
      if (fj.value("compiled", false)) throw std::runtime_error("the fresh process compiled: not a hit");
      for (const auto& [k, v] : fj.items())
        if (k == "first_call_ms") steps["first_call_ms"].push_back(v.get<double>());
      r["first_call"] = fj.value("what", "");
      wall_first.push_back(f.wall_ms);
    }
    json sj = json::object();
    for (const auto& [k, v] : steps) sj[k] = to_json(summarize(v));
    r["steps"] = sj;
    r["process_wall_ms"] = to_json(summarize(wall_first));
  } catch (const std::exception& e) {
    r["error"] = e.what();
  }
  return r;
}

// ---- (c) in-memory hit ---------------------------------------------------------------------------

json memory_hit(const std::string& file, const std::string& arch, bool gpu, int iters,
                const fs::path& warm) {
  json r = {{"config", base(file)}, {"arch", arch}, {"iters", iters}};
  try {
    const std::optional<Config> loaded = config_for(file, arch, r);
    if (!loaded) return r;
    const Config& c = *loaded;
    std::vector<double> per_call_us;
    if (gpu) {
      r["what"] = "get_kernel (in-memory table)";
      auto k = get_kernel(c);  // first call: compile or disk hit, not timed
      const int batches = 10, per = std::max(1, iters / batches);
      for (int b = 0; b < batches; ++b) {
        auto t = clock_type::now();
        for (int i = 0; i < per; ++i) k = get_kernel(c);
        per_call_us.push_back(ms_since(t) * 1000.0 / per);
      }
    } else {
      r["what"] = "build (disk hit in this process: generate + key + read + verify)";
      cache::DiskStore store = store_at(warm);
      build_artifact(generate(resolve(c)), store);
      for (int i = 0; i < iters; ++i) {
        auto t = clock_type::now();
        Artifact a = build_artifact(generate(resolve(c)), store);
        per_call_us.push_back(ms_since(t) * 1000.0);
        if (a.compiled) throw std::runtime_error("compiled in the hit loop");
      }
    }
    r["per_call_us"] = to_json(summarize(per_call_us));
  } catch (const std::exception& e) {
    r["error"] = e.what();
  }
  return r;
}

// ---- (d) launch overhead -------------------------------------------------------------------------

json launch_overhead(const std::string& file, const std::string& arch, int per_batch) {
  json r = {{"config", base(file)}, {"arch", arch}};
  try {
    const std::optional<Config> loaded = config_for(file, arch, r);
    if (!loaded) return r;
    const Config& c = *loaded;
    auto k = get_kernel(c);
    ProblemShape s;
    s.batch = 1;
    // A decode config's kernels take at most its tuning.max_seqlen_q query tokens per sequence.
    s.seqlen_q = std::min(256, c.tuning.max_seqlen_q.value_or(256));
    s.seqlen_k = 256;
    s.heads_k = 4;
    s.heads_q = 4 * c.group;
    if (c.varlen) {
      s.seqlens_q = {s.seqlen_q};
      s.seqlens_k = {s.seqlen_k};
    }
    DeviceProblem p(c, s, 12345);
    const AttentionArgs args = p.args();
    const DriverApi& d = driver();
    CUstream stream = nullptr;  // the legacy default stream, as torch's default
    for (int i = 0; i < 50; ++i) k->launch(args, stream);
    FLASHJIT_CU(d.cuStreamSynchronize(stream));
    // Batches stay far below the launch queue depth, so launch() never waits for the GPU.
    std::vector<double> launch_us, sync_us;
    for (int b = 0; b < 20; ++b) {
      auto t = clock_type::now();
      for (int i = 0; i < per_batch; ++i) k->launch(args, stream);
      launch_us.push_back(ms_since(t) * 1000.0 / per_batch);
      FLASHJIT_CU(d.cuStreamSynchronize(stream));
    }
    for (int i = 0; i < 200; ++i) {
      auto t = clock_type::now();
      k->launch(args, stream);
      FLASHJIT_CU(d.cuStreamSynchronize(stream));
      sync_us.push_back(ms_since(t) * 1000.0);
    }
    r["kernel"] = k->name();
    r["uses_tma"] = k->launch_info().uses_tma;
    r["shape"] = s.describe();
    r["launch_us"] = to_json(summarize(launch_us));
    r["launch_sync_us"] = to_json(summarize(sync_us));
    r["batch"] = per_batch;
  } catch (const std::exception& e) {
    r["error"] = e.what();
  }
  return r;
}

// ---- output --------------------------------------------------------------------------------------

std::string fmt(const json& summary, const char* field = "median") {
  if (!summary.is_object() || !summary.contains(field)) return "-";
  const double v = summary[field].get<double>();
  char b[32];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.3g", v);
  return b;
}

// A progress line's verdict for one record.
std::string status(const json& r, const char* field) {
  if (r.contains("skipped")) return "skipped: " + r["skipped"].get<std::string>().substr(0, 200);
  if (r.contains("error")) return "ERROR " + r["error"].get<std::string>().substr(0, 300);
  if (std::string(field) == "steps") return fmt(r["steps"]["first_call_ms"]) + " ms first call";
  return fmt(r[field]) + " ms (nvrtc " + fmt(r["compile_ms"]) + " ms)";
}

std::string problem(const json& r) {
  if (r.contains("skipped")) return "skipped: " + r["skipped"].get<std::string>().substr(0, 160);
  if (r.contains("error")) return "ERROR: " + r["error"].get<std::string>().substr(0, 200);
  return "";
}

void print_table(const json& report) {
  auto head = [](const json& r) {
    std::printf("%-28s %-8s", r["config"].get<std::string>().c_str(), r["arch"].get<std::string>().c_str());
  };
  std::printf("\n(a) cold compile (fresh cache dir per run), ms: generate, NVRTC, whole miss (median / max)\n");
  for (const auto& r : report["cold"]) {
    head(r);
    if (!problem(r).empty()) {
      std::printf(" %s\n", problem(r).c_str());
      continue;
    }
    std::printf(" %8s %8s %8s/%-8s %s\n", fmt(r["generate_ms"]).c_str(), fmt(r["compile_ms"]).c_str(),
                fmt(r["build_ms"]).c_str(), fmt(r["build_ms"], "max").c_str(),
                r["kernel"].get<std::string>().c_str());
  }
  std::printf("\n(b) cache hit in a fresh process, ms (median)\n");
  for (const auto& r : report["disk_hit"]) {
    head(r);
    if (!problem(r).empty()) {
      std::printf(" %s\n", problem(r).c_str());
      continue;
    }
    for (const auto& [k, v] : r["steps"].items())
      std::printf(" %s=%s", k.substr(0, k.size() - 3).c_str(), fmt(v).c_str());
    std::printf("\n");
  }
  std::printf("\n(c) in-memory hit, us per call (median)\n");
  for (const auto& r : report["memory_hit"]) {
    head(r);
    std::printf(" %s\n", problem(r).empty() ? (fmt(r["per_call_us"]) + "  " + r.value("what", "")).c_str()
                                             : problem(r).c_str());
  }
  if (!report["launch"].empty()) {
    std::printf("\n(d) host launch overhead, us (median): launch() / launch()+sync\n");
    for (const auto& r : report["launch"]) {
      head(r);
      std::printf(" %s\n", problem(r).empty()
                               ? (fmt(r["launch_us"]) + " / " + fmt(r["launch_sync_us"])).c_str()
                               : problem(r).c_str());
    }
  }
}

int child_main(const Args& a) {
  const std::string mode = a.get_or("child", "");
  const std::string file = a.get_or("config", "");
  const std::string arch = a.get_or("arch", "");
  const bool gpu = a.get_or("gpu", "0") == "1";
  json j = mode == "steps" ? measure_hit_steps(file, arch, gpu) : measure_hit_first_call(file, arch, gpu);
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a(argc, argv,
           {"configs", "archs", "runs", "hit-runs", "hit-arch", "mem-iters", "launch-iters", "json",
            "child", "config", "arch", "gpu", "step-timeout"},
           {"skip-cold", "help"});
    if (a.flag("help")) {
      std::cout << kUsage;
      return 0;
    }
    if (a.has("child")) return child_main(a);

    const auto files = config_files(a);
    std::vector<std::string> archs = a.list("archs");
    if (archs.empty()) archs = {"sm_80", "sm_90a", "sm_100a"};
    const int runs = std::max(1, a.get_int("runs", 3));
    const int hit_runs = std::max(1, a.get_int("hit-runs", 5));
    const bool gpu = gpu_available();
    std::string hit_arch = a.get_or("hit-arch", "");
    if (hit_arch.empty()) hit_arch = gpu ? current_device().arch() : "sm_90a";
    const int mem_iters = std::max(1, a.get_int("mem-iters", gpu ? 20000 : 50));
    const int launch_iters = std::max(1, a.get_int("launch-iters", 100));

    json report = {{"schema", "flashjit.jit_latency.v1"},
                   {"tool", "flashjit_jit_latency"},
                   {"host", host_info()},
                   {"build", build_info()},
                   {"gpu", gpu ? gpu_info() : json(nullptr)},
                   {"gpu_unavailable_reason", gpu ? "" : gpu_unavailable_reason()},
                   {"cold", json::array()},
                   {"disk_hit", json::array()},
                   {"memory_hit", json::array()},
                   {"launch", json::array()}};
    const std::string json_path = a.get_or("json", "");
    auto save = [&] {
      if (!json_path.empty()) write_json_file(json_path, report);
    };
    if (!gpu) std::cerr << "flashjit_jit_latency: no GPU (" << gpu_unavailable_reason()
                        << "): module loads, get_kernel and launches are skipped\n";

    TempDir warm("warm");
    set_log_level(LogLevel::warn);  // this program prints its own progress
    if (!a.flag("skip-cold")) {
      for (const auto& f : files)
        for (const auto& arch : archs) {
          json r = cold_compile(f, arch, runs, arch == hit_arch ? &warm.path : nullptr);
          std::cerr << "cold   " << base(f) << " " << arch << ": " << status(r, "build_ms") << "\n";
          report["cold"].push_back(r);
          save();
        }
    }
    Watchdog watchdog("flashjit_jit_latency", a.get_double("step-timeout", 300), 4);
    for (const auto& f : files) {
      watchdog.arm("cache hits and launches of " + base(f));
      json r = fresh_process_hit(f, hit_arch, gpu, hit_runs, warm.path);
      std::cerr << "hit    " << base(f) << " " << hit_arch << ": " << status(r, "steps") << "\n";
      report["disk_hit"].push_back(r);
      report["memory_hit"].push_back(memory_hit(f, hit_arch, gpu, mem_iters, warm.path));
      if (gpu) report["launch"].push_back(launch_overhead(f, hit_arch, launch_iters));
      watchdog.disarm();
      save();
    }
    print_table(report);
    if (!json_path.empty()) std::cerr << "flashjit_jit_latency: wrote " << json_path << "\n";
    bool failed = false;
    for (const char* part : {"cold", "disk_hit", "memory_hit", "launch"})
      for (const auto& r : report[part]) failed |= r.contains("error");
    return failed ? 1 : 0;
  } catch (const UsageError& e) {
    std::cerr << "flashjit_jit_latency: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "flashjit_jit_latency: " << e.what() << "\n";
    return 1;
  }
}
