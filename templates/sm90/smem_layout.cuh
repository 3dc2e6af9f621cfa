// Shared-memory layout of the sm90 forward kernel, every offset a compile-time constant (the
// seeds' SM100AttentionSMem idea). Tiles are stored as the TMA box {64 columns, rows, panels}
// writes them with 128-byte swizzle: [panel][row][64 elements], each panel rows x 128 bytes.
//   Q     kQStages x BM x dqk (two: the next tile's Q loads while this tile runs)
//   K     kStages x BN x dqk
//   V     kStages x BN x dv
//   O     (kTmaStoreO) one 64 x dv slab per consumer warpgroup, the source of its TMA store
//   mbarriers: Q full/empty, K full/empty and V full/empty per stage, and the dynamic
//   scheduler's tile ring (full/empty per slot); then its two tile-index slots
#pragma once

#include "common/types.cuh"

namespace flashjit::sm90 {

template <class T>
struct SmemLayout {
  static constexpr int kElementBytes = sizeof(typename T::Element);
  static constexpr int kPanelElems = 128 / kElementBytes;  // 64 columns of 16-bit elements
  static constexpr int kQPanels = T::kHeadDimQK / kPanelElems;
  static constexpr int kVPanels = T::kHeadDimV / kPanelElems;

  __host__ __device__ static constexpr int align1k(int x) { return (x + 1023) / 1024 * 1024; }

  static constexpr int kQBytes = T::kBlockM * T::kHeadDimQK * kElementBytes;
  static constexpr int kKStageBytes = T::kBlockN * T::kHeadDimQK * kElementBytes;
  static constexpr int kVStageBytes = T::kBlockN * T::kHeadDimV * kElementBytes;

  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = T::kQStages * align1k(kQBytes);
  static constexpr int kVOffset = kKOffset + T::kStages * align1k(kKStageBytes);
  static constexpr int kOSlabBytes = 64 * T::kHeadDimV * int(sizeof(typename T::OutElement));
  static constexpr int kOOffset = kVOffset + T::kStages * align1k(kVStageBytes);
  static constexpr int kBarrierOffset = kOOffset + (T::kTmaStoreO ? T::kConsumerWarpgroups * kOSlabBytes : 0);
  static constexpr int kBarrierBytes = 1024;
  static constexpr int kTotalBytes = kBarrierOffset + kBarrierBytes;

  // mbarrier indices (8 bytes each) inside the barrier region.
  static constexpr int kQFull = 0;   // + Q stage
  static constexpr int kQEmpty = 2;  // + Q stage
  static constexpr int kKFull = 4;
  static constexpr int kKEmpty = kKFull + T::kStages;
  static constexpr int kVFull = kKEmpty + T::kStages;
  static constexpr int kVEmpty = kVFull + T::kStages;
  static constexpr int kTileFull = kVEmpty + T::kStages;
  static constexpr int kTileEmpty = kTileFull + 2;
  static constexpr int kNumBarriers = kTileEmpty + 2;
  static constexpr int kTileSlotOffset = kBarrierOffset + 512;

  static_assert(T::kQStages == 1 || T::kQStages == 2, "one or two Q buffers");
  static_assert(kTotalBytes == T::kSmemBytes, "host and device disagree on the shared-memory size");
  static_assert(kNumBarriers * 8 <= 512, "too many mbarriers");
  static_assert(T::kHeadDimQK % kPanelElems == 0 && T::kHeadDimV % kPanelElems == 0,
                "head dims must fill whole 128-byte panels");

  u32 base;  // shared-window address of the dynamic shared memory (1 KB aligned)

  __device__ __forceinline__ u32 q(int stage) const { return base + kQOffset + stage * align1k(kQBytes); }
  __device__ __forceinline__ u32 k(int stage) const { return base + kKOffset + stage * align1k(kKStageBytes); }
  __device__ __forceinline__ u32 v(int stage) const { return base + kVOffset + stage * align1k(kVStageBytes); }
  // Consumer warpgroup wg's O slab: [dv / 64 panels][64 rows][64 columns], 128-byte swizzled.
  __device__ __forceinline__ u32 o_slab(int wg) const { return base + kOOffset + wg * kOSlabBytes; }
  __device__ __forceinline__ u32 barrier(int index) const { return base + kBarrierOffset + 8 * index; }
  __device__ __forceinline__ u32 tile_slot(int i) const { return base + kTileSlotOffset + 4 * i; }
};

}  // namespace flashjit::sm90
