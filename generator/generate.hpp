// The generator stage's entry points: config -> resolved config -> CUDA source.
#pragma once

#include "generator/config.hpp"
#include "generator/kernel_source.hpp"

namespace flashjit {

// The fast kernel for `c` (resolved first; throws ConfigError). Deterministic: equal configs
// give byte-identical units.
KernelSource generate(const Config& c);

// The fp32 reference kernel for the problem `c` describes (its tuning is ignored). It writes fp32
// O through AttentionParams::o and the LSE.
KernelSource generate_reference(const Config& c);

}  // namespace flashjit
