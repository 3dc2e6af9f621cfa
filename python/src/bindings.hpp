// The parts of the extension module flashjit._core, each registered by its own file.
#pragma once

#include <nanobind/nanobind.h>

namespace flashjit::python {

namespace nb = nanobind;

void register_errors(nb::module_& m);   // exception types and the C++ -> Python translation
void register_config(nb::module_& m);   // Config, ConfigIssue, load_config_file, generate
void register_kernels(nb::module_& m);  // build, load_kernel, LoadedKernel, device helpers
void register_launch(nb::module_& m);   // LaunchPlan: the warm attention path
void register_tools(nb::module_& m);    // precompile and the cache maintenance functions

}  // namespace flashjit::python
