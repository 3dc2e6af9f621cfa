#include "bench/env_info.hpp"

#include "runtime/artifact.hpp"
#include "runtime/compiler.hpp"
#include "runtime/device.hpp"
#include "runtime/driver.hpp"

#include <cuda.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <thread>

namespace flashjit::bench {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

nlohmann::json host_info() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string cpu = "unknown";
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) cpu = line.substr(colon + 2);
      break;
    }
  }
  return {{"date", utc_now()},
          {"hostname", host},
          {"cpu", cpu},
          {"cpu_cores", std::thread::hardware_concurrency()}};
}

nlohmann::json build_info() {
  return {{"flashjit", version()},
          {"nvrtc", nvrtc_identity()},
          {"cuda_headers", std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10)}};
}

size_t l2_cache_bytes() {
  int v = 0;
  const DeviceInfo& dev = current_device();
  CUdevice d;
  FLASHJIT_CU(driver().cuDeviceGet(&d, dev.ordinal));
  if (driver().cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, d) != CUDA_SUCCESS || v <= 0)
    return size_t(60) << 20;
  return size_t(v);
}

nlohmann::json gpu_info() {
  const DeviceInfo& dev = current_device();
  int drv = 0;
  FLASHJIT_CU(driver().cuDriverGetVersion(&drv));
  return {{"name", dev.name},
          {"ordinal", dev.ordinal},
          {"cc", std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor)},
          {"arch", dev.arch()},
          {"sm_count", dev.sm_count},
          {"max_smem_optin", dev.max_smem_optin},
          {"l2_bytes", l2_cache_bytes()},
          {"driver_cuda_version", std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10)}};
}

}  // namespace flashjit::bench
