// The FlashAttention-3 benchmark grid (B*S = 16k tokens, H*D = 2048, S = 512..16k; bf16/fp16,
// head dims 64/128/256, causal and not) and the config of each point.
#pragma once

#include "runtime/harness.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace flashjit::bench {

inline constexpr int kGridTokens = 16384;  // batch * seqlen
inline constexpr int kGridHidden = 2048;   // heads * head_dim

// One thing to time: a config (as a user would write it; arch may be "native") and a shape.
struct BenchPoint {
  std::string id;  // "bf16_d128_causal_s2048", or "custom"
  nlohmann::json config;
  ProblemShape shape;
};

// Subsets of the grid; an empty list keeps every value of that axis.
struct GridFilter {
  std::vector<std::string> dtypes;  // bf16, fp16
  std::vector<int> head_dims;       // 64, 128, 256 (any divisor of 2048 works)
  std::vector<std::string> masks;   // none, causal
  std::vector<int> seqlens;         // 512 ... 16384 (any divisor of 16384 works)
};

const std::vector<std::string>& grid_dtypes();
const std::vector<int>& grid_head_dims();
const std::vector<std::string>& grid_masks();
const std::vector<int>& grid_seqlens();

// "none" for none/noncausal/non-causal/full; "causal"; "sliding_window". Throws UsageError.
std::string normalize_mask(const std::string& mask);

// {"arch": arch, "dtype": {"qkv": dtype, "out": dtype}, "head_dim": {"qk": D, "v": D}, "mask": M}.
nlohmann::json point_config(const std::string& dtype, int head_dim, const std::string& mask,
                            const std::string& arch);

// Merges `tuning` (an object; may be null) into config["tuning"], and family (if not empty) as
// tuning.family. Throws UsageError when tuning is not an object.
void apply_tuning(nlohmann::json& config, const nlohmann::json& tuning, const std::string& family);

// The grid points in a fixed order (dtype, head dim, mask, seqlen), filtered. Throws UsageError
// for a filter value off the grid's constraints.
std::vector<BenchPoint> fa3_grid(const GridFilter& filter, const std::string& arch,
                                 const nlohmann::json& tuning, const std::string& family);

std::string point_id(const std::string& dtype, int head_dim, const std::string& mask, int seqlen);

}  // namespace flashjit::bench
