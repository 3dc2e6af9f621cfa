// The CUDA driver API, loaded at run time with dlopen, so flashjit builds, links and does all
// but launching on machines without a driver. Every CUresult becomes a DriverError naming the
// call, the error name and its description.
#pragma once

#include <cuda.h>

#include <stdexcept>
#include <string>

namespace flashjit {

class DriverError : public std::runtime_error {
 public:
  DriverError(const std::string& what, CUresult code) : std::runtime_error(what), code_(code) {}
  CUresult code() const { return code_; }

 private:
  CUresult code_;
};

// No libcuda, or no GPU: the message says which.
class NoDeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

#define FLASHJIT_DRIVER_FUNCTIONS(X)                                                         \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute) \
  X(cuDeviceGetName) X(cuDeviceGetPCIBusId) X(cuDevicePrimaryCtxRetain) X(cuCtxGetCurrent) X(cuCtxSetCurrent)       \
  X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload)               \
  X(cuModuleGetFunction) X(cuFuncSetAttribute) X(cuFuncGetAttribute) X(cuLaunchKernelEx)     \
  X(cuTensorMapEncodeTiled) X(cuGetErrorName) X(cuGetErrorString) X(cuMemAlloc) X(cuMemFree) \
  X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8) X(cuMemsetD32Async) X(cuStreamSynchronize)  \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuEventCreate) X(cuEventRecord)                     \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy) X(cuPointerGetAttribute)     \
  X(cuCtxGetStreamPriorityRange) X(cuOccupancyMaxActiveClusters) X(cuStreamIsCapturing)    \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuStreamBeginCapture) X(cuStreamEndCapture)  \
  X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)

struct DriverApi {
#define FLASHJIT_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  FLASHJIT_DRIVER_FUNCTIONS(FLASHJIT_DRIVER_MEMBER)
#undef FLASHJIT_DRIVER_MEMBER
};

// Loads libcuda.so.1 and calls cuInit once; throws NoDeviceError when either fails.
const DriverApi& driver();
// True when a driver is present and at least one GPU is visible (never throws).
bool gpu_available();
// The reason gpu_available() is false (for skips and messages).
std::string gpu_unavailable_reason();

// Whether `stream` is being captured into a CUDA graph (where allocating would fail and end the
// capture).
bool stream_capturing(CUstream stream);

// Throws DriverError for anything but CUDA_SUCCESS.
void check(CUresult r, const char* call);
#define FLASHJIT_CU(call_expr) ::flashjit::check(call_expr, #call_expr)

}  // namespace flashjit
