// TMA descriptors for the sm90 family. A [batch, rows, heads, dim] tensor (any strides, dim
// contiguous) is described as 5-D {64, rows, dim/64, heads, batch}: the innermost 64 elements
// are one 128-byte swizzle span, and the third axis steps over the 64-column panels, so one TMA
// box {64, R, dim/64, 1, 1} lands in shared memory as [panel][row][64], the layout wgmma reads.
#pragma once

#include "common/params.cuh"

#include <cstdint>

namespace flashjit {

struct TmaTensor {
  const void* data;
  int elem_bytes;      // 2
  bool is_bf16;        // else fp16
  int64_t rows;        // rows along the sequence axis (total rows when ragged)
  int64_t dim;         // head dim (multiple of 64)
  int64_t heads;
  int64_t batch;       // 1 when ragged
  int64_t row_stride, head_stride, batch_stride;  // elements
};

// Encodes `t` with a box of {64, box_rows, box_panels}. Throws DriverError on failure.
TmaDescriptor encode_tma(const TmaTensor& t, int box_rows, int box_panels);

}  // namespace flashjit
