// What the kernel and launch bindings share: a loaded kernel and the device it lives on, and the
// JSON description of a built kernel.
#pragma once

#include "bindings.hpp"

#include "runtime/flashjit.hpp"

#include <memory>
#include <string>

namespace flashjit::python {

struct LoadedKernel {
  std::shared_ptr<const Kernel> kernel;
  int device = 0;
};

// cli::artifact_json plus the launch facts, the resolved config and whether it is loaded.
std::string describe(const Artifact& a, bool loaded);

}  // namespace flashjit::python
