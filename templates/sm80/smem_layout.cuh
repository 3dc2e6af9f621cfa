// Where each region of the sm80 kernel's dynamic shared memory starts (compile-time offsets from
// smem_regions.cuh, which the generator sizes tiles with), and the swizzled tile types that live
// there.
#pragma once

#include "common/types.cuh"
#include "sm80/smem_regions.cuh"
#include "sm80/smem_tile.cuh"

namespace flashjit::sm80 {

template <class T>
struct SmemLayout {
  using QTile = SmemTile<T::kBlockM, T::kHeadDimQK>;
  using KTile = SmemTile<T::kBlockN, T::kHeadDimQK>;
  using VTile = SmemTile<T::kBlockN, T::kHeadDimV>;
  using OTile = SmemTile<T::kBlockM, T::kHeadDimV>;

  static constexpr SmemRegions kRegions =
      smem_regions({T::kBlockM, T::kBlockN, T::kHeadDimQK, T::kHeadDimV, T::kNumWarps, T::kStages});
  static constexpr int kQ = kRegions.q_offset;
  static constexpr int kK = kRegions.k_offset;
  static constexpr int kV = kRegions.v_offset;
  static constexpr int kStats = kRegions.stats_offset;
  // 32 rows per warp: per row 4 lanes x fp32 partial sum (see softmax.cuh); else none.
  static constexpr bool kSumsInSmem = kRegions.stats_bytes > 0;
  static constexpr int kStatsBytes = kRegions.stats_bytes;
  static constexpr int kO = kRegions.o_offset;
  static constexpr int kBytes = kRegions.total;

  __device__ __forceinline__ static u32 k_stage(int s) { return u32(kK + s * KTile::kBytes); }
  __device__ __forceinline__ static u32 v_stage(int s) { return u32(kV + s * VTile::kBytes); }

  static_assert(KTile::kBytes == kRegions.k_stage_bytes && VTile::kBytes == kRegions.v_stage_bytes &&
                    QTile::kBytes == kK - kQ && OTile::kBytes == kRegions.o_bytes,
                "tile sizes agree with the region arithmetic");
  static_assert(kSumsInSmem == (T::kBlockM / T::kNumWarps == 32), "sums in shared memory for 32-row warps");
  // Every tile starts 128-byte aligned, so the swizzle's XOR never carries into the base.
  static_assert(QTile::kBytes % 128 == 0 && KTile::kBytes % 128 == 0 && VTile::kBytes % 128 == 0,
                "shared-memory tiles must stay 128-byte aligned");
};

}  // namespace flashjit::sm80
