// A thread's share of a key-tile gather where the CTA's threads cover whole rows at once:
// thread tid copies chunk c = tid % kChunks of rows r0 + j * kStep, r0 = tid / kChunks < kStep,
// kStep = kThreads / kChunks (the mapping of the plain loops, i = tid + j * kThreads). In whole
// 128-byte panels chunk c of row r sits at c ^ (r % 8) (sm80/smem_tile.cuh). With kStep a power
// of two, r0 and j * kStep share no bits, so row r0 + j * kStep's swizzle is r0's XOR
// (j * kStep) % 8, a constant of the unrolled loop: every copy's shared address is the thread's
// first one plus a constant, behind at most one XOR, and only each row's global offset is
// computed per copy.
#pragma once

#include "common/types.cuh"

namespace flashjit::decode {

template <class Tile, int kThreads, int kChunks, int kRows>
struct StridedRows {
  static constexpr int kStep = kChunks > 0 ? kThreads / kChunks : 1;
  static constexpr bool kApplies = Tile::kChunks % 8 == 0 && kChunks > 0 && kThreads % (kChunks > 0 ? kChunks : 1) == 0 &&
                                   kStep > 0 && (kStep & (kStep - 1)) == 0 && kRows % kStep == 0;
  static constexpr int kCopies = kApplies ? kRows / kStep : 0;

  __device__ __forceinline__ static int row(int tid, int j) { return tid / kChunks + j * kStep; }
  __device__ __forceinline__ static int chunk(int tid) { return tid % kChunks; }
  // The shared address of this thread's first copy into the tile at `tile`, whose chunk
  // columns start at `first_chunk`.
  __device__ __forceinline__ static u32 first(u32 tile, int tid, int first_chunk) {
    return tile + Tile::offset(tid / kChunks, first_chunk + tid % kChunks);
  }
  // Copy j's: rows j * kStep further on, the chunk bits (4-6) XOR-ed by those rows' swizzle.
  __device__ __forceinline__ static u32 at(u32 first_address, int j) {
    const u32 rows = u32(j * kStep);
    return (first_address ^ ((rows % 8) << 4)) + rows * 128;
  }
};

}  // namespace flashjit::decode
