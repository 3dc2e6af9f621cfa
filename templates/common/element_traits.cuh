// Layout facts of an element type as the kernels see it: how many fit a 16-byte chunk (one
// cp.async / ldmatrix row / vector store), a 128-byte swizzle row (one TMA panel), and the K of
// one tensor-core step, which is 32 bytes of K for every input type (k16 for 16-bit, k32 for
// fp8). The host's table of the same types is generator/element_types.hpp.
#pragma once

#include "common/types.cuh"

namespace flashjit {

template <class E>
struct ElementTraits {
  static constexpr int kBytes = int(sizeof(E));
  static constexpr int kChunkElems = 16 / kBytes;   // per 16-byte chunk
  static constexpr int kPanelElems = 128 / kBytes;  // per 128-byte swizzle row (a TMA panel)
  static constexpr int kMmaK = 32 / kBytes;         // K of one wgmma / mma.sync step
  static constexpr int kPerReg = 4 / kBytes;        // packed into one 32-bit register
  static_assert(kBytes == 1 || kBytes == 2 || kBytes == 4, "8-, 16- or 32-bit elements");
};

// A kernel's Q element type: Traits::QElement where the config gives Q a type of its own
// (dtype.q: a 16-bit Q beside an fp8 K/V cache), else Traits::Element.
template <class...>
using VoidOf = void;
template <class T, class = void>
struct QElementOf {
  using type = typename T::Element;
};
template <class T>
struct QElementOf<T, VoidOf<typename T::QElement>> {
  using type = typename T::QElement;
};

}  // namespace flashjit
