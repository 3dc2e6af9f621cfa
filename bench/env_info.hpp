// What a benchmark record says about where it ran: date, host, CPU, GPU, driver, NVRTC.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace flashjit::bench {

std::string utc_now();  // 2026-05-01T12:34:56Z
// {"date", "hostname", "cpu", "cpu_cores"}
nlohmann::json host_info();
// {"flashjit", "nvrtc", "cuda_headers"}
nlohmann::json build_info();
// {"name", "cc", "arch", "sm_count", "l2_bytes", "max_smem_optin", "driver"}; needs a GPU.
nlohmann::json gpu_info();
// The device's L2 size in bytes (60 MB when the driver does not say).
size_t l2_cache_bytes();

}  // namespace flashjit::bench
