// Whole-tile copies between global memory and a swizzled SmemTile, by all threads of the CTA:
//   load_tile   global -> shared with cp.async (rows past `rows` are zero-filled, never read)
//   store_tile  shared -> global with 16-byte vector accesses (rows past `rows` not written)
// Panel by panel (SmemTile), consecutive threads take consecutive chunks of a panel row, so a
// warp reads whole 128-byte row segments (w = 8) and 8 consecutive threads write 128 distinct
// bytes of one shared-memory line (rows of a panel are contiguous, the swizzle permutes within).
// Row r, chunk c of the tile is element column 8c of row r in global memory; columns from
// kSplitCols on come from a second tensor (the rope part of Q or K) at column 8c - kSplitCols.
#pragma once

#include "common/element_traits.cuh"
#include "common/types.cuh"
#include "sm80/smem_regions.cuh"
#include "sm80/cp_async.cuh"
#include "sm80/smem_tile.cuh"

namespace flashjit::sm80 {

template <class E>
struct GmemRows {
  const E* ptr;  // row 0, column 0
  i64 stride;    // elements between rows
};

template <class Tile, int kThreads, int kSplitCols, int kWidth, class E>
__device__ __forceinline__ void load_panel(u32 smem, int first, GmemRows<E> src, GmemRows<E> src2,
                                           int rows, int tid) {
  static_assert(kThreads % kWidth == 0, "a thread keeps its chunk column within a panel");
  constexpr int kRowsPerPass = kThreads / kWidth;
  constexpr int kPasses = ceil_div(Tile::kRowCount, kRowsPerPass);
  const typename Tile::Panel p = Tile::panel(first);
  const int j = tid % kWidth;
  const int c = first + j;  // this thread's chunk column
  // Which tensor the column comes from; a compile-time choice unless the panel straddles the
  // rope boundary.
  constexpr int kChunk = ElementTraits<E>::kChunkElems;
  static_assert(sizeof(E) == kSmemElementBytes, "cp.async copies stored bytes: inputs of the operand type");
  const bool second = kSplitCols < Tile::kColCount && c * kChunk >= kSplitCols;
  const i64 stride = second ? src2.stride : src.stride;
  // A running pointer (one 64-bit add per pass) rather than row * stride per pass: per-pass
  // offsets would be invariants of the caller's KV loop and hold registers through it.
  const E* g = (second ? src2.ptr + (c * kChunk - kSplitCols) : src.ptr + c * kChunk) + (tid / kWidth) * stride;
  const i64 step = kRowsPerPass * stride;
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    const int r = tid / kWidth + pass * kRowsPerPass;
    if (Tile::kRowCount % kRowsPerPass != 0 && r >= Tile::kRowCount) break;
    // Rows past the end are zero-filled: with src-size 0 the (out of range) address is never
    // dereferenced, as for CUTLASS's zfill copies.
    cp_async_16(smem + u32(p.base) + Tile::in_panel(kWidth, r, j), g, r < rows);
    g += step;
  }
}

// Issues (does not commit) the copies of a whole tile whose row 0 is src's (and src2's) row 0,
// of which the first `rows` exist (may be <= 0; the others are zero-filled).
template <class Tile, int kThreads, int kSplitCols, class E>
__device__ __forceinline__ void load_tile(u32 smem, GmemRows<E> src, GmemRows<E> src2, int rows,
                                          int tid) {
#pragma unroll
  for (int pp = 0; pp < Tile::kFullPanels; ++pp)
    load_panel<Tile, kThreads, kSplitCols, 8>(smem, pp * 8, src, src2, rows, tid);
  if constexpr (Tile::kHas4)
    load_panel<Tile, kThreads, kSplitCols, 4>(smem, Tile::kFullPanels * 8, src, src2, rows, tid);
  if constexpr (Tile::kHas2)
    load_panel<Tile, kThreads, kSplitCols, 2>(smem, Tile::kFullPanels * 8 + (Tile::kHas4 ? 4 : 0),
                                              src, src2, rows, tid);
}

