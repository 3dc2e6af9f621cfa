#include "bench/jit_steps.hpp"

#include "cache/store.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/artifact.hpp"
#include "runtime/device.hpp"
#include "runtime/driver.hpp"
#include "runtime/flashjit.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace flashjit::bench {

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

Config load_for(const std::string& path, const std::string& arch) {
  Config c = load_config_file(path);
  c.arch = arch;
  return c;
}

// The CUDA context is created apart from the steps, so its cost is reported on its own.
nlohmann::json context_init(bool gpu) {
  nlohmann::json j;
  if (!gpu) return j;
  auto t = clock_type::now();
  current_device();
  j["context_init_ms"] = ms_since(t);
  return j;
}

}  // namespace

nlohmann::json measure_hit_steps(const std::string& config_path, const std::string& arch, bool gpu) {
  nlohmann::json j = context_init(gpu);
  double total = 0;
  auto step = [&](const char* name, auto&& fn) {
    auto t = clock_type::now();
    fn();
    const double ms = ms_since(t);
    j[name] = ms;
    total += ms;
  };
  Config c;
  KernelSource src;
  cache::Key key;
  std::optional<cache::Entry> entry;
  Artifact a;
  step("parse_ms", [&] { c = load_for(config_path, arch); });
  step("generate_ms", [&] { src = generate(resolve(c)); });
  step("key_ms", [&] { key = artifact_key(src); });
  step("disk_read_verify_ms", [&] {
    cache::DiskStore store(cache::StoreOptions::from_env());
    entry = store.load(key, src.name);
  });
  if (!entry) throw std::runtime_error("cache miss for " + src.name + " in the warm directory");
  step("decode_ms", [&] { a = artifact_from_entry(*entry); });
  if (gpu) {
    CUmodule module = nullptr;
    step("module_load_ms", [&] {
      CUfunction f;
      FLASHJIT_CU(driver().cuModuleLoadData(&module, a.cubin.data()));
      FLASHJIT_CU(driver().cuModuleGetFunction(&f, module, a.launch.entry.c_str()));
    });
    driver().cuModuleUnload(module);
  }
  j["total_ms"] = total;
  j["kernel"] = src.name;
  j["cubin_bytes"] = a.cubin.size();
  return j;
}

nlohmann::json measure_hit_first_call(const std::string& config_path, const std::string& arch, bool gpu) {
  nlohmann::json j = context_init(gpu);
  Config c = load_for(config_path, arch);  // parsing is timed in measure_hit_steps
  auto t = clock_type::now();
  if (gpu) {
    auto k = get_kernel(c);
    j["first_call_ms"] = ms_since(t);
    j["what"] = "get_kernel";
    j["compiled"] = k->artifact().compiled;
    j["kernel"] = k->name();
  } else {
    Artifact a = build(c);
    j["first_call_ms"] = ms_since(t);
    j["what"] = "build";
    j["compiled"] = a.compiled;
    j["kernel"] = a.name;
  }
  return j;
}

ChildRun spawn_self(const std::vector<std::string>& args,
                    const std::vector<std::pair<std::string, std::string>>& set_env,
                    const std::vector<std::string>& unset_env) {
  char exe[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) throw std::runtime_error("cannot find this executable (/proc/self/exe)");

  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    bool drop = false;
    for (const auto& u : unset_env) drop |= name == u;
    for (const auto& s : set_env) drop |= name == s.first;
    if (!drop) env_store.push_back(kv);
  }
  for (const auto& s : set_env) env_store.push_back(s.first + "=" + s.second);
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> argv_store{exe};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_store) argv.push_back(s.data());
  argv.push_back(nullptr);

  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  ChildRun r;
  const auto t = clock_type::now();
  pid_t pid;
  int rc = posix_spawn(&pid, exe, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
  }
  char buf[4096];
  for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) != 0;) {
    if (k < 0) {
      if (errno == EINTR) continue;
      break;
    }
    r.stdout_text.append(buf, size_t(k));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.wall_ms = ms_since(t);
  r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace flashjit::bench
