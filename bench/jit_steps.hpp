// The pieces of flashjit_jit_latency that run in a child process (a cache hit measured in a fresh
// process), and the spawning of that child.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace flashjit::bench {

// In the child: times each step of a disk-cache hit of `config_path` compiled for `arch`, against
// the store the environment names (FLASHJIT_CACHE_DIR): parse, resolve + generate, key, disk read
// + verify, decode, and (gpu) module load. With a GPU, context creation is timed apart first.
nlohmann::json measure_hit_steps(const std::string& config_path, const std::string& arch, bool gpu);

// In the child: the first get_kernel() of the process (gpu; context created first, timed apart),
// or the first build_artifact() through the default store (no GPU) -- the whole hit path at once.
nlohmann::json measure_hit_first_call(const std::string& config_path, const std::string& arch, bool gpu);

struct ChildRun {
  int exit_status = -1;     // the child's exit code, or -1 when it did not exit normally
  std::string stdout_text;  // its standard output
  double wall_ms = 0;       // spawn to exit, as the parent saw it
};

// Runs this executable again (/proc/self/exe) with `args`, with `set_env` added to (and
// `unset_env` removed from) the environment; stdout is captured, stderr passes through.
ChildRun spawn_self(const std::vector<std::string>& args,
                    const std::vector<std::pair<std::string, std::string>>& set_env,
                    const std::vector<std::string>& unset_env);

}  // namespace flashjit::bench
