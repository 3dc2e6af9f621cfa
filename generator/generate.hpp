// The generator stage's entry points: config -> resolved config -> CUDA source.
#pragma once

#include "generator/config.hpp"
#include "generator/kernel_source.hpp"

namespace flashjit {

// The fast kernel for `c` (resolved first; throws ConfigError). Deterministic: equal configs
// give byte-identical units.
KernelSource generate(const Config& c);

// The fp32 reference kernel for the problem `c` describes (its tuning is ignored). It writes fp32
// O through AttentionParams::o and the LSE. Throws ConfigError naming each field it cannot
// compute: fp8 inputs, paged KV caches and quantisation scales (it would ignore the last two).
KernelSource generate_reference(const Config& c);

// The problem the reference kernel of `c` computes (`c` without its tuning), checked as
// generate_reference checks it; and that kernel's readable name (ref_sm90a_bf16_d128_causal).
Config reference_problem(const Config& c);
std::string reference_name(const Config& problem);

}  // namespace flashjit
