// The element types flashjit moves through memory, in one table: every host-side fact that
// depends on an element type (size, device type name, PTX name, tensor-core K step, TMA data
// type, .npy descriptor, conversions to and from float, the tolerance tests allow) is read from
// here, so a new type is one row, not a hunt through the runtime, the CLI and the emitters.
// Device code has the matching traits in templates/common/element_traits.cuh.
#pragma once

#include "generator/config.hpp"

#include <cstdint>
#include <string>

namespace flashjit {

struct ElementType {
  DType id;
  const char* name;          // the config's spelling: "bf16", "e4m3", ...
  int bytes;
  const char* device_type;   // the C++ type the templates use for it
  const char* ptx;           // PTX type name in mma/cvt instructions: "bf16", "f16", "e4m3", ...
  int mma_k;                 // K of one wgmma / mma step: 32 bytes of K per instruction
  int tma_data_type;         // CUtensorMapDataType (fp8 travels as UINT8)
  const char* npy_descr;     // how .npy files store it: '<f2' fp16, '<u2' bf16 bits, '|u1' fp8 bits
  double tolerance;          // ||out - ref|| / ||ref|| a kernel with these inputs must meet
  double max_finite;         // largest finite value
  // float -> bits (round to nearest even; fp8 saturates to +-max_finite, NaN stays NaN) and back.
  std::uint32_t (*encode)(float);
  float (*decode)(std::uint32_t);
};

const ElementType& element_type(DType d);

// Elements per swizzled panel row of a tile whose rows hold `columns` of this type: a 128-byte
// panel (64 16-bit, 128 fp8), or a 64-byte one where the row is no multiple of 128 bytes (fp8 rows
// of 64 or 192 columns; common/swizzle_panels.cuh).
int panel_elements(DType d, int columns);

bool is_float8(DType d);

// The 16-bit type mma.sync kernels compute in: the inputs' own, or for fp8 inputs (which widen to
// either 16-bit type exactly) the rope part's when it is 16-bit, else bf16 (fp8 values times
// their scales keep bf16's range).
DType compute_dtype(const DTypes& d, int rope_columns);

// The element at `p` (little-endian bits, as the GPU stores them) as a float, and back.
float load_element(const ElementType& t, const void* p);
void store_element(const ElementType& t, float f, void* p);

}  // namespace flashjit
