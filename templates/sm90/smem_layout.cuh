// Shared-memory layout of the sm90 forward kernel, every offset a compile-time constant (the
// seeds' SM100AttentionSMem idea), taken from smem_regions.cuh, which the generator sizes tiles
// with. Tiles are stored as the TMA box {panel columns, rows, panels} writes them, swizzled:
// [panel][row][128 bytes], or [panel][row][64 bytes] for fp8 rows of 64 or 192 columns
// (common/swizzle_panels.cuh).
//   mbarriers: Q full/empty, K full/empty and V full/empty per stage, the dynamic scheduler's
//   tile ring (full/empty per slot), and with fp8 the transposed V's full/empty per stage; then
//   the scheduler's two tile-index slots and, per V stage, the producer's closing flag
#pragma once

#include "common/element_traits.cuh"
#include "common/types.cuh"
#include "sm90/smem_regions.cuh"

namespace flashjit::sm90 {

template <class T>
struct SmemLayout {
  using Traits = ElementTraits<typename T::Element>;
  static constexpr int kElementBytes = Traits::kBytes;
  // 8-bit wgmma reads B K-major only: V is transposed in shared memory (Vt) by the producer
  // warpgroup's spare warps.
  static constexpr bool kTransposeV = Traits::kBytes == 1;

  static constexpr SmemRegions kRegions = smem_regions(
      {T::kBlockM, T::kBlockN, T::kHeadDimQK, T::kHeadDimV, kElementBytes, int(sizeof(typename T::OutElement)),
       T::kStages, T::kQStages, T::kTmaStoreO ? T::kConsumerWarpgroups : 0, kTransposeV, T::kHeadDimRope,
       int(sizeof(typename T::RopeElement)), T::kKScale == ScaleKind::kPerToken});
  static constexpr int kOSlabBytes = kRegions.o_slab_bytes;
  static constexpr int kTotalBytes = kRegions.total;

  // mbarrier indices (8 bytes each) inside the barrier region.
  static constexpr int kQFull = 0;   // + Q stage
  static constexpr int kQEmpty = 2;  // + Q stage
  static constexpr int kKFull = 4;
  static constexpr int kKEmpty = kKFull + T::kStages;
  static constexpr int kVFull = kKEmpty + T::kStages;
  static constexpr int kVEmpty = kVFull + T::kStages;
  static constexpr int kTileFull = kVEmpty + T::kStages;
  static constexpr int kTileEmpty = kTileFull + 2;
  static constexpr int kVtFull = kTileEmpty + 2;
  static constexpr int kVtEmpty = kVtFull + T::kStages;
  static constexpr int kNumBarriers = kVtEmpty + T::kStages;

  static_assert(T::kQStages == 1 || T::kQStages == 2, "one or two Q buffers");
  static_assert(kTotalBytes == T::kSmemBytes, "host and device disagree on the shared-memory size");
  static_assert(kNumBarriers * 8 <= kRegions.tile_slot_offset - kRegions.barrier_offset, "too many mbarriers");
  static_assert(4 * (2 + T::kStages) <= kRegions.total - kRegions.tile_slot_offset, "tile slots and closing flags");
  static_assert((T::kHeadDimQK - T::kHeadDimRope) * kElementBytes % 64 == 0 && T::kHeadDimRope % 64 == 0 &&
                    T::kHeadDimV * kElementBytes % 64 == 0,
                "rows of whole swizzled panels (common/swizzle_panels.cuh)");

  u32 base;  // shared-window address of the dynamic shared memory (1 KB aligned)

  __device__ __forceinline__ u32 q(int stage) const { return base + kRegions.q_offset + stage * kRegions.q_stage_bytes; }
  __device__ __forceinline__ u32 k(int stage) const { return base + kRegions.k_offset + stage * kRegions.k_stage_bytes; }
  __device__ __forceinline__ u32 v(int stage) const { return base + kRegions.v_offset + stage * kRegions.v_stage_bytes; }
  // Transposed V of a stage: [key panel][dv rows][128 keys], 128-byte swizzled (fp8 only).
  __device__ __forceinline__ u32 vt(int stage) const { return base + kRegions.vt_offset + stage * kRegions.vt_stage_bytes; }
  // Consumer warpgroup wg's O slab: [dv / 64 panels][64 rows][64 columns], 128-byte swizzled.
  __device__ __forceinline__ u32 o_slab(int wg) const { return base + kRegions.o_offset + wg * kOSlabBytes; }
  // Per-token K scales of a K stage's keys (fp32, BN).
  __device__ __forceinline__ u32 key_scales(int stage) const {
    return base + kRegions.key_scale_offset + stage * (T::kBlockN * 4);
  }
  __device__ __forceinline__ const float* key_scales_generic(int stage) const {
    return static_cast<const float*>(__cvta_shared_to_generic(key_scales(stage)));
  }
  __device__ __forceinline__ u32 barrier(int index) const { return base + kRegions.barrier_offset + 8 * index; }
  __device__ __forceinline__ u32 tile_slot(int i) const { return base + kRegions.tile_slot_offset + 4 * i; }
  // Per V stage: set by the producer for its closing, empty fill (fp8: ends the V transposers' loop).
  __device__ __forceinline__ u32 v_closing_flag(int stage) const { return tile_slot(2 + stage); }
};

}  // namespace flashjit::sm90
