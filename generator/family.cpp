#include "generator/family.hpp"

namespace flashjit {

const KernelFamily& family(Family f) {
  switch (f) {
    case Family::sm90: return family_sm90();
    case Family::decode: return family_decode();
    default: return family_sm80();
  }
}

}  // namespace flashjit
