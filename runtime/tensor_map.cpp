#include "runtime/tensor_map.hpp"

#include "generator/element_types.hpp"
#include "runtime/driver.hpp"

#include <cstring>

namespace flashjit {

static_assert(sizeof(TmaDescriptor) == sizeof(CUtensorMap), "TmaDescriptor mirrors CUtensorMap");
// generator/element_types.cpp names TMA data types by value, without cuda.h.
static_assert(CU_TENSOR_MAP_DATA_TYPE_UINT8 == 0 && CU_TENSOR_MAP_DATA_TYPE_FLOAT16 == 6 &&
                  CU_TENSOR_MAP_DATA_TYPE_FLOAT32 == 7 && CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == 9,
              "CUtensorMapDataType values");

TmaDescriptor encode_tma(const TmaTensor& t, int box_rows, int box_panels) {
  const ElementType& type = element_type(t.dtype);
  const int64_t e = type.bytes;
  const int64_t panel = panel_elements(t.dtype);
  cuuint64_t dims[5] = {cuuint64_t(panel), cuuint64_t(t.rows), cuuint64_t(t.dim / panel), cuuint64_t(t.heads),
                        cuuint64_t(t.batch)};
  // Byte strides of axes 1..4; a batch axis of extent 1 still needs a legal stride.
  int64_t batch_stride = t.batch > 1 ? t.batch_stride * e : t.rows * t.row_stride * e;
  cuuint64_t strides[4] = {cuuint64_t(t.row_stride * e), 128, cuuint64_t(t.head_stride * e),
                           cuuint64_t(batch_stride)};
  cuuint32_t box[5] = {cuuint32_t(panel), cuuint32_t(box_rows), cuuint32_t(box_panels), 1, 1};
  cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  CUtensorMap map;
  FLASHJIT_CU(driver().cuTensorMapEncodeTiled(
      &map, static_cast<CUtensorMapDataType>(type.tma_data_type), 5, const_cast<void*>(t.data), dims, strides,
      box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  TmaDescriptor d;
  std::memcpy(&d, &map, sizeof d);
  return d;
}

}  // namespace flashjit
