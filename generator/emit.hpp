// Pieces of an instantiation unit shared by every family: the header comment, the Traits struct
// of compile-time constants, and the extern "C" entry point.
#pragma once

#include "generator/config.hpp"

#include <string>
#include <utility>
#include <vector>

namespace flashjit::emit {

using Constants = std::vector<std::pair<std::string, std::string>>;  // name, C++ expression

std::string device_type(DType d);          // "flashjit::bf16_t", ...
std::string mask_kind(Mask m);             // "flashjit::MaskKind::kCausal", ...
std::string scale_kind(ScaleGranularity s);

// Entry symbol: the readable name plus a short digest of the canonical config, so two configs
// that share a readable name never share a symbol.
std::string entry_symbol(const std::string& name, const std::string& canonical_config);

// "// flashjit generated ..." header with the resolved config, and the common includes.
std::string unit_header(const std::string& name, const Config& resolved);

// struct Traits { using Element = ...; static constexpr ... } with the config's problem constants
// (dtypes, head dims, group, mask, varlen, lse, scales) followed by `extra` (family tuning).
std::string traits_struct(const Config& resolved, const Constants& extra);

// extern "C" __global__ entry calling `body` (e.g. "flashjit::sm80::attention_fwd") with the Traits.
std::string entry_function(const std::string& symbol, int threads, int min_blocks,
                           const std::string& body, const std::string& attributes = "");

}  // namespace flashjit::emit
