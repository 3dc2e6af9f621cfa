// TMA descriptors for the sm90 family. A [batch, rows, heads, dim] tensor (any strides, dim
// contiguous) is described as 5-D {P, rows, dim/P, heads, batch}, P = one swizzled panel of
// elements (common/swizzle_panels.cuh: 128 bytes, or 64 for an fp8 row of 64 or 192 columns):
// the innermost P elements are one swizzle span, and the third axis steps over the P-column
// panels, so one TMA box {P, R, dim/P, 1, 1} lands in shared memory as [panel][row][P bytes],
// the layout wgmma reads.
#pragma once

#include "common/params.cuh"
#include "generator/config.hpp"

#include <cstdint>

namespace flashjit {

struct TmaTensor {
  const void* data;
  DType dtype;
  int64_t rows;        // rows along the sequence axis (total rows when ragged)
  int64_t dim;         // head dim (whole panels: a multiple of 64 bytes)
  int64_t heads;
  int64_t batch;       // 1 when ragged
  int64_t row_stride, head_stride, batch_stride;  // elements
};

// Encodes `t` with a box of {P, box_rows, box_panels}. Throws DriverError on failure. Memoised per
// thread on every field (a pure function of them): a warm launch on the same buffers skips the
// driver's encoder.
TmaDescriptor encode_tma(const TmaTensor& t, int box_rows, int box_panels);

}  // namespace flashjit
