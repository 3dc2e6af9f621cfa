// GPU telemetry through NVML (libnvidia-ml.so.1, dlopen'ed, so nothing links it): the SM clock,
// the power draw, the clock-limit reasons and the board's energy counter, read around a timed
// window so each point says at which clock and power it ran and what energy it took. Every
// reading is empty where NVML is missing. bench/nvml.py reads the same for the Python peers.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flashjit::bench {

struct TelemetrySample {
  std::optional<unsigned> sm_mhz;
  std::optional<double> power_w;
  std::optional<unsigned long long> limit_reasons;  // nvmlClocksEventReasons bits
  std::optional<double> energy_j;                   // since the window's start
  nlohmann::json to_json() const;
};

// "SW power cap", "HW thermal", ... for the set bits.
std::vector<std::string> limit_reason_names(unsigned long long mask);

class GpuTelemetry {
 public:
  // The GPU at this PCI bus id ("0000:19:00.0", from cuDeviceGetPCIBusId), else NVML's index
  // `device_index`: NVML numbers GPUs physically, so under CUDA_VISIBLE_DEVICES a CUDA ordinal
  // is another GPU's NVML index.
  explicit GpuTelemetry(unsigned device_index = 0, const std::string& pci_bus_id = "");
  bool available() const { return device_ != nullptr; }
  std::optional<unsigned long long> energy_mj() const;
  // Readings at the end of a window that began when energy_mj() returned `start_mj`.
  TelemetrySample sample(std::optional<unsigned long long> start_mj) const;

  struct Api;  // the NVML entry points (gpu_telemetry.cpp)

 private:
  void* device_ = nullptr;
  const Api* api_ = nullptr;
};

}  // namespace flashjit::bench
