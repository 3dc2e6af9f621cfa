// AttentionArgs -> the kernel ABI (AttentionParams) and the grid: every argument is checked
// against the resolved config and the launch facts before anything touches the GPU.
#pragma once

#include "common/params.cuh"
#include "generator/config.hpp"
#include "generator/kernel_source.hpp"
#include "runtime/flashjit.hpp"

namespace flashjit {

struct LaunchGeometry {
  unsigned grid[3] = {1, 1, 1};
  bool empty = false;  // nothing to compute (zero rows); skip the launch
};

// Throws ArgumentError naming the first bad argument. `resident_ctas` (how many CTAs of the
// kernel run at once, a multiple of launch.cluster_m) sizes persistent grids. TMA descriptors
// are not filled here (see encode_tma_descriptors).
AttentionParams make_params(const Config& resolved, const LaunchInfo& launch,
                            const AttentionArgs& args, int resident_ctas, LaunchGeometry& geometry);

// Fills the TMA descriptors of `params` (sm90 family).
void encode_tma_descriptors(const Config& resolved, const LaunchInfo& launch,
                            const AttentionArgs& args, AttentionParams& params);

}  // namespace flashjit
