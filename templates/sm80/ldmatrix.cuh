// ldmatrix: a warp loads four 8x8 matrices of 16-bit elements from shared memory into fragments.
//
// .x4: lanes 8i .. 8i+7 give the shared addresses of the 8 rows (16 contiguous bytes each) of
// matrix i. Result register r[i] of lane l = 4*g + t holds, of matrix i:
//   plain   M[g][2t], M[g][2t+1]          (row g, two adjacent columns)
//   .trans  M[2t][g], M[2t+1][g]          (two adjacent rows, column g)
// Plain loads of row-major [m][k] data give mma A fragments and of [n][k] data ("col" B) give B
// fragments; .trans loads of row-major [k][n] data (V) give B fragments (see mma.cuh).
// The asm is volatile: the same address holds different tiles on different loop iterations.
#pragma once

#include "common/types.cuh"

namespace flashjit::sm80 {

__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], u32 smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

}  // namespace flashjit::sm80
