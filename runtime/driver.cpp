#include "runtime/driver.hpp"

#include <dlfcn.h>

#include <cctype>

namespace flashjit {

namespace {

// cuda.h maps some names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2); stringizing
// through a second macro picks up that mapping, so dlsym finds the same symbol a link would.
#define FLASHJIT_STR2(x) #x
#define FLASHJIT_STR(x) FLASHJIT_STR2(x)

struct Loaded {
  DriverApi api;
  std::string error;  // empty when loaded and initialised
};

Loaded load() {
  Loaded l;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    l.error = std::string("no CUDA driver: cannot load libcuda.so.1 (") + (e ? e : "unknown") + ")";
    return l;
  }
#define FLASHJIT_DRIVER_LOAD(name)                                                   \
  l.api.name = reinterpret_cast<decltype(l.api.name)>(dlsym(lib, FLASHJIT_STR(name))); \
  if (!l.api.name && l.error.empty())                                                \
    l.error = std::string("CUDA driver too old: libcuda.so.1 lacks ") + FLASHJIT_STR(name);
  FLASHJIT_DRIVER_FUNCTIONS(FLASHJIT_DRIVER_LOAD)
#undef FLASHJIT_DRIVER_LOAD
  if (!l.error.empty()) return l;
  CUresult r = l.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    l.api.cuGetErrorName(r, &name);
    l.error = std::string("no GPU: cuInit failed (") + (name ? name : "?") + ")";
    return l;
  }
  int count = 0;
  if (l.api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0)
    l.error = "no GPU: the CUDA driver sees no device";
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const DriverApi& driver() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw NoDeviceError(l.error);
  return l.api;
}

bool gpu_available() { return loaded().error.empty(); }
std::string gpu_unavailable_reason() { return loaded().error; }

bool stream_capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  FLASHJIT_CU(driver().cuStreamIsCapturing(stream, &status));
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (gpu_available()) {
    loaded().api.cuGetErrorName(r, &name);
    loaded().api.cuGetErrorString(r, &text);
  }
  // The driver function's name out of the call expression ("driver().cuModuleLoadData(...)").
  std::string c(call);
  for (size_t i = 0; i + 2 < c.size(); ++i) {
    if (c[i] == 'c' && c[i + 1] == 'u' && std::isupper(static_cast<unsigned char>(c[i + 2])) &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(c[i - 1])))) {
      size_t j = i;
      while (j < c.size() && (std::isalnum(static_cast<unsigned char>(c[j])) || c[j] == '_')) ++j;
      c = c.substr(i, j - i);
      break;
    }
  }
  throw DriverError(c + " failed: " + (name ? name : ("CUresult " + std::to_string(r)).c_str()) +
                        (text ? std::string(" (") + text + ")" : std::string()),
                    r);
}

}  // namespace flashjit
