// The shared-memory layout of one [kRows x kCols] tile of 16-bit elements (Q, K, V or O), XOR-
// swizzled so that ldmatrix reads and cp.async writes are free of bank conflicts for any head dim
// that is a multiple of 16.
//
// A row holds kCols / 8 sixteen-byte chunks. The chunk columns are split into panels of 8 chunks
// (128-byte rows), then at most one panel of 4 and one of 2 for the remainder (head dims 80, 96,
// 112, 48, ...). Each panel is stored on its own, row after row ([kRows][width] chunks), and
// chunk j of row r sits at position j ^ swz(r) of its row, with swz(r) = (r / (8 / w)) % w:
//   w = 8: 1 row per 128-byte line, swz = r % 8
//   w = 4: 2 rows per line,        swz = (r / 2) % 4
//   w = 2: 4 rows per line,        swz = (r / 4) % 2
// An ldmatrix phase reads the same chunk column of 8 consecutive rows: they fall on
// (r % (8/w), swz(r)) = all 8 combinations, i.e. 8 distinct 16-byte bank groups. swz depends
// only on r % 8, so row offsets that are multiples of 8 never change the swizzle.
//
// (Measured on an H200 against the other conflict-free layout, rows padded by one chunk, whose
// addressing is purely additive and needs fewer registers: padding was 9% slower at d128 and 15%
// at d256.)
#pragma once

#include "common/types.cuh"
#include "sm80/smem_regions.cuh"

namespace flashjit::sm80 {

// Per-lane ldmatrix addresses: for a lane that reads row `row` and chunk parity `lc` (0 or 1) of
// a tile at shared address `base` (128-byte aligned), one address per panel width. Only the
// widths a tile has are ever read, so the others cost nothing. See SmemTile::ldm.
struct LanePart {
  u32 w8, w4, w2;

  __host__ __device__ static constexpr u32 part(int w, int row, int lc) {
    return u32(row * w * 16) + (u32(lc ^ ((row / (8 / w)) % w)) << 4);
  }
  __host__ __device__ static constexpr LanePart make(u32 base, int row, int lc) {
    return LanePart{base + part(8, row, lc), base + part(4, row, lc), base + part(2, row, lc)};
  }
  __host__ __device__ constexpr u32 get(int w) const { return w == 8 ? w8 : w == 4 ? w4 : w2; }
  // The same lane in a tile `bytes` further on (a multiple of 128: another buffer stage).
  __host__ __device__ constexpr LanePart plus(u32 bytes) const {
    return LanePart{w8 + bytes, w4 + bytes, w2 + bytes};
  }
};

template <int kRows, int kCols>
struct SmemTile {
  static_assert(kCols % 16 == 0, "tile columns must be a multiple of 16 elements");
  static_assert(kRows % 8 == 0, "tile rows must be a multiple of 8");
  static constexpr int kRowCount = kRows;
  static constexpr int kColCount = kCols;
  static constexpr int kChunks = kCols / 8;  // 16-byte chunks per row (always even)
  static constexpr int kFullPanels = kChunks / 8;
  static constexpr bool kHas4 = (kChunks & 4) != 0;
  static constexpr bool kHas2 = (kChunks & 2) != 0;
  static constexpr int kBytes = kRows * kCols * kSmemElementBytes;  // a multiple of 256: tiles stay 128-aligned

  struct Panel {
    int first;  // first chunk column of the panel
    int width;  // chunks per row: 8, 4 or 2
    int base;   // byte offset of the panel in the tile (a multiple of 128)
  };

  __host__ __device__ static constexpr Panel panel(int c) {
    if (c < kFullPanels * 8) return Panel{c / 8 * 8, 8, c / 8 * kRows * 128};
    const int base = kFullPanels * kRows * 128;
    if (kHas4 && c < kFullPanels * 8 + 4) return Panel{kFullPanels * 8, 4, base};
    return Panel{kFullPanels * 8 + (kHas4 ? 4 : 0), 2, base + (kHas4 ? kRows * 64 : 0)};
  }

  __host__ __device__ static constexpr int swizzle(int w, int row) { return (row / (8 / w)) % w; }

  // Byte offset of chunk j (0 <= j < w) of row `row` inside a panel of width w.
  __host__ __device__ static constexpr u32 in_panel(int w, int row, int j) {
    return u32(row * w * 16) + (u32(j ^ swizzle(w, row)) << 4);
  }

  // Byte offset of chunk c (columns 8c .. 8c + 7) of row `row`: the definition every access
  // (cp.async, ldmatrix, the O epilogue) follows.
  __host__ __device__ static constexpr u32 offset(int row, int c) {
    const Panel p = panel(c);
    return u32(p.base) + in_panel(p.width, row, c - p.first);
  }

  // ldmatrix address of chunk c0 + lc of row `row` + row_offset, where lp = LanePart::make(base,
  // row, lc), c0 is even and row_offset a multiple of 8 (compile-time constants once the caller's
  // loops are unrolled). Equals base + offset(row + row_offset, c0 + lc): with jb = c0 - first
  // (even) and lc in {0, 1}, (jb + lc) ^ s = jb ^ (lc ^ s), and base + row * w * 16 has zero bits
  // where (lc ^ s) << 4 lives, so XOR-ing jb << 4 into the lane address only touches chunk bits.
  // Costs one LOP per distinct jb (at most 4 per tile); the rest folds into the immediate.
  __device__ __forceinline__ static u32 ldm(const LanePart& lp, int c0, int row_offset) {
    const Panel p = panel(c0);
    return (lp.get(p.width) ^ (u32(c0 - p.first) << 4)) + u32(p.base + row_offset * p.width * 16);
  }
};

// Four words from shared-memory address `smem` (16-byte aligned): one 16-byte chunk of a tile.
__device__ __forceinline__ void ld_shared_16(u32 smem, u32& w0, u32& w1, u32& w2, u32& w3) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "r"(smem)
               : "memory");
}

// Four words to shared-memory address `smem` (16-byte aligned): one 16-byte chunk of a tile.
__device__ __forceinline__ void st_shared_16(u32 smem, u32 w0, u32 w1, u32 w2, u32 w3) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(smem), "r"(w0), "r"(w1), "r"(w2), "r"(w3)
               : "memory");
}

}  // namespace flashjit::sm80
