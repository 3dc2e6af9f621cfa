// fp8 V, transposed in shared memory. 8-bit wgmma reads its B operand K-major only, and users'
// caches hold V row-major ([keys, dv]), so the producer warpgroup's three spare warps turn each
// TMA-loaded V stage ([dv panel][key][128 bytes]) into Vt ([key panel][dv][128 keys]), both
// 128-byte swizzled, and hand it to the consumers through their own full/empty barriers.
//
// The keys are permuted on the way. The consumers' probabilities come in the wgmma accumulator
// layout, where a lane of quad position q holds keys 2q, 2q+1, 8+2q, 9+2q (and 16 more) of each
// 32-key step, while an 8-bit A fragment register holds keys 4q .. 4q+3. Packing the accumulator
// as it lies and storing V's rows in the matching order (Vt key h holds V key permuted_key(h))
// gives the same sum over keys without a shuffle.
#pragma once

#include "common/types.cuh"
#include "sm90/ptx.cuh"

namespace flashjit::sm90 {

inline constexpr int kVTransposerWarps = 3;  // warps 1-3 of the producer warpgroup

// The V key (within a 32-key step) that fragment key h reads: h = 16 half + 4 q + i holds the
// accumulator's column 16 half + 8 (i / 2) + 2 q + i % 2.
__device__ constexpr int permuted_key(int h) {
  return (h & ~31) + 16 * ((h >> 4) & 1) + 8 * ((h >> 1) & 1) + 2 * ((h >> 2) & 3) + (h & 1);
}

__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 selector) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
  return r;
}

// 4 x 4 bytes: on return x[j] byte i is the old x[i] byte j.
__device__ __forceinline__ void transpose4x4(u32 (&x)[4]) {
  const u32 t0 = prmt(x[0], x[1], 0x5140), t1 = prmt(x[0], x[1], 0x7362);
  const u32 u0 = prmt(x[2], x[3], 0x5140), u1 = prmt(x[2], x[3], 0x7362);
  x[0] = prmt(t0, u0, 0x5410);
  x[1] = prmt(t0, u0, 0x7632);
  x[2] = prmt(t1, u1, 0x5410);
  x[3] = prmt(t1, u1, 0x7632);
}

template <int kBlockN, int kHeadDimV>
struct VTranspose {
  static_assert(kBlockN % 32 == 0, "keys come in 32-key wgmma steps");
  static_assert(kHeadDimV % 128 == 0, "V's columns fill 128-byte panels");
  static constexpr int kTransposers = 32 * kVTransposerWarps;  // whole warps: half-warps matter below
  static constexpr int kDimBlocks = kHeadDimV / 8, kKeyBlocks = kBlockN / 8;
  static constexpr int kUnits = kDimBlocks * kKeyBlocks;  // 8 x 8-byte blocks

  // Byte address of V element (key, col) and Vt element (col, fragment key h).
  __device__ __forceinline__ static u32 v_addr(u32 v, int key, int col) {
    return v + (col >> 7) * (kBlockN * 128) + key * 128 + ((((col & 127) >> 4) ^ (key & 7)) << 4) + (col & 15);
  }
  __device__ __forceinline__ static u32 vt_addr(u32 vt, int col, int h) {
    return vt + (h >> 7) * (kHeadDimV * 128) + col * 128 + ((((h & 127) >> 4) ^ (col & 7)) << 4) + (h & 15);
  }

  // One stage, by transposer thread t (0..95). A unit is 8 V columns x 8 fragment keys: eight
  // 8-byte rows in, an 8 x 8 byte transpose in registers, eight 8-byte rows out. 8-byte accesses
  // are served per half-warp, so each half-warp takes 8 column blocks x 2 key blocks: its loads
  // read 64 bytes of each of two V rows whose swizzled chunks are disjoint. Its stores would all
  // hit one 16-byte chunk column (Vt's swizzle follows the row, and every thread writes row
  // col0 + j at step j), so lane l writes its rows rotated by l % 8: the input rows are
  // byte-rotated before the transpose, and the half-warp covers all 32 banks.
  static constexpr int kKeyPairs = kKeyBlocks / 2;
  __device__ __forceinline__ static void stage(u32 v, u32 vt, int t) {
#pragma unroll 1
    for (int u = t; u < kUnits; u += kTransposers) {
      const int l = u % 32, group = u / 32;  // 32 units: 16 column blocks x 2 key blocks
      const int rot = l & 7;
      const int col0 = 8 * (rot + 8 * (l / 16) + 16 * (group / kKeyPairs));
      const int h0 = 8 * (2 * (group % kKeyPairs) + (l / 8) % 2);
      u32 lo[2][4], hi[2][4];  // [rows 0-3 / 4-7][row]: bytes 0..3 and 4..7 after the rotation
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const u32 a = v_addr(v, permuted_key(h0 + i), col0);
        u32 x, y;
        asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(x), "=r"(y) : "r"(a));
        // Byte k of the rotated row is column col0 + (k + rot) % 8.
        if (rot & 4) {
          const u32 z = x;
          x = y;
          y = z;
        }
        const u32 sh = 8 * (rot & 3);
        asm("shf.r.wrap.b32 %0, %1, %2, %3;" : "=r"(lo[i / 4][i % 4]) : "r"(x), "r"(y), "r"(sh));
        asm("shf.r.wrap.b32 %0, %1, %2, %3;" : "=r"(hi[i / 4][i % 4]) : "r"(y), "r"(x), "r"(sh));
      }
#pragma unroll
      for (int g = 0; g < 2; ++g) {
        transpose4x4(lo[g]);
        transpose4x4(hi[g]);
      }
      // Step j: column col0 + (j + rot) % 8; keys h0..h0+3 are lo[0][j] (j < 4) or hi[0][j - 4],
      // keys h0+4..+7 the same word of the second row group.
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const u32 w0 = j < 4 ? lo[0][j & 3] : hi[0][j & 3], w1 = j < 4 ? lo[1][j & 3] : hi[1][j & 3];
        const u32 a = vt_addr(vt, col0 + ((j + rot) & 7), h0);
        asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(a), "r"(w0), "r"(w1) : "memory");
      }
    }
  }
};

}  // namespace flashjit::sm90
