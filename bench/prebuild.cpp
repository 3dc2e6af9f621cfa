#include "bench/prebuild.hpp"

#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/artifact.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace flashjit::bench {

nlohmann::json BuildOutcome::to_json() const {
  nlohmann::json j = {{"kernel", kernel},
                      {"compiled", compiled},
                      {"compile_ms", compile_ms},
                      {"prebuild_wall_ms", wall_ms}};
  if (!error.empty()) j["error"] = error;
  if (!reference_error.empty()) j["reference_error"] = reference_error;
  return j;
}

namespace {

Config for_arch(Config c, const std::string& arch) {
  if (c.arch == "native") c.arch = arch;
  return c;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

std::string prebuild_key(const Config& config, const std::string& arch) {
  return canonical_json(for_arch(config, arch));
}

std::map<std::string, BuildOutcome> prebuild(const std::vector<Config>& configs, const std::string& arch,
                                             const PrebuildOptions& options, std::ostream* log) {
  struct Job {
    std::string key;  // outcome it reports to
    Config config;
    bool reference;
  };
  std::map<std::string, BuildOutcome> out;
  std::vector<Job> jobs;
  std::map<std::string, bool> seen_ref;
  for (const Config& c0 : configs) {
    Config c = for_arch(c0, arch);
    const std::string key = canonical_json(c);
    if (out.count(key)) continue;
    out[key] = BuildOutcome{};
    jobs.push_back({key, c, false});
    if (options.references) {
      Config p = c;
      p.tuning = Tuning{};
      if (!seen_ref[canonical_json(p)]) {
        seen_ref[canonical_json(p)] = true;
        jobs.push_back({key, c, true});
      }
    }
  }
  if (jobs.empty()) return out;
  int threads = options.jobs > 0 ? options.jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<int>(threads, int(jobs.size()));
  if (log)
    *log << "prebuild: " << jobs.size() << " kernels for " << arch << " on " << threads << " threads\n";

  std::mutex mutex;
  std::atomic<size_t> next{0};
  const auto start = std::chrono::steady_clock::now();
  auto worker = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      const Job& job = jobs[i];
      const auto t0 = std::chrono::steady_clock::now();
      std::string error, name;
      bool compiled = false;
      double compile_ms = 0;
      try {
        KernelSource src = job.reference ? generate_reference(job.config) : generate(resolve(job.config));
        name = src.name;
        Artifact a = build_artifact(src);
        compiled = a.compiled;
        compile_ms = a.compile_ms;
      } catch (const std::exception& e) {
        error = e.what();
      }
      const double wall = ms_since(t0);
      std::lock_guard<std::mutex> lock(mutex);
      BuildOutcome& o = out[job.key];
      if (job.reference) {
        o.reference_error = error;
      } else {
        o.kernel = name;
        o.compiled = compiled;
        o.compile_ms = compile_ms;
        o.wall_ms = wall;
        o.error = error;
      }
      if (log && !error.empty())
        *log << "prebuild: " << (job.reference ? "reference for " : "") << job.key << " failed: " << error
             << "\n";
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (log) {
    int compiled = 0, failed = 0;
    for (const auto& [k, o] : out) {
      compiled += o.compiled;
      failed += !o.error.empty();
    }
    *log << "prebuild: done in " << int(ms_since(start)) << " ms (" << compiled << " compiled, "
         << (out.size() - compiled - failed) << " cached, " << failed << " failed; references not counted)\n";
  }
  return out;
}

}  // namespace flashjit::bench
