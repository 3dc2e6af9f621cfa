// NVRTC: generated source -> cubin for any target NVRTC knows, with the ptxas report. Needs no
// GPU and no CUDA include directory (the templates are self-contained).
#pragma once

#include "generator/kernel_source.hpp"
#include "runtime/ptxas_report.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace flashjit {

struct CompiledKernel {
  std::vector<char> cubin;
  std::string log;
  PtxasReport report;
  double compile_ms = 0;
  std::vector<std::string> options;
};

class CompileError : public std::runtime_error {
 public:
  CompileError(const std::string& what, std::string log, std::string source_path)
      : std::runtime_error(what), log_(std::move(log)), source_path_(std::move(source_path)) {}
  const std::string& log() const { return log_; }
  const std::string& source_path() const { return source_path_; }

 private:
  std::string log_;
  std::string source_path_;
};

// "13.0 libnvrtc:109338064": the NVRTC version and the size of its library, which tells builds apart.
std::string nvrtc_identity();
// Targets NVRTC accepts, as sm_XY names (from nvrtcGetSupportedArchs; 'a'/'f' variants exist
// for the archs that have them).
std::vector<int> nvrtc_supported_compute_capabilities();

// The options a source is compiled with, in a fixed order (they are part of the cache key).
std::vector<std::string> compile_options(const KernelSource& src);

// The flat (self-contained) source that is compiled and hashed.
std::string compilation_source(const KernelSource& src);

// Compiles; throws CompileError with the log and the path of the dumped source on failure, and
// when ptxas reports an advisory the family forbids (sm90: C7508, setmaxnreg ignored).
CompiledKernel compile(const KernelSource& src);

}  // namespace flashjit
