#include "runtime/tensor_map.hpp"

#include "runtime/driver.hpp"

#include <cstring>

namespace flashjit {

static_assert(sizeof(TmaDescriptor) == sizeof(CUtensorMap), "TmaDescriptor mirrors CUtensorMap");

TmaDescriptor encode_tma(const TmaTensor& t, int box_rows, int box_panels) {
  const int64_t e = t.elem_bytes;
  cuuint64_t dims[5] = {64, cuuint64_t(t.rows), cuuint64_t(t.dim / 64), cuuint64_t(t.heads),
                        cuuint64_t(t.batch)};
  // Byte strides of axes 1..4; a batch axis of extent 1 still needs a legal stride.
  int64_t batch_stride = t.batch > 1 ? t.batch_stride * e : t.rows * t.row_stride * e;
  cuuint64_t strides[4] = {cuuint64_t(t.row_stride * e), 128, cuuint64_t(t.head_stride * e),
                           cuuint64_t(batch_stride)};
  cuuint32_t box[5] = {64, cuuint32_t(box_rows), cuuint32_t(box_panels), 1, 1};
  cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  CUtensorMap map;
  FLASHJIT_CU(driver().cuTensorMapEncodeTiled(
      &map, t.is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 5,
      const_cast<void*>(t.data), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  TmaDescriptor d;
  std::memcpy(&d, &map, sizeof d);
  return d;
}

}  // namespace flashjit
