// The warp-level pieces of the mma.sync kernels: S = Q K^T and O += P V for a warp's 16-row
// m-tiles from swizzled shared-memory tiles (smem_tile.cuh), and the elementwise mask of S.
// Used by the sm80 forward kernel and the decode family.
#pragma once

#include "common/mask.cuh"
#include "common/types.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/smem_tile.cuh"

namespace flashjit::sm80 {

// S[mi][nt] = Q(rows of this warp) K^T over the whole qk head dim.
template <class E, class QTile, class KTile, int kMT, int kNT>
__device__ __forceinline__ void gemm_qk(float (&s)[kMT][kNT][4], const LanePart& lq,
                                        const LanePart& lk) {
#pragma unroll
  for (int ks = 0; ks < QTile::kColCount / 16; ++ks) {
    u32 a[kMT][4];
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) ldmatrix_x4(a[mi], QTile::ldm(lq, 2 * ks, 16 * mi));
#pragma unroll
    for (int np = 0; np < kNT / 2; ++np) {
      // Matrices: (keys 16np+0..7, k 0..7), (same keys, k 8..15), (keys +8..15, k 0..7), (.., k 8..15)
      // = b0, b1 of n-tile 2np, then b0, b1 of n-tile 2np + 1.
      u32 b[4];
      ldmatrix_x4(b, KTile::ldm(lk, 2 * ks, 16 * np));
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
        if (ks == 0) {  // S starts at zero: no accumulator registers live before the first mma
          mma_16816_zero_c<E>(s[mi][2 * np], a[mi], b[0], b[1]);
          mma_16816_zero_c<E>(s[mi][2 * np + 1], a[mi], b[2], b[3]);
        } else {
          mma_16816<E>(s[mi][2 * np], a[mi], b[0], b[1]);
          mma_16816<E>(s[mi][2 * np + 1], a[mi], b[2], b[3]);
        }
      }
    }
  }
}

// O[mi][dt] += P V, P given as packed A fragments: p[mi][kk] covers keys 16kk .. 16kk + 15.
template <class E, class VTile, int kMT, int kDT, int kKSteps>
__device__ __forceinline__ void gemm_pv(float (&o)[kMT][kDT][4], const u32 (&p)[kMT][kKSteps][4],
                                        const LanePart& lv) {
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk)
#pragma unroll
    for (int dp = 0; dp < kDT / 2; ++dp) {
      // .trans matrices: (keys 16kk+0..7, d chunk 2dp), (keys +8..15, chunk 2dp),
      // (keys 0..7, chunk 2dp+1), (keys 8..15, chunk 2dp+1) = b0, b1 of d-tile 2dp, then 2dp+1.
      u32 b[4];
      ldmatrix_x4_trans(b, VTile::ldm(lv, 2 * dp, 16 * kk));
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
        mma_16816<E>(o[mi][2 * dp], p[mi][kk], b[0], b[1]);
        mma_16816<E>(o[mi][2 * dp + 1], p[mi][kk], b[2], b[3]);
      }
    }
}

// Sets S to -inf where key column n0 + c is not visible from its query row. `row0` is the
// sequence row of this lane's first row (m-tile 0, fragment row g); `t` the lane's quad index.
template <MaskKind kKind, int kMT, int kNT>
__device__ __forceinline__ void apply_mask(float (&s)[kMT][kNT][4], const AttentionMask<kKind>& mask,
                                           int row0, int n0, int t) {
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 16 * mi + 8 * h;
      const int lo = mask.col_lo(row) - n0;  // visible columns of this tile: [lo, hi)
      const int hi = mask.col_hi(row) - n0;
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = 8 * j + 2 * t + e;
          if (c < lo || c >= hi) s[mi][j][2 * h + e] = neg_inf();
        }
    }
}

}  // namespace flashjit::sm80
