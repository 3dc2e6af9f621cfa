#include "device_context.hpp"

#include "runtime/driver.hpp"
#include "runtime/flashjit.hpp"

#include <array>
#include <atomic>
#include <mutex>
#include <string>

namespace flashjit::python {

namespace {

constexpr int kMaxDevices = 256;

// Primary contexts, retained once per device and never released (torch holds them too).
CUcontext primary_context(int device) {
  static std::array<std::atomic<CUcontext>, kMaxDevices> known{};
  static std::mutex mutex;
  if (device >= kMaxDevices)
    throw ArgumentError("flashjit: device " + std::to_string(device) + " is beyond the " +
                                std::to_string(kMaxDevices) + " devices flashjit tracks");
  if (CUcontext c = known[device].load(std::memory_order_acquire)) return c;
  std::lock_guard<std::mutex> lock(mutex);
  if (CUcontext c = known[device].load(std::memory_order_relaxed)) return c;
  const DriverApi& d = driver();
  CUdevice dev;
  FLASHJIT_CU(d.cuDeviceGet(&dev, device));
  CUcontext ctx = nullptr;
  FLASHJIT_CU(d.cuDevicePrimaryCtxRetain(&ctx, dev));
  known[device].store(ctx, std::memory_order_release);
  return ctx;
}

}  // namespace

DeviceContext::DeviceContext(int device) {
  if (device < 0) return;
  const CUcontext want = primary_context(device);
  const DriverApi& d = driver();
  FLASHJIT_CU(d.cuCtxGetCurrent(&previous_));
  if (previous_ == want) return;
  FLASHJIT_CU(d.cuCtxSetCurrent(want));
  switched_ = true;
}

DeviceContext::~DeviceContext() {
  if (switched_) driver().cuCtxSetCurrent(previous_);
}

}  // namespace flashjit::python
