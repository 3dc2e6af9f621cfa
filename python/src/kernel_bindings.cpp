// Kernels from Python: build (compile or read the cache, no GPU), load_kernel (the memoised
// kernel in a device's context) and the description both give (name, key, registers, launch facts).
#include "kernel_bindings.hpp"

#include "cli/build.hpp"
#include "cli/config_input.hpp"
#include "device_context.hpp"
#include "generator/arch.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/artifact.hpp"
#include "runtime/compiler.hpp"
#include "runtime/device.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace flashjit::python {

namespace {

Config with_hint(const Config& c, std::optional<long long> seqlen_k) {
  if (!seqlen_k) return c;
  if (*seqlen_k < 1)
    throw ArgumentError("flashjit: seqlen_k = " + std::to_string(*seqlen_k) + ": must be at least 1");
  return with_seqlen_hint(c, *seqlen_k);
}

}  // namespace

std::string describe(const Artifact& a, bool loaded) {
  nlohmann::json j = cli::artifact_json(a);
  j["launch"] = to_json(a.launch);
  j["config"] = a.config;
  j["loaded"] = loaded;
  return j.dump();
}

void register_kernels(nb::module_& m) {
  nb::class_<LoadedKernel>(m, "LoadedKernel", "A kernel loaded in one device's context (memoised by the runtime)")
      .def_prop_ro("device", [](const LoadedKernel& k) { return k.device; }, "The CUDA device ordinal")
      .def_prop_ro("name", [](const LoadedKernel& k) { return k.kernel->name(); })
      .def_prop_ro("tile_counter", [](const LoadedKernel& k) { return k.kernel->launch_info().tile_counter; },
                   "The kernel draws tiles from a zeroed device counter (the dynamic scheduler)")
      .def("describe", [](const LoadedKernel& k) { return describe(k.kernel->artifact(), true); },
           "JSON: name, arch, key, file, status, timings, registers, spills, launch facts, resolved config");

  m.def("build",
        [](const Config& c, std::optional<long long> seqlen_k, bool reference) {
          const Config target = with_hint(cli::with_arch(c), seqlen_k);  // "native": this machine's GPU
          const Artifact a = reference ? build_artifact(generate_reference(target)) : build(target);
          return describe(a, false);
        },
        nb::arg("config"), nb::arg("seqlen_k") = nb::none(), nb::arg("reference") = false,
        nb::call_guard<nb::gil_scoped_release>(),
        "Compiles the config's kernel, or reads it from the cache, without a GPU; returns its description (JSON).");
  m.def("load_kernel",
        [](const Config& c, std::optional<long long> seqlen_k, int device) {
          DeviceContext scope(device);
          auto kernel = seqlen_k ? get_kernel(c, *seqlen_k) : get_kernel(c);
          return LoadedKernel{std::move(kernel), device >= 0 ? device : current_device().ordinal};
        },
        nb::arg("config"), nb::arg("seqlen_k") = nb::none(), nb::arg("device") = -1,
        nb::call_guard<nb::gil_scoped_release>(),
        "The kernel loaded in `device`'s primary context (-1: the current context), built or read "
        "from the cache on first use.");

  m.def("gpu_available", &gpu_available, "A CUDA driver is present and sees at least one GPU.");
  m.def("gpu_unavailable_reason", &gpu_unavailable_reason, "Why gpu_available() is False.");
  m.def("arch_for_compute_capability", &arch_for_compute_capability, nb::arg("major"), nb::arg("minor"),
        "The target a GPU of that compute capability is compiled for (9.0 -> \"sm_90a\").");
  m.def("version", [] { return std::string(version()); }, "flashjit's version.");
  m.def("nvrtc_identity", &nvrtc_identity, "The NVRTC version and library size that key the cache.");
}

}  // namespace flashjit::python