// As load_panel, with each row's address from the KV policy: row_ptr(r) is row r's column 0
// (of the second tensor: row_ptr2), or null for a row to zero-fill. Paged caches load this way.
template <class Tile, int kThreads, int kSplitCols, int kWidth, class E, class RowPtr>
__device__ __forceinline__ void gather_panel(u32 smem, int first, const RowPtr& row_ptr, const RowPtr& row_ptr2,
                                             const E* any, int tid) {
  static_assert(kThreads % kWidth == 0, "a thread keeps its chunk column within a panel");
  constexpr int kChunk = ElementTraits<E>::kChunkElems;
  constexpr int kRowsPerPass = kThreads / kWidth;
  constexpr int kPasses = ceil_div(Tile::kRowCount, kRowsPerPass);
  const typename Tile::Panel p = Tile::panel(first);
  const int j = tid % kWidth;
  const int c = first + j;
  const bool second = kSplitCols < Tile::kColCount && c * kChunk >= kSplitCols;
  const int col = second ? c * kChunk - kSplitCols : c * kChunk;
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    const int r = tid / kWidth + pass * kRowsPerPass;
    if (Tile::kRowCount % kRowsPerPass != 0 && r >= Tile::kRowCount) break;
    const E* row = second ? row_ptr2(r) : row_ptr(r);
    // A zero-filled row still names a valid address (`any`), though none is read.
    cp_async_16(smem + u32(p.base) + Tile::in_panel(kWidth, r, j), row ? row + col : any, row != nullptr);
  }
}

template <class Tile, int kThreads, int kSplitCols, class E, class RowPtr>
__device__ __forceinline__ void gather_tile(u32 smem, const RowPtr& row_ptr, const RowPtr& row_ptr2, const E* any,
                                            int tid) {
#pragma unroll
  for (int pp = 0; pp < Tile::kFullPanels; ++pp)
    gather_panel<Tile, kThreads, kSplitCols, 8, E>(smem, pp * 8, row_ptr, row_ptr2, any, tid);
  if constexpr (Tile::kHas4)
    gather_panel<Tile, kThreads, kSplitCols, 4, E>(smem, Tile::kFullPanels * 8, row_ptr, row_ptr2, any, tid);
  if constexpr (Tile::kHas2)
    gather_panel<Tile, kThreads, kSplitCols, 2, E>(smem, Tile::kFullPanels * 8 + (Tile::kHas4 ? 4 : 0), row_ptr,
                                                   row_ptr2, any, tid);
}

// ---- converting loads (fp8 inputs, quantisation scales) -------------------------------------
// Synchronous: each 16-byte chunk of the tile (8 elements of the operand type CE) is read from
// global memory in the source's own type, widened through float, multiplied by its row's scale
// (dequantisation) and stored. Correct on every GPU from sm_80 on; the cp.async path above is
// the fast one for inputs already in the operand type.

template <class Src>
struct RowRef {
  const Src* ptr;  // the row's column 0; null: the row is zero-filled
  float scale;
};

