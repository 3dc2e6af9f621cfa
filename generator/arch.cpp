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

bool has_arch_variant(int cc, char suffix) {
  if (suffix == 'a') return cc >= 90;
  if (suffix == 'f') return cc >= 100;
  return suffix == 0;
}

namespace {
constexpr const char* kTargetForm = "a CUDA target sm_XY, sm_XYa or sm_XYf with XY >= 80 (e.g. sm_80, sm_90a, sm_100a)";

// The compute capability and suffix of a well-formed name; "" or the broken rule in `problem`.
int split_arch(const std::string& name, char& suffix, std::string& problem) {
  suffix = 0;
  if (name.rfind("compute_", 0) == 0) {
    problem = "must be " + std::string(kTargetForm) + "; compute_XY names a virtual arch, and flashjit builds cubins";
    return 0;
  }
  std::string rest = name.rfind("sm_", 0) == 0 ? name.substr(3) : std::string();
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    suffix = rest.back();
    rest.pop_back();
  }
  bool digits = rest.size() >= 2 && rest.size() <= 3 && rest[0] != '0';
  for (char c : rest) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits) {
    problem = "must be " + std::string(kTargetForm);
    return 0;
  }
  const int cc = std::stoi(rest);
  if (cc < 80) {
    problem = "flashjit needs sm_80 or newer (mma.sync with bf16, cp.async)";
    return 0;
  }
  if (!has_arch_variant(cc, suffix)) {
    const std::string base = "sm_" + rest;
    problem = suffix == 'a' ? base + " has no 'a' variant: arch-specific targets exist from sm_90a on; use " + base
                            : base + " has no 'f' variant: family targets exist from sm_100f on; use " + base +
                                  (cc >= 90 ? " or " + base + "a" : "");
    return 0;
  }
  return cc;
}
}  // namespace

std::string arch_problem(const std::string& name) {
  char suffix = 0;
  std::string problem;
  split_arch(name, suffix, problem);
  return problem;
}

std::optional<ArchInfo> parse_arch(const std::string& name) {
  char suffix = 0;
  std::string problem;
  const int cc = split_arch(name, suffix, problem);
  if (!problem.empty()) return std::nullopt;
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
