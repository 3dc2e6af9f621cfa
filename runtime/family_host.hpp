// A kernel family's host side: from the resolved config, its launch facts and a call's
// arguments to the launch itself — which kernels of the module run, on which grids, with which
// parameters, and how much device scratch they share. Planning touches no GPU (the CPU tests
// plan launches); finish() adds what only the device can make (TMA descriptors) and binds the
// scratch. One implementation per family, found by LaunchInfo::family when a module is loaded.
#pragma once

#include "common/params.cuh"
#include "generator/config.hpp"
#include "generator/kernel_source.hpp"
#include "runtime/flashjit.hpp"

#include <cstddef>
#include <string>

namespace flashjit {

// What the planner needs to know of the device.
struct DeviceLimits {
  int sm_count = 132;
  int resident_ctas = 132;  // CTAs of this kernel that run at once (persistent grids)
  int ctas_per_sm = 1;      // CTAs of this kernel one SM holds (occupancy)
};

// One kernel launch of an operation: kernel 0 is LaunchInfo::entry, kernel i > 0 is passes[i - 1].
struct PassLaunch {
  int kernel = 0;
  unsigned grid[3] = {1, 1, 1};
  int threads = 0;
  int smem_bytes = 0;
  int cluster_m = 1;
  // A programmatic dependent launch (sm_90+): the pass may start while the previous one runs and
  // waits for its completion itself (griddepcontrol.wait), which hides the launch gap.
  bool overlaps_previous = false;
};

struct LaunchPlan {
  AttentionParams params;  // every pass reads the same struct
  PassLaunch passes[2];
  int num_passes = 0;      // 0: nothing to compute (no rows)
  size_t workspace_bytes = 0;
  bool tile_counter = false;  // params.tile_counter needs a zeroed device int
};

class FamilyHost {
 public:
  virtual ~FamilyHost() = default;
  // Checks `args` against the config (ArgumentError naming the argument) and plans the launch.
  virtual LaunchPlan plan(const Config& config, const LaunchInfo& launch, const AttentionArgs& args,
                          const DeviceLimits& device) const = 0;
  // TMA descriptors (needs the driver) and the workspace pointers (`workspace` holds at least
  // plan.workspace_bytes, 16-byte aligned). Called after plan(), before the launch.
  virtual void finish(const Config& config, const LaunchInfo& launch, const AttentionArgs& args, void* workspace,
                      LaunchPlan& plan) const;
};

// The host of LaunchInfo::family; throws std::invalid_argument for a family this build lacks.
const FamilyHost& family_host(const std::string& family);

// The arguments every family checks, and the parameters they fill in the same way (tensors,
// sizes, ragged offsets, LSE, window, softmax scale, paging, cache lengths). Throws ArgumentError.
AttentionParams common_params(const Config& config, const LaunchInfo& launch, const AttentionArgs& args);

}  // namespace flashjit
