#include "runtime/device.hpp"

#include "generator/arch.hpp"
#include "runtime/driver.hpp"

#include <cstdlib>
#include <map>
#include <mutex>

namespace flashjit {

std::string DeviceInfo::arch() const { return arch_for_compute_capability(cc_major, cc_minor); }

namespace {

DeviceInfo describe(CUcontext ctx, CUdevice dev) {
  const DriverApi& d = driver();
  DeviceInfo info;
  info.context = ctx;
  info.ordinal = static_cast<int>(dev);
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    FLASHJIT_CU(d.cuDeviceGetAttribute(&v, a, dev));
    return v;
  };
  info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.max_smem_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  char name[256] = {};
  FLASHJIT_CU(d.cuDeviceGetName(name, sizeof name, dev));
  info.name = name;
  return info;
}

}  // namespace

const DeviceInfo& current_device() {
  const DriverApi& d = driver();
  CUcontext ctx = nullptr;
  FLASHJIT_CU(d.cuCtxGetCurrent(&ctx));
  if (!ctx) {
    int ordinal = 0;
    if (const char* e = std::getenv("FLASHJIT_DEVICE")) ordinal = std::atoi(e);
    CUdevice dev;
    FLASHJIT_CU(d.cuDeviceGet(&dev, ordinal));
    FLASHJIT_CU(d.cuDevicePrimaryCtxRetain(&ctx, dev));
    FLASHJIT_CU(d.cuCtxSetCurrent(ctx));
  }
  // Descriptions are cached per context: the warm launch path does one map lookup.
  static std::mutex mutex;
  static auto* known = new std::map<CUcontext, DeviceInfo>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known->find(ctx);
  if (it != known->end()) return it->second;
  CUdevice dev;
  FLASHJIT_CU(d.cuCtxGetDevice(&dev));
  return known->emplace(ctx, describe(ctx, dev)).first->second;
}

}  // namespace flashjit
