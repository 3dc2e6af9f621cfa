#include "cli/gpu_kernel.hpp"

#include "cli/config_input.hpp"
#include "cli/errors.hpp"
#include "cli/format.hpp"
#include "generator/arch.hpp"
#include "generator/resolve.hpp"
#include "runtime/driver.hpp"

namespace flashjit::cli {

bool target_runs_on(const std::string& target, int major, int minor) {
  const auto a = parse_arch(target);
  if (!a) return false;
  if (a->major != major) return false;
  if (a->suffix == 'a') return a->minor == minor;
  return minor >= a->minor;
}

GpuKernel prepare_gpu_kernel(const std::string& config_path, const std::string& arch,
                             const ShapeOptions& shape) {
  Config c = load_config_input(config_path);
  if (!gpu_available()) throw NoDeviceError(gpu_unavailable_reason());
  c = with_page_size(with_arch(c, arch), shape.page_size);
  GpuKernel g;
  g.device = &current_device();
  if (!target_runs_on(c.arch, g.device->cc_major, g.device->cc_minor))
    throw UsageError("the config targets " + c.arch + ", which cannot run on " + g.device->name + " (" +
                     g.device->arch() + "); pass --arch native (or --arch " + g.device->arch() + ")");
  g.config = c;
  // The family decides what the shape may ask for (splits are a decode kernel's).
  g.shape = make_shape(shape, resolve(c));
  g.kernel = get_kernel(c, g.shape.max_seqlen_k());
  return g;
}

std::string kernel_status(const Kernel& k) {
  const Artifact& a = k.artifact();
  return a.name + (a.compiled ? " (compiled in " + format_ms(a.compile_ms) + ")"
                              : " (cache hit, " + format_ms(a.load_ms) + ")");
}

std::string device_text(const DeviceInfo& d) {
  return d.name + " (" + d.arch() + ", " + std::to_string(d.sm_count) + " SMs)";
}

}  // namespace flashjit::cli
