// FLASHJIT_HOST_DEVICE marks the constexpr arithmetic that the host (plain C++: budgets, launch
// plans) and the kernels (NVRTC) share, such as the shared-memory region layouts.
#pragma once

#if defined(__CUDACC__)
#define FLASHJIT_HOST_DEVICE __host__ __device__
#else
#define FLASHJIT_HOST_DEVICE
#endif
