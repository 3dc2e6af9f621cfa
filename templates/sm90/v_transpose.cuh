// fp8 V, transposed in shared memory. 8-bit wgmma reads its B operand K-major only, and users'
// caches hold V row-major ([keys, dv]), so the producer warpgroup's three spare warps turn each
// TMA-loaded V stage ([dv panel][key][128 bytes], or 64-byte panels for a dv of 64 or 192) into
// Vt ([key panel][dv][128 keys], 128-byte swizzled), and hand it to the consumers through their
// own full/empty barriers.
//
// The keys are permuted on the way. The consumers' probabilities come in the wgmma accumulator
// layout, where a lane of quad position q holds keys 2q, 2q+1, 8+2q, 9+2q (and 16 more) of each
// 32-key step, while an 8-bit A fragment register holds keys 4q .. 4q+3. Packing the accumulator
// as it lies and storing V's rows in the matching order (Vt key h holds V key permuted_key(h))
// gives the same sum over keys without a shuffle.
#pragma once

#include "common/types.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm90/ptx.cuh"
#include "sm90/v_transpose_map.cuh"

namespace flashjit::sm90 {

inline constexpr int kVTransposerWarps = 3;  // warps 1-3 of the producer warpgroup

// One stage by the transposer warps, a unit of 16 keys x 32 V columns (512 bytes) per warp step:
//   1. ldmatrix.x4.trans reads four 8 x 16-byte blocks of V: keys k0 + 8 (i % 2) .. +7 of the
//      16-byte chunk 2 db + i / 2 (matrix i). As b16 matrices transposed, lane l (quad position
//      q = l % 4, c = l / 4) gets of each the bytes of columns 2c, 2c + 1 in keys 2q and 2q + 1.
//   2. One prmt (__byte_perm) per pair of key halves gives a column's four keys k0 + {2q, 2q + 1, 8 + 2q,
//      9 + 2q}: the fragment keys 4q .. 4q + 3 that the probabilities' packing expects
//      (permuted_key), so no other permutation is needed.
//   3. stmatrix.x4 writes four 8 x 16-byte blocks of Vt, row c of each from the quad c. The
//      rows are V columns, addressed by lane: matrix 0 takes the quads' even columns for c < 4
//      and their odd ones above, matrix 1 the rest, so a block's eight rows are columns of
//      eight distinct residues mod 8 and hit eight distinct swizzled chunks (no bank conflict).
// Both sides' rows sit inside one 16-byte chunk of their swizzle.
template <int kBlockN, int kHeadDimV, int kVPanel>
struct VTranspose {
  static_assert(kBlockN % 32 == 0, "keys come in 32-key wgmma steps");
  static_assert((kVPanel == 128 || kVPanel == 64) && kHeadDimV % kVPanel == 0, "V's columns fill its panels");
  static constexpr int kKeyBlocks = kBlockN / 16, kColumnBlocks = kHeadDimV / 32;

  // Writes the ones rows after V's in every key panel of `stages` Vt stages (smem_regions.cuh's
  // vt_rows), once: the transposers never write there. `one4`: four ones of the element type.
  // Their first stage's proxy fence and arrival publish them with it.
  __device__ __forceinline__ static void fill_sum_rows(u32 vt, int stage_bytes, int stages, int t, u32 one4) {
    if constexpr (vt_sums_rows(kHeadDimV)) {
#pragma unroll 1
      for (int i = t; i < stages * vt_sum_chunks(kBlockN); i += 32 * kVTransposerWarps) {
        const u32 at = vt + vt_sum_fill_offset(kBlockN, kHeadDimV, stage_bytes, i);
        asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(at), "r"(one4) : "memory");
      }
    }
  }

  // Transposer thread t (0 .. 32 kVTransposerWarps - 1); its warp takes key blocks w, w + 3, ...
  // and every column block of each, so a unit's addresses are its key block's plus immediates
  // (v_transpose_map.cuh): an xor, the two matrix instructions and four prmt a unit. `v` and
  // `vt` are 1024-byte aligned.
  __device__ __forceinline__ static void stage(u32 v, u32 vt, int t) {
    const VTransposeLane l = v_transpose_lane(t & 31, kVPanel);
#pragma unroll 1
    for (int kb = t >> 5; kb < kKeyBlocks; kb += kVTransposerWarps) {
      const u32 load = v + v_transpose_load_keys(l, kb, kVPanel);
      const u32 store = vt + v_transpose_store_keys(l, kBlockN, kHeadDimV, kb);
      // A last panel of 64-byte rows (vt_row_bytes) takes the same units at half the column
      // stride; the branch is on the warp's key block, so it is uniform.
      const auto units = [&](bool half_panel) __attribute__((always_inline)) {
#pragma unroll
        for (int db = 0; db < kColumnBlocks; ++db) {
          u32 x[4];
          sm80::ldmatrix_x4_trans(x, v_transpose_load_columns(load, kBlockN, db, kVPanel));
          stmatrix_x4(store + v_transpose_store_columns(db, half_panel),
                      __byte_perm(x[0], x[1], l.select[0]), __byte_perm(x[0], x[1], l.select[1]),
                      __byte_perm(x[2], x[3], l.select[0]), __byte_perm(x[2], x[3], l.select[1]));
        }
      };
      if (vt_half_panel_block(kBlockN, kb))
        units(true);
      else
        units(false);
    }
  }
};

}  // namespace flashjit::sm90
