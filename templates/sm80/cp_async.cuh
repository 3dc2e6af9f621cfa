// cp.async: asynchronous 16-byte global -> shared copies (sm_80+), grouped and waited on per
// thread. A copy with `valid == false` reads nothing and writes 16 zero bytes (src-size 0), which
// is how tiles that hang over the end of a sequence are zero-filled without a branch.
#pragma once

#include "common/types.cuh"

namespace flashjit::sm80 {

// .cg: cache in L2 only; K/V tiles are re-read by every M block of a head, through L2.
__device__ __forceinline__ void cp_async_16(u32 smem_addr, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem),
               "r"(valid ? 16 : 0)
               : "memory");
}

// The same copy with the zero fill as cp.async's ignore-src predicate: no source-size operand
// for ptxas to turn into address arithmetic around every copy. `gmem` must be an address the
// copy could read even when it is ignored.
__device__ __forceinline__ void cp_async_16_or_zero(u32 smem_addr, const void* gmem, bool valid) {
  asm volatile(
      "{\n.reg .pred ignore;\nsetp.eq.u32 ignore, %2, 0;\ncp.async.cg.shared.global [%0], [%1], 16, ignore;\n}\n" ::"r"(smem_addr),
      "l"(gmem), "r"(u32(valid))
      : "memory");
}

// Closes the group of copies issued since the last commit (an empty group is legal, and keeps
// the group count the same on every iteration so the wait depths below stay constants).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most kPending of this thread's most recent groups are still in flight. Other
// threads' copies become visible only after a __syncthreads() that follows this.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace flashjit::sm80
