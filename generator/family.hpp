// A kernel family: the device templates of one code path (sm80 mma.sync, sm90 wgmma, ...) and
// the host-side knowledge that goes with them — which configs they implement, how their tuning
// defaults are derived from the target's budgets, and how to instantiate them.
#pragma once

#include "generator/arch.hpp"
#include "generator/config.hpp"
#include "generator/kernel_source.hpp"

#include <optional>
#include <string>
#include <vector>

namespace flashjit {

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  virtual Family id() const = 0;
  // Why this family cannot build `c` for `arch` (a rule naming the field), or nullopt if it can.
  virtual std::optional<ConfigIssue> unsupported(const Config& c, const ArchInfo& arch) const = 0;
  // Fills every unset tuning field from the arch's budgets; keeps fields the user pinned.
  virtual void resolve_tuning(Config& c, const ArchInfo& arch) const = 0;
  // Checks a fully resolved tuning against the family's rules and the arch's budgets.
  virtual void check_tuning(const Config& c, const ArchInfo& arch,
                            std::vector<ConfigIssue>& issues) const = 0;
  virtual int smem_bytes(const Config& c) const = 0;
  // The instantiation unit and launch facts for a resolved config.
  virtual KernelSource emit(const Config& c, const ArchInfo& arch) const = 0;
};

// What every family's emit() fills the same way: the readable name, the target, the resolved
// config, the family, the entry symbol, the threads, the tiles and the shared memory. The family
// adds its own launch facts and the unit.
KernelSource source_skeleton(const Config& resolved, const ArchInfo& arch, const char* family, int threads,
                             int smem_bytes);

const KernelFamily& family_sm80();
const KernelFamily& family_sm90();
const KernelFamily& family_decode();
const KernelFamily& family(Family f);

}  // namespace flashjit
