// What `run` and `bench` share before launching: a GPU, the config for it, and the loaded kernel.
#pragma once

#include "cli/shape.hpp"
#include "generator/config.hpp"
#include "runtime/device.hpp"
#include "runtime/flashjit.hpp"

#include <memory>
#include <string>

namespace flashjit::cli {

struct GpuKernel {
  Config config;  // arch made concrete ("native" and --arch applied)
  ProblemShape shape;
  std::shared_ptr<const Kernel> kernel;  // tiles chosen for the shape's key length
  const DeviceInfo* device = nullptr;
};

// Throws NoDeviceError without a GPU, UsageError when the target cannot run on this GPU (a cubin
// runs only on its own major compute capability, an sm_XYa cubin only on X.Y).
GpuKernel prepare_gpu_kernel(const std::string& config_path, const std::string& arch,
                             const ShapeOptions& shape);

// True when a cubin built for `target` loads on a device of compute capability major.minor.
bool target_runs_on(const std::string& target, int major, int minor);

// "fwd_sm90a_... (cache hit, 3.1 ms)" / "(compiled in 812 ms)".
std::string kernel_status(const Kernel& k);
std::string device_text(const DeviceInfo& d);

}  // namespace flashjit::cli
