// Validation and resolution: every rule a config must satisfy, and the per-arch heuristics that
// fill in the tuning a user left out.
#pragma once

#include "generator/arch.hpp"
#include "generator/config.hpp"

#include <vector>

namespace flashjit {

// The family-independent rules only (what the problem itself must satisfy).
std::vector<ConfigIssue> check_problem(const Config& c);

// One issue per quantisation scale the config sets (scales.q/k/v), each with `rule`: for the
// families that do not implement scales.
std::vector<ConfigIssue> scale_issues(const Config& c, const std::string& rule);

// Every broken rule of `c`, family-independent and family-specific, without throwing. An arch of
// "native" must be replaced by the caller first (only the runtime knows the device).
std::vector<ConfigIssue> check_config(const Config& c);

// The fully resolved config: family chosen, every tuning field set. Throws ConfigError listing
// all broken rules.
Config resolve(const Config& c);

// `c` with tuning.seqlen_hint set for key length `seqlen_k`, rounded up to a power of two (at
// least 16) so that nearby lengths make one config; a hint the config already has is kept.
Config with_seqlen_hint(Config c, int64_t seqlen_k);

// The arch of a config, parsed; throws ConfigError naming `arch` when it is not a valid target.
ArchInfo config_arch(const Config& c);

// Readable identifier of a resolved config: fwd_sm90a_bf16_d128_causal_bm128_bn176.
std::string readable_name(const Config& resolved);

}  // namespace flashjit
