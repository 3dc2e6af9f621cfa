// Helpers of the CLI suites (and of others that run programs): a scratch directory, in-process
// command runs with captured streams and a private cache, and programs such as the built
// `flashjit` binary run as subprocesses.
#pragma once

#include "cache/store.hpp"
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "generator/kernel_source.hpp"
#include "runtime/ptxas_report.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashjit::cli::test {

namespace fs = std::filesystem;

inline std::string source_dir() { return FLASHJIT_SOURCE_DIR; }
inline std::string example(const std::string& rel) { return source_dir() + "/examples/" + rel; }

class Scratch {
 public:
  Scratch() {
    std::string templ = (fs::path(::testing::TempDir()) / "flashjit-cli-XXXXXX").string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& s) const { return path_ / s; }
  // Writes `text` to a file in the scratch directory and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

 private:
  fs::path path_;
};

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A private cache for in-process runs.
inline std::unique_ptr<cache::DiskStore> private_store(const fs::path& dir) {
  cache::StoreOptions o;
  o.dir = dir;
  o.lock_timeout_s = 60;
  return std::make_unique<cache::DiskStore>(o);
}

// A cache entry shaped as build_artifact() writes it (every field the runtime checks), with a
// small fake binary.
inline cache::Entry kernel_entry(const std::string& name, const std::string& arch, const cache::Key& key) {
  LaunchInfo launch;
  launch.family = "sm80";
  launch.entry = "fake_kernel";
  launch.threads = 128;
  PtxasReport ptxas;
  ptxas.registers = 96;
  cache::Entry e;
  e.manifest = {{"name", name},
                {"key", key.hex},
                {"config", {{"arch", arch}}},
                {"launch", to_json(launch)},
                {"ptxas", to_json(ptxas)},
                {"compile_ms", 123.0},
                {"created_unix", 1700000000},
                {"source", "// source of " + name + "\n"}};
  e.binary = std::string(1000, 'x') + name;
  return e;
}

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs a command function (or run_cli) in-process with captured streams.
template <class F>
Outcome in_process(cache::DiskStore* store, F&& command) {
  std::ostringstream out, err;
  Context ctx{out, err};
  ctx.store = store;
  Outcome o;
  o.code = command(ctx);
  o.out = out.str();
  o.err = err.str();
  return o;
}

inline Outcome cli(cache::DiskStore* store, const std::vector<std::string>& args) {
  return in_process(store, [&](Context& ctx) { return run_cli(args, ctx); });
}

// Runs `program` with `args` and extra environment variables; stdin is empty, stdout and stderr
// pass through files in `scratch`.
inline Outcome run_program(const std::string& program, const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& env, const fs::path& scratch) {
  const fs::path out_file = scratch / "stdout.txt", err_file = scratch / "stderr.txt";
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    std::string path = program;
    argv.push_back(path.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  Outcome o;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.out = read_file(out_file);
  o.err = read_file(err_file);
  return o;
}

// Runs the built flashjit binary.
inline Outcome run_binary(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                          const fs::path& scratch) {
  return run_program(FLASHJIT_CLI_PATH, args, env, scratch);
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace flashjit::cli::test