template <class CE, class Src>
__device__ __forceinline__ void convert_chunk(u32 smem, const Src* src, float scale) {
  u32 w[4] = {0u, 0u, 0u, 0u};
  if (src) {
    float f[8];
    if constexpr (sizeof(Src) == 1) {
      const uint2 raw = *reinterpret_cast<const uint2*>(src);
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = to_float(Src{u8(((i < 4 ? raw.x : raw.y) >> (8 * (i % 4))) & 0xff)});
    } else {
      static_assert(sizeof(Src) == 2, "8- or 16-bit inputs");
      const uint4 raw = *reinterpret_cast<const uint4*>(src);
      const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = to_float(Src{u16((words[i / 2] >> (16 * (i % 2))) & 0xffff)});
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = pack2<CE>(f[2 * i] * scale, f[2 * i + 1] * scale);
  }
  st_shared_16(smem, w[0], w[1], w[2], w[3]);
}

template <class Tile, int kThreads, int kSplitCols, int kWidth, class CE, class RowA, class RowB>
__device__ __forceinline__ void convert_panel(u32 smem, int first, const RowA& rows_a, const RowB& rows_b, int tid) {
  static_assert(kThreads % kWidth == 0, "a thread keeps its chunk column within a panel");
  constexpr int kRowsPerPass = kThreads / kWidth;
  constexpr int kPasses = ceil_div(Tile::kRowCount, kRowsPerPass);
  const typename Tile::Panel p = Tile::panel(first);
  const int j = tid % kWidth;
  const int c = first + j;
  const bool second = kSplitCols < Tile::kColCount && c * 8 >= kSplitCols;
  const int col = second ? c * 8 - kSplitCols : c * 8;
#pragma unroll 1
  for (int pass = 0; pass < kPasses; ++pass) {
    const int r = tid / kWidth + pass * kRowsPerPass;
    if (Tile::kRowCount % kRowsPerPass != 0 && r >= Tile::kRowCount) break;
    const u32 dst = smem + u32(p.base) + Tile::in_panel(kWidth, r, j);
    if (second) {
      const auto ref = rows_b(r);
      convert_chunk<CE>(dst, ref.ptr ? ref.ptr + col : nullptr, ref.scale);
    } else {
      const auto ref = rows_a(r);
      convert_chunk<CE>(dst, ref.ptr ? ref.ptr + col : nullptr, ref.scale);
    }
  }
}

// A whole tile: columns before kSplitCols from rows_a, the rest (the rope part) from rows_b.
template <class Tile, int kThreads, int kSplitCols, class CE, class RowA, class RowB>
__device__ __forceinline__ void convert_tile(u32 smem, const RowA& rows_a, const RowB& rows_b, int tid) {
#pragma unroll
  for (int pp = 0; pp < Tile::kFullPanels; ++pp)
    convert_panel<Tile, kThreads, kSplitCols, 8, CE>(smem, pp * 8, rows_a, rows_b, tid);
  if constexpr (Tile::kHas4)
    convert_panel<Tile, kThreads, kSplitCols, 4, CE>(smem, Tile::kFullPanels * 8, rows_a, rows_b, tid);
  if constexpr (Tile::kHas2)
    convert_panel<Tile, kThreads, kSplitCols, 2, CE>(smem, Tile::kFullPanels * 8 + (Tile::kHas4 ? 4 : 0), rows_a,
                                                     rows_b, tid);
}

template <class Tile, int kThreads, int kWidth, class E>
__device__ __forceinline__ void store_panel(u32 smem, int first, E* dst, i64 stride, int rows,
                                            int tid) {
  static_assert(kThreads % kWidth == 0, "a thread keeps its chunk column within a panel");
  constexpr int kRowsPerPass = kThreads / kWidth;
  constexpr int kPasses = ceil_div(Tile::kRowCount, kRowsPerPass);
  const typename Tile::Panel p = Tile::panel(first);
  const int j = tid % kWidth;
  static_assert(sizeof(E) == kSmemElementBytes, "stores copy the staged bytes: outputs of the operand type");
  E* col = dst + (first + j) * ElementTraits<E>::kChunkElems;
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    const int r = tid / kWidth + pass * kRowsPerPass;
    if (Tile::kRowCount % kRowsPerPass != 0 && r >= Tile::kRowCount) break;
    if (r < rows) {
      u32 x, y, z, w;
      ld_shared_16(smem + u32(p.base) + Tile::in_panel(kWidth, r, j), x, y, z, w);
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(col + r * stride), "r"(x),
                   "r"(y), "r"(z), "r"(w)
                   : "memory");
    }
  }
}

// Writes rows [0, rows) of a tile to global memory (row 0 at dst, `stride` elements apart).
template <class Tile, int kThreads, class E>
__device__ __forceinline__ void store_tile(u32 smem, E* dst, i64 stride, int rows, int tid) {
#pragma unroll
  for (int pp = 0; pp < Tile::kFullPanels; ++pp)
    store_panel<Tile, kThreads, 8>(smem, pp * 8, dst, stride, rows, tid);
  if constexpr (Tile::kHas4)
    store_panel<Tile, kThreads, 4>(smem, Tile::kFullPanels * 8, dst, stride, rows, tid);
  if constexpr (Tile::kHas2)
    store_panel<Tile, kThreads, 2>(smem, Tile::kFullPanels * 8 + (Tile::kHas4 ? 4 : 0), dst,
                                   stride, rows, tid);
}

}  // namespace flashjit::sm80
