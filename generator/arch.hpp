// Target architectures: parsing "sm_90a"-style names and the budgets the heuristics size tiles by.
#pragma once

#include <optional>
#include <string>

namespace flashjit {

struct ArchInfo {
  std::string name;        // canonical: sm_80, sm_90a, sm_100a, ...
  int major = 0;
  int minor = 0;
  char suffix = 0;         // 'a' (arch-specific features), 'f' (family), or 0
  int max_smem_per_block;  // bytes of dynamic shared memory one CTA may opt into
  int regs_per_sm = 65536;
  int sm_count_hint;       // used only for launch-independent heuristics; the runtime reads the real count

  int cc() const { return major * 10 + minor; }
  // wgmma, setmaxnreg and TMA multicast need the arch-specific sm_90a target.
  bool has_wgmma() const { return major == 9 && suffix == 'a'; }
  bool has_tma() const { return major >= 9; }
  bool has_tcgen05() const { return major == 10 && (suffix == 'a' || suffix == 'f'); }
  // CTAs of `smem_bytes` dynamic shared memory that one SM holds: an SM has the opt-in limit
  // plus 1 KB, and each CTA reserves 1 KB beside its own.
  int ctas_by_smem(int smem_bytes) const { return (max_smem_per_block + 1024) / (smem_bytes + 1024); }
};

// Parses "sm_XY", "sm_XYa", "sm_XYf" (also "compute_" is rejected: flashjit always emits cubins).
// Returns nullopt for anything else, an arch older than sm_80, or a suffix the arch does not have.
std::optional<ArchInfo> parse_arch(const std::string& name);

// Why `name` is not a target parse_arch accepts (the rule it breaks), or "" when it is one.
// Which compute capabilities a compiler knows is not decided here (the runtime asks NVRTC).
std::string arch_problem(const std::string& name);

// Arch-specific targets ('a') exist from sm_90 on, family targets ('f') from sm_100 on.
bool has_arch_variant(int cc, char suffix);

// The arch a device of compute capability major.minor should be compiled for (9.0 -> sm_90a).
std::string arch_for_compute_capability(int major, int minor);

}  // namespace flashjit
