#include "generator/arch.hpp"

#include <cctype>

namespace flashjit {

namespace {
// Opt-in dynamic shared memory per block, from the CUDA programming guide's per-CC table.
int smem_limit(int cc) {
  switch (cc) {
    case 80: case 87: return 163 * 1024;
    case 86: case 89: case 120: case 121: return 99 * 1024;
    case 90: case 100: case 101: case 103: case 110: return 227 * 1024;
    default: return 99 * 1024;
  }
}
int sm_count_hint(int cc) {
  switch (cc) {
    case 80: return 108;
    case 90: return 132;
    case 100: return 148;
    default: return 80;
  }
}
}  // namespace

std::optional<ArchInfo> parse_arch(const std::string& name) {
  if (name.rfind("sm_", 0) != 0) return std::nullopt;
  std::string rest = name.substr(3);
  char suffix = 0;
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    suffix = rest.back();
    rest.pop_back();
  }
  if (rest.size() < 2 || rest.size() > 3) return std::nullopt;
  for (char c : rest)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  int cc = std::stoi(rest);
  if (cc < 80) return std::nullopt;
  ArchInfo a;
  a.major = cc / 10;
  a.minor = cc % 10;
  a.suffix = suffix;
  a.name = name;
  a.max_smem_per_block = smem_limit(cc);
  a.sm_count_hint = sm_count_hint(cc);
  return a;
}

std::string arch_for_compute_capability(int major, int minor) {
  std::string base = "sm_" + std::to_string(major) + std::to_string(minor);
  // Hopper and datacenter Blackwell keep their fast instructions behind the 'a' targets.
  if (major == 9 || major == 10) return base + "a";
  return base;
}

}  // namespace flashjit
