#include "runtime/compiler.hpp"

#include "cache/entry_file.hpp"
#include "cache/file_io.hpp"
#include "cache/trusted_dir.hpp"
#include "generator/templates.hpp"

#include <nvrtc.h>

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace flashjit {

namespace {

void check(nvrtcResult r, const char* call) {
  if (r != NVRTC_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed: " + nvrtcGetErrorString(r));
}

// The source of a failed compile, for the user to look at: written into a directory of the
// user's own (<tmp>/flashjit-sources-<uid>, or FLASHJIT_DUMP_DIR), under a name nobody could
// have guessed and linked first. Returns its path, or why it could not be written.
std::string dump_source(const std::string& name, const std::string& source) {
  namespace fs = std::filesystem;
  const char* env = std::getenv("FLASHJIT_DUMP_DIR");
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  const bool chosen = env && *env;
  const fs::path dir = chosen ? cache::private_place(env, "flashjit-sources", {})
                              : tmp / ("flashjit-sources-" + std::to_string(::geteuid()));
  cache::TrustedDir d = cache::TrustedDir::open(dir, {}, cache::Create::private_dir);
  if (!d.ok() && !chosen) {
    // someone else made that name first: a fresh private directory instead
    std::string fresh = (tmp / "flashjit-sources-XXXXXX").string();
    if (::mkdtemp(fresh.data())) d = cache::TrustedDir::open(fresh, {}, cache::Create::no);
  }
  if (!d.ok()) return "(not written: " + d.problem() + ")";
  cache::CreatedFile f = cache::create_unique_file(d, cache::sanitize_name(name) + ".", ".cu", 0600);
  if (!f.error.empty()) return "(not written: " + f.error + ")";
  const std::string path = (d.path() / f.name).string();
  if (!cache::write_all(f.fd.get(), source) || f.fd.close() != 0)
    return "(not written: cannot write " + path + ": " + cache::errno_text(errno) + ")";
  return path;
}

// Advisories that mean the kernel would silently run on a slow path.
std::vector<std::string> fatal_advisories(const KernelSource& src) {
  if (src.launch.family == "sm90") return {"C7508"};
  return {};
}

}  // namespace

std::string nvrtc_identity() {
  // major.minor plus the size of the library file: the same NVRTC build has the same size on
  // every machine, whatever the file is called there (libnvrtc.so.13 vs libnvrtc.so.13.0.88), and
  // a different build of the same minor version almost surely has another size.
  static const std::string id = [] {
    int major = 0, minor = 0;
    check(nvrtcVersion(&major, &minor), "nvrtcVersion");
    std::string s = std::to_string(major) + "." + std::to_string(minor);
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname) {
      std::error_code ec;
      auto size = std::filesystem::file_size(std::filesystem::canonical(info.dli_fname, ec), ec);
      if (!ec) s += " libnvrtc:" + std::to_string(size);
    }
    return s;
  }();
  return id;
}

std::vector<int> nvrtc_supported_compute_capabilities() {
  int n = 0;
  check(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(n);
  check(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  return archs;
}

std::vector<std::string> compile_options(const KernelSource& src) {
  // 177: unused constants of the shared templates are expected in any one instantiation.
  // --no-cache: NVRTC 12.9+ on a machine with a driver caches its output and answers a repeated
  // compile from that cache with an empty log, so the ptxas report (registers, spills,
  // advisories) would be missing; flashjit's own cache keeps the compiled kernels.
  return {"--gpu-architecture=" + src.arch, "--std=c++17", "--diag-suppress=177", "--no-cache",
          "--ptxas-options=-v", "--ptxas-options=--warn-on-spills"};
}

std::string compilation_source(const KernelSource& src) { return flatten(src.unit); }

CompiledKernel compile(const KernelSource& src) {
  auto start = std::chrono::steady_clock::now();
  CompiledKernel out;
  out.options = compile_options(src);
  for (const auto& o : src.options) out.options.push_back(o);
  const std::string source = compilation_source(src);

  nvrtcProgram prog = nullptr;
  check(nvrtcCreateProgram(&prog, source.c_str(), (src.name + ".cu").c_str(), 0, nullptr, nullptr),
        "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) {
    nvrtcDestroyProgram(p);
  });

  std::vector<const char*> argv;
  for (const auto& o : out.options) argv.push_back(o.c_str());
  nvrtcResult rc = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());

  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  out.log.resize(log_size);
  if (log_size) nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();

  if (rc != NVRTC_SUCCESS) {
    std::string path = dump_source(src.name, source);
    throw CompileError("NVRTC failed to compile " + src.name + " for " + src.arch + " (" +
                           nvrtcGetErrorString(rc) + "); source: " + path + "\n" + out.log,
                       out.log, path);
  }
  size_t size = 0;
  check(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
  if (size == 0)
    throw CompileError("NVRTC produced no cubin for " + src.arch + " (a virtual arch?)", out.log, "");
  out.cubin.resize(size);
  check(nvrtcGetCUBIN(prog, out.cubin.data()), "nvrtcGetCUBIN");

  out.report = parse_ptxas_report(out.log, src.launch.entry);
  for (const auto& code : fatal_advisories(src)) {
    if (out.report.has_advisory(code)) {
      std::string path = dump_source(src.name, source);
      throw CompileError("ptxas advisory " + code + " for " + src.name +
                             " means the kernel would run on a slow path; source: " + path +
                             "\n" + out.log,
                         out.log, path);
    }
  }
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace flashjit
