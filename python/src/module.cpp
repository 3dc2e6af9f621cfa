// flashjit._core: the C++ library as seen from Python. Needs neither torch nor a GPU to import;
// the torch layer (flashjit/_torch.py) calls LaunchPlan with plain integers.
#include "bindings.hpp"

NB_MODULE(_core, m) {
  m.doc() = "flashjit's C++ library: configs, generation, NVRTC builds, the kernel cache and launches";
  // Objects that torch's caches still hold at interpreter exit are not leaks worth a report.
  nanobind::set_leak_warnings(false);
  flashjit::python::register_errors(m);
  flashjit::python::register_config(m);
  flashjit::python::register_kernels(m);
  flashjit::python::register_launch(m);
  flashjit::python::register_tools(m);
}
