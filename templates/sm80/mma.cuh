// mma.sync.m16n8k16 (row.col, fp32 accumulate) on bf16 or fp16 operands.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"); lane = 4*g + t, g = lane / 4
// (0..7), t = lane % 4 (0..3). Each .b32 register of A or B holds two 16-bit values, the lower
// column (A) / lower k (B) in the low half.
//   A (16x16, row-major, M x K):  a0 = A[g   ][2t, 2t+1]    a1 = A[g+8][2t, 2t+1]
//                                 a2 = A[g   ][2t+8, 2t+9]  a3 = A[g+8][2t+8, 2t+9]
//   B (16x8,  "col", K x N):      b0 = B[2t, 2t+1][g]       b1 = B[2t+8, 2t+9][g]
//   C/D (16x8 fp32, M x N):       c0 = C[g][2t]   c1 = C[g][2t+1]   c2 = C[g+8][2t]   c3 = C[g+8][2t+1]
// So the C fragments of two adjacent n-tiles (columns 0..15) are exactly an A fragment of a
// 16x16 tile once packed to 16 bits: {c0,c1 | c2,c3} of tile 0 -> a0 | a1, of tile 1 -> a2 | a3.
#pragma once

#include "common/types.cuh"

namespace flashjit::sm80 {

template <class E>
struct MmaOp;

#define FLASHJIT_SM80_MMA(TYPE, NAME)                                                           \
  template <>                                                                                   \
  struct MmaOp<TYPE> {                                                                          \
    __device__ __forceinline__ static void acc(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) { \
      asm("mma.sync.aligned.m16n8k16.row.col.f32." NAME "." NAME ".f32 {%0, %1, %2, %3}, "      \
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                                      \
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                       \
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                      \
    }                                                                                           \
    __device__ __forceinline__ static void zero(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) { \
      asm("mma.sync.aligned.m16n8k16.row.col.f32." NAME "." NAME ".f32 {%0, %1, %2, %3}, "      \
          "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"                                  \
          : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                       \
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));             \
    }                                                                                           \
  };
FLASHJIT_SM80_MMA(bf16_t, "bf16")
FLASHJIT_SM80_MMA(fp16_t, "f16")
#undef FLASHJIT_SM80_MMA

// d += a * b for one 16x8x16 tile.
template <class E>
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  MmaOp<E>::acc(d, a, b0, b1);
}

// d = a * b (no accumulator input: the first k-step of a GEMM needs no zeroed registers).
template <class E>
__device__ __forceinline__ void mma_16816_zero_c(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  MmaOp<E>::zero(d, a, b0, b1);
}

}  // namespace flashjit::sm80
