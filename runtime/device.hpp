// The GPU flashjit launches on: the current context's device, or (when the calling thread has no
// context) device $FLASHJIT_DEVICE / 0 through its primary context, made current.
#pragma once

#include <cuda.h>

#include <string>

namespace flashjit {

struct DeviceInfo {
  int ordinal = 0;
  CUcontext context = nullptr;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int max_smem_optin = 0;  // bytes of dynamic shared memory a block may opt into
  std::string name;
  std::string arch() const;  // the target to compile for, e.g. sm_90a
};

// Ensures a current context and describes its device. Throws NoDeviceError without a GPU.
const DeviceInfo& current_device();

}  // namespace flashjit
