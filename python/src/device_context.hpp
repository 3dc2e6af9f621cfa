// Launching on the GPU that holds the tensors: torch keeps each device's primary context, so for
// the duration of a call the primary context of that device is made current (and the caller's
// context restored after), as torch's own device guards do.
#pragma once

#include <cuda.h>

namespace flashjit::python {

class DeviceContext {
 public:
  // device < 0: leave the current context as it is (the runtime then uses it, or
  // $FLASHJIT_DEVICE / device 0 when there is none).
  explicit DeviceContext(int device);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

}  // namespace flashjit::python
