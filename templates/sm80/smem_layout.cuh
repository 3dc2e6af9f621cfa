// Where each region of the sm80 kernel's dynamic shared memory starts (compile-time offsets):
//   Q                 kBlockM x kHeadDimQK
//   K[kStages]        kBlockN x kHeadDimQK each
//   V[kStages]        kBlockN x kHeadDimV each
//   softmax sums      32-row warps: each lane's running sums (softmax.cuh), 16 B per row
//   O (epilogue)      kBlockM x kHeadDimV, from 0 over Q/K/V/stats once the stats are read
// The host's smem formula (generator/family_sm80.cpp) computes the same total.
#pragma once

#include "common/types.cuh"
#include "sm80/smem_tile.cuh"

namespace flashjit::sm80 {

template <class T>
struct SmemLayout {
  using QTile = SmemTile<T::kBlockM, T::kHeadDimQK>;
  using KTile = SmemTile<T::kBlockN, T::kHeadDimQK>;
  using VTile = SmemTile<T::kBlockN, T::kHeadDimV>;
  using OTile = SmemTile<T::kBlockM, T::kHeadDimV>;

  static constexpr int kQ = 0;
  static constexpr int kK = kQ + QTile::kBytes;
  static constexpr int kV = kK + T::kStages * KTile::kBytes;
  static constexpr int kMainLoopEnd = kV + T::kStages * VTile::kBytes;
  static constexpr int kStats = kMainLoopEnd;
  // 32 rows per warp: per row 4 lanes x fp32 partial sum (see softmax.cuh); else none.
  static constexpr bool kSumsInSmem = T::kBlockM / T::kNumWarps == 32;
  static constexpr int kStatsBytes = kSumsInSmem ? T::kBlockM * 16 : 0;
  static constexpr int kO = 0;
  static constexpr int kBytes = cmax(kStats + kStatsBytes, kO + OTile::kBytes);

  __device__ __forceinline__ static u32 k_stage(int s) { return u32(kK + s * KTile::kBytes); }
  __device__ __forceinline__ static u32 v_stage(int s) { return u32(kV + s * VTile::kBytes); }

  // Every tile starts 128-byte aligned, so the swizzle's XOR never carries into the base.
  static_assert(QTile::kBytes % 128 == 0 && KTile::kBytes % 128 == 0 && VTile::kBytes % 128 == 0,
                "shared-memory tiles must stay 128-byte aligned");
};

}  // namespace flashjit::sm80
