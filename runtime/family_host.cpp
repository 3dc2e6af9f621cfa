#include "runtime/family_host.hpp"

#include <stdexcept>

namespace flashjit {

const FamilyHost& host_sm80();
const FamilyHost& host_sm90();
const FamilyHost& host_reference();
const FamilyHost& host_decode();

const FamilyHost& family_host(const std::string& family) {
  if (family == "sm90") return host_sm90();
  if (family == "sm80") return host_sm80();
  if (family == "decode") return host_decode();
  if (family == "reference") return host_reference();
  throw std::invalid_argument("flashjit: no host side for kernel family \"" + family + "\"");
}

}  // namespace flashjit
