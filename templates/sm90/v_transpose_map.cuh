// Where the fp8 V transposers (v_transpose.cuh) read and write, as plain constexpr arithmetic
// that the kernel and a host test (tests/cpu/v_transpose_test.cpp) share, like smem_regions.cuh.
// A warp step moves a unit of 16 keys x 32 V columns: lane l addresses row l % 8 of matrix l / 8
// of a transposing ldmatrix.x4 (V rows) and of an stmatrix.x4 (Vt rows), and packs its four
// registers with two prmt selectors.
#pragma once

#include "common/host_device.cuh"
#include "common/swizzle_panels.cuh"
#include "sm90/smem_regions.cuh"

namespace flashjit::sm90 {

// The V key (within a 32-key step) that fragment key h reads: h = 16 half + 4 q + i holds the
// accumulator's column 16 half + 8 (i / 2) + 2 q + i % 2.
FLASHJIT_HOST_DEVICE constexpr int permuted_key(int h) {
  return (h & ~31) + 16 * ((h >> 4) & 1) + 8 * ((h >> 1) & 1) + 2 * ((h >> 2) & 3) + (h & 1);
}

// Byte offset of V element (key, col) in a stage as TMA writes it, in panels of `panel` bytes
// (128, or 64 for a dv of 64 or 192): [col / panel][key][panel bytes], swizzled
// (common/swizzle_panels.cuh).
FLASHJIT_HOST_DEVICE constexpr int v_stage_offset(int block_n, int key, int col, int panel) {
  return (col / panel) * (block_n * panel) + key * panel + (swizzled_chunk(panel, key, (col % panel) >> 4) << 4) +
         (col & 15);
}
// Byte offset of Vt element (col, fragment key h): [h / 128][vt_rows(head_dim_v)][128 bytes],
// the chunk c of column col's row at c ^ (col % 8); in a last panel of 64-byte rows
// (vt_row_bytes) at c ^ (col / 2 % 4), the 64-byte swizzle.
FLASHJIT_HOST_DEVICE constexpr int vt_stage_offset(int block_n, int head_dim_v, int col, int h) {
  const int panel = (h >> 7) * vt_panel_bytes(head_dim_v);
  if (vt_row_bytes(block_n, h >> 7) == 64)
    return panel + col * 64 + ((((h & 63) >> 4) ^ ((col >> 1) & 3)) << 4) + (h & 15);
  return panel + col * 128 + ((((h & 127) >> 4) ^ (col & 7)) << 4) + (h & 15);
}

// The rows of ones after V's columns (vt_rows), written once for all stages in 16-byte chunks:
// how many a stage has, and where chunk i of them all sits, stages stage_bytes apart.
FLASHJIT_HOST_DEVICE constexpr int vt_sum_chunks(int block_n) {
  const int last = vt_key_panels(block_n) - 1;
  return kVtSumRows * (last * 128 + vt_row_bytes(block_n, last)) / 16;
}
FLASHJIT_HOST_DEVICE constexpr int vt_sum_fill_offset(int block_n, int head_dim_v, int stage_bytes, int i) {
  constexpr int kPanelChunks = kVtSumRows * 128 / 16;
  const int chunk = i % vt_sum_chunks(block_n), panel = chunk / kPanelChunks;
  return (i / vt_sum_chunks(block_n)) * stage_bytes + panel * vt_panel_bytes(head_dim_v) +
         head_dim_v * vt_row_bytes(block_n, panel) + (chunk % kPanelChunks) * 16;
}

// One lane's share of every unit.
struct VTransposeLane {
  int load_row;        // ldmatrix: key 8 (i % 2) + r of the unit's 16, as a byte offset
  int load_chunk;      // and its 16-byte chunk 2 db + i / 2 (this is i / 2)
  int load_residue;    // the key's swizzle residue (r, or r / 2 in 64-byte panels): a unit's
                       // first key is a multiple of 16, so it is the same in every unit
  int store_row;       // stmatrix: V column 32 db + this, as a Vt byte offset
  int store_residue;   // that column's swizzle residue
  unsigned select[2];  // prmt selectors for stmatrix registers 0 and 1 (2 and 3 reuse them)
};

// Matrix 0 takes the quads' even columns for quads 0-3 and their odd ones for 4-7, matrix 1 the
// rest, so each stmatrix block's eight rows have eight distinct residues mod 8.
// `panel`: V's panel bytes (Vt's are always 128).
FLASHJIT_HOST_DEVICE constexpr VTransposeLane v_transpose_lane(int lane, int panel) {
  const int i = lane >> 3, r = lane & 7, key = 8 * (i & 1) + r;
  const int col = 16 * (i >> 1) + 2 * r + ((i & 1) != (r >= 4) ? 1 : 0);
  const bool quad_high = (lane >> 2) >= 4;  // the quad whose data this lane holds
  return {key * panel, i >> 1, panel == 128 ? r : (r >> 1) & 3, col * 128, col & 7,
          {quad_high ? 0x7531u : 0x6420u, quad_high ? 0x6420u : 0x7531u}};
}

// Byte offsets of this lane's ldmatrix row in V and stmatrix row in Vt for unit (kb, db): keys
// 16 kb .. +15, V columns 32 db .. +31 (V in panels of `panel` bytes, as v_transpose_lane's).
// Each is a part for the unit's keys, fixed while a transposer walks the columns, and a part for
// its columns that folds into an immediate: an xor inside the row's swizzle chunk bits, which a
// keys part never sets beyond the lane's own chunk (its row and key block are whole chunks'
// multiples, as is the 1024-byte aligned stage the kernel adds to it), and an add of whole
// panels. The chunk is 2 db + load_chunk, so its bits are (2 db mod chunks) xor load_chunk.
FLASHJIT_HOST_DEVICE constexpr int v_transpose_load_keys(const VTransposeLane& l, int kb, int panel) {
  return l.load_row + kb * (16 * panel) + ((l.load_chunk ^ l.load_residue) << 4);
}
template <class Offset>
FLASHJIT_HOST_DEVICE constexpr Offset v_transpose_load_columns(Offset keys, int block_n, int db, int panel) {
  const int chunks = panel / 16;  // 8 or 4 a panel
  return (keys ^ static_cast<Offset>(((2 * db) % chunks) << 4)) + static_cast<Offset>((2 * db / chunks) * (block_n * panel));
}
FLASHJIT_HOST_DEVICE constexpr int v_transpose_load(const VTransposeLane& l, int block_n, int kb, int db, int panel) {
  return v_transpose_load_columns(v_transpose_load_keys(l, kb, panel), block_n, db, panel);
}
// Whether key block kb lands in a last panel of 64-byte rows (vt_stage_offset).
FLASHJIT_HOST_DEVICE constexpr bool vt_half_panel_block(int block_n, int kb) {
  return vt_row_bytes(block_n, kb >> 3) == 64;
}
// The store's keys part; in a 64-byte panel the row is half as long and the residue is the
// column's col / 2 % 4, both from the lane's 128-byte ones (col * 128, col % 8).
FLASHJIT_HOST_DEVICE constexpr int v_transpose_store_keys(const VTransposeLane& l, int block_n, int head_dim_v, int kb) {
  const int panel = (kb >> 3) * vt_panel_bytes(head_dim_v);
  if (vt_half_panel_block(block_n, kb)) return panel + (l.store_row >> 1) + (((kb & 3) ^ (l.store_residue >> 1)) << 4);
  return panel + l.store_row + (((kb & 7) ^ l.store_residue) << 4);
}
FLASHJIT_HOST_DEVICE constexpr int v_transpose_store_columns(int db, bool half_panel) {
  return db * (32 * (half_panel ? 64 : 128));
}
FLASHJIT_HOST_DEVICE constexpr int v_transpose_store(const VTransposeLane& l, int block_n, int head_dim_v, int kb,
                                                     int db) {
  return v_transpose_store_keys(l, block_n, head_dim_v, kb) +
         v_transpose_store_columns(db, vt_half_panel_block(block_n, kb));
}

}  // namespace flashjit::sm90
