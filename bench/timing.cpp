#include "bench/timing.hpp"

#include "bench/stats.hpp"
#include "runtime/device.hpp"
#include "runtime/driver.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace flashjit::bench {

namespace {

// The current device's PCI bus id, the name NVML knows it by whatever CUDA_VISIBLE_DEVICES says.
std::string current_pci_bus_id() {
  const DriverApi& d = driver();
  CUdevice dev = 0;
  char bus[32] = {};
  if (d.cuDeviceGet(&dev, current_device().ordinal) != CUDA_SUCCESS ||
      d.cuDeviceGetPCIBusId(bus, sizeof bus, dev) != CUDA_SUCCESS)
    return "";
  return bus;
}

}  // namespace

Timer::Timer(const TimingOptions& options)
    : options_(options), telemetry_(unsigned(current_device().ordinal), current_pci_bus_id()) {
  options_.iters = std::max(1, options_.iters);
  options_.warmup = std::max(0, options_.warmup);
  options_.cooldown_ms = std::max(0, options_.cooldown_ms);
  if (options_.sustained) {
    options_.flush_bytes = 0;
    options_.cooldown_ms = 0;
  }
  const DriverApi& d = driver();
  if (options_.flush_bytes) {
    options_.flush_bytes = (options_.flush_bytes + 3) / 4 * 4;
    FLASHJIT_CU(d.cuMemAlloc(&scratch_, options_.flush_bytes));
  }
}

Timer::~Timer() {
  if (!gpu_available()) return;
  const DriverApi& d = driver();
  d.cuStreamSynchronize(stream_);
  if (scratch_) d.cuMemFree(scratch_);
}

void Timer::flush(int i) {
  if (!scratch_) return;
  FLASHJIT_CU(driver().cuMemsetD32Async(scratch_, 0x3f800000u + unsigned(i), options_.flush_bytes / 4,
                                        stream_));
}

TimingResult Timer::time(const Kernel& kernel, const std::vector<AttentionArgs>& sets) {
  const DriverApi& d = driver();
  const int n = static_cast<int>(sets.size());
  if (options_.cooldown_ms > 0) {
    FLASHJIT_CU(d.cuStreamSynchronize(stream_));
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.cooldown_ms));
  }
  int launched = 0;
  if (options_.sustained) {
    // The launch queue fills and blocks the host, so host time tracks the GPU's work.
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.sustain_s);
    while (std::chrono::steady_clock::now() < end) kernel.launch(sets[launched++ % n], stream_);
  }
  for (int i = 0; i < options_.warmup; ++i) {
    flush(i);
    kernel.launch(sets[(launched + i) % n], stream_);
  }
  launched += options_.warmup;
  // Draining the queue leaves a gap of a few microseconds: the board stays at the state the
  // launches before it brought it to.
  FLASHJIT_CU(d.cuStreamSynchronize(stream_));
  const auto energy_start = telemetry_.energy_mj();
  std::vector<CUevent> start(options_.iters), stop(options_.iters);
  for (int i = 0; i < options_.iters; ++i) {
    FLASHJIT_CU(d.cuEventCreate(&start[i], CU_EVENT_DEFAULT));
    FLASHJIT_CU(d.cuEventCreate(&stop[i], CU_EVENT_DEFAULT));
  }
  TimingResult r;
  try {
    for (int i = 0; i < options_.iters; ++i) {
      flush(i);
      FLASHJIT_CU(d.cuEventRecord(start[i], stream_));
      kernel.launch(sets[(launched + i) % n], stream_);
      FLASHJIT_CU(d.cuEventRecord(stop[i], stream_));
    }
    FLASHJIT_CU(d.cuStreamSynchronize(stream_));
    r.telemetry = telemetry_.sample(energy_start);
    for (int i = 0; i < options_.iters; ++i) {
      float ms = 0;
      FLASHJIT_CU(d.cuEventElapsedTime(&ms, start[i], stop[i]));
      r.samples_ms.push_back(ms);
    }
  } catch (...) {
    for (int i = 0; i < options_.iters; ++i) {
      d.cuEventDestroy(start[i]);
      d.cuEventDestroy(stop[i]);
    }
    throw;
  }
  for (int i = 0; i < options_.iters; ++i) {
    d.cuEventDestroy(start[i]);
    d.cuEventDestroy(stop[i]);
  }
  Summary s = summarize(r.samples_ms);
  r.median_ms = s.median;
  r.min_ms = s.min;
  r.mean_ms = s.mean;
  return r;
}

}  // namespace flashjit::bench
