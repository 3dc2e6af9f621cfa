// wgmma wrappers for the widths a config needs. An m64nNk16 wgmma names N/2 accumulator
// registers in its operand list, which a C++ template cannot spell for arbitrary N, so the
// generator writes one specialisation of flashjit::sm90::Wgmma<Element, N> per width.
#pragma once

#include "generator/config.hpp"

#include <string>
#include <vector>

namespace flashjit::wgmma {

// Specialisations for each distinct width in `widths` (multiples of 8 up to 256): ss() for
// K-major A and B from shared memory, rs() for A from registers and B from shared memory
// (MN-major for 16-bit types, K-major for fp8, which wgmma cannot transpose).
std::string specialisations(DType element, const std::vector<int>& widths);

}  // namespace flashjit::wgmma
