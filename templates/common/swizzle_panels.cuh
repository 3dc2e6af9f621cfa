// How a TMA-loaded tile's rows are cut into swizzled panels, shared by the host (tensor maps, box
// sizes) and the kernels (offsets, wgmma descriptors), so the two cannot disagree. A row of a
// multiple of 128 bytes takes 128-byte panels with the 128-byte swizzle; otherwise (an fp8 row of
// 64 or 192 columns) 64-byte panels with the 64-byte swizzle, whose pattern repeats every 8 rows
// of 64 bytes. Rows must be a multiple of 64 bytes.
#pragma once

#include "common/host_device.cuh"

namespace flashjit {

FLASHJIT_HOST_DEVICE constexpr int panel_bytes(int row_bytes) { return row_bytes % 128 == 0 ? 128 : 64; }

// The 16-byte chunk at which chunk `chunk` of row `row` of a panel lands (a 128-byte panel XORs
// the chunk with row % 8, a 64-byte one with (row / 2) % 4: both XOR address bits 4-6 / 4-5 with
// bits 7-9 / 7-8).
FLASHJIT_HOST_DEVICE constexpr int swizzled_chunk(int panel, int row, int chunk) {
  return panel == 128 ? chunk ^ (row & 7) : chunk ^ ((row >> 1) & 3);
}

}  // namespace flashjit
