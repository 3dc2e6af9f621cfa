// How large a key tile the sm90 kernel's consumers hold in registers without spilling, as
// measured: ptxas's allocation is not linear in the tile (head_dim.qk, which no register holds,
// costs many at 192 and 256, and the sliding-window mask code more), so a formula either
// spills or gives up tiles that fit.
#pragma once

#include "generator/config.hpp"

namespace flashjit {

// The largest BN (a multiple of 16; 0 when none) that compiles without spills for `c`'s head
// dims (multiples of 64 up to 256), mask and input type (16-bit or fp8) with
// `consumer_warpgroups` consumers, as one CTA or as a pair_cta cluster.
int sm90_spill_free_bn(const Config& c, int consumer_warpgroups, bool pair_cta);

}  // namespace flashjit
