#include "bench/gpu_telemetry.hpp"

#include <dlfcn.h>

namespace flashjit::bench {

// NVML's C ABI: nvmlReturn_t is an int (0 = success), nvmlDevice_t an opaque pointer.
struct GpuTelemetry::Api {
  int (*init)();
  int (*handle_by_index)(unsigned, void**);
  int (*handle_by_bus_id)(const char*, void**);
  int (*clock_info)(void*, int, unsigned*);
  int (*power_usage)(void*, unsigned*);
  int (*energy)(void*, unsigned long long*);
  int (*reasons)(void*, unsigned long long*);
};

namespace {

constexpr int kClockSm = 1;  // NVML_CLOCK_SM

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

const GpuTelemetry::Api* load_api() {
  static const GpuTelemetry::Api* api = []() -> const GpuTelemetry::Api* {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    static GpuTelemetry::Api a;
    a.init = symbol<int (*)()>(lib, "nvmlInit_v2");
    a.handle_by_index = symbol<int (*)(unsigned, void**)>(lib, "nvmlDeviceGetHandleByIndex_v2");
    a.handle_by_bus_id = symbol<int (*)(const char*, void**)>(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    a.clock_info = symbol<int (*)(void*, int, unsigned*)>(lib, "nvmlDeviceGetClockInfo");
    a.power_usage = symbol<int (*)(void*, unsigned*)>(lib, "nvmlDeviceGetPowerUsage");
    a.energy = symbol<int (*)(void*, unsigned long long*)>(lib, "nvmlDeviceGetTotalEnergyConsumption");
    a.reasons = symbol<int (*)(void*, unsigned long long*)>(lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!a.reasons)
      a.reasons = symbol<int (*)(void*, unsigned long long*)>(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (!a.init || !a.handle_by_index || a.init() != 0) return nullptr;
    return &a;
  }();
  return api;
}
}  // namespace

std::vector<std::string> limit_reason_names(unsigned long long mask) {
  static const std::pair<unsigned long long, const char*> kNames[] = {
      {0x1, "gpu idle"},      {0x2, "applications clocks"}, {0x4, "SW power cap"},
      {0x8, "HW slowdown"},   {0x10, "sync boost"},         {0x20, "SW thermal"},
      {0x40, "HW thermal"},   {0x80, "HW power brake"},     {0x100, "display clocks"}};
  std::vector<std::string> out;
  for (const auto& [bit, name] : kNames)
    if (mask & bit) out.push_back(name);
  return out;
}

nlohmann::json TelemetrySample::to_json() const {
  nlohmann::json j;
  j["sm_mhz"] = sm_mhz ? nlohmann::json(*sm_mhz) : nlohmann::json(nullptr);
  j["power_w"] = power_w ? nlohmann::json(*power_w) : nlohmann::json(nullptr);
  j["limit_reasons"] = limit_reasons ? nlohmann::json(limit_reason_names(*limit_reasons)) : nlohmann::json(nullptr);
  j["energy_j"] = energy_j ? nlohmann::json(*energy_j) : nlohmann::json(nullptr);
  return j;
}

GpuTelemetry::GpuTelemetry(unsigned device_index, const std::string& pci_bus_id) : api_(load_api()) {
  if (!api_) return;
  if (!pci_bus_id.empty() && api_->handle_by_bus_id && api_->handle_by_bus_id(pci_bus_id.c_str(), &device_) == 0)
    return;
  if (api_->handle_by_index(device_index, &device_) != 0) device_ = nullptr;
}

std::optional<unsigned long long> GpuTelemetry::energy_mj() const {
  unsigned long long mj = 0;
  if (!device_ || !api_->energy || api_->energy(device_, &mj) != 0) return std::nullopt;
  return mj;
}

TelemetrySample GpuTelemetry::sample(std::optional<unsigned long long> start_mj) const {
  TelemetrySample s;
  if (!device_) return s;
  const auto end_mj = energy_mj();
  if (start_mj && end_mj) s.energy_j = double(*end_mj - *start_mj) / 1000.0;
  unsigned v = 0;
  if (api_->clock_info && api_->clock_info(device_, kClockSm, &v) == 0) s.sm_mhz = v;
  if (api_->power_usage && api_->power_usage(device_, &v) == 0) s.power_w = v / 1000.0;
  unsigned long long mask = 0;
  if (api_->reasons && api_->reasons(device_, &mask) == 0) s.limit_reasons = mask;
  return s;
}

}  // namespace flashjit::bench
