// wgmma support: shared-memory matrix descriptors for 128- and 64-byte-swizzled tiles, the async group
// fences, and the Wgmma<Element, N> wrappers (their specialisations are generated per config:
// see generator/wgmma_emitter.cpp).
#pragma once

#include "common/types.cuh"

namespace flashjit::sm90 {

template <class Element, int N>
struct Wgmma;  // ss(): A and B K-major in smem; rs(): A in registers, B MN-major in smem

// Descriptor of a swizzled operand starting at shared address `addr` (bits: 0-13 address>>4,
// 16-29 leading byte offset>>4, 32-45 stride byte offset>>4, 62-63 layout: 1 = 128B swizzle,
// 2 = 64B swizzle).
//   K-major (rows of 128 B, 8-row atoms of 1 KB): lbo unused, sbo = 1024.
//   MN-major (V as B of P.V): lbo = bytes between 64-column panels, sbo = 1024 (8 K-rows).
__device__ __forceinline__ u64 make_desc(u32 addr, u32 lbo, u32 sbo, u32 layout = 1) {
  u64 d = 0;
  d |= u64((addr & 0x3FFFF) >> 4);
  d |= u64((lbo & 0x3FFFF) >> 4) << 16;
  d |= u64((sbo & 0x3FFFF) >> 4) << 32;
  d |= u64(layout) << 62;
  return d;
}

// A K-major operand in panels of kPanel bytes a row (common/swizzle_panels.cuh): 128 with the
// 128-byte swizzle (8-row atoms of 1 KB), 64 with the 64-byte swizzle (8-row atoms of 512 B).
// A k-step inside a panel starts `addr` 32 bytes further along the row.
template <int kPanel>
__device__ __forceinline__ u64 k_major_desc(u32 addr) {
  static_assert(kPanel == 128 || kPanel == 64, "128- or 64-byte panels");
  return make_desc(addr, 16, 8 * kPanel, kPanel == 128 ? 1 : 2);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Tells the compiler registers may change here, so it neither moves their uses across an async
// wgmma boundary nor reuses their physical registers while a wgmma still reads them.
template <int N>
__device__ __forceinline__ void fence_operand(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operand(u32 (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

}  // namespace flashjit::sm90
