#include "bench/grid.hpp"

#include "bench/args.hpp"

#include <algorithm>

namespace flashjit::bench {

const std::vector<std::string>& grid_dtypes() {
  static const std::vector<std::string> v{"bf16", "fp16"};
  return v;
}
const std::vector<int>& grid_head_dims() {
  static const std::vector<int> v{64, 128, 256};
  return v;
}
const std::vector<std::string>& grid_masks() {
  static const std::vector<std::string> v{"none", "causal"};
  return v;
}
const std::vector<int>& grid_seqlens() {
  static const std::vector<int> v{512, 1024, 2048, 4096, 8192, 16384};
  return v;
}

std::string normalize_mask(const std::string& m) {
  if (m == "none" || m == "noncausal" || m == "non-causal" || m == "full") return "none";
  if (m == "causal") return "causal";
  if (m == "sliding_window" || m == "window") return "sliding_window";
  throw UsageError("unknown mask \"" + m + "\" (none, causal, sliding_window)");
}

nlohmann::json point_config(const std::string& dtype, int head_dim, const std::string& mask,
                            const std::string& arch) {
  return {{"arch", arch},
          {"dtype", {{"qkv", dtype}, {"out", dtype}}},
          {"head_dim", {{"qk", head_dim}, {"v", head_dim}}},
          {"mask", mask}};
}

void apply_tuning(nlohmann::json& config, const nlohmann::json& tuning, const std::string& family) {
  if (!tuning.is_null() && !tuning.is_object())
    throw UsageError("--tuning must be a JSON object, e.g. '{\"BN\": 128}'");
  if ((tuning.is_null() || tuning.empty()) && family.empty()) return;
  nlohmann::json& t = config["tuning"];
  if (!t.is_object()) t = nlohmann::json::object();
  if (tuning.is_object())
    for (const auto& [k, v] : tuning.items()) t[k] = v;
  if (!family.empty()) t["family"] = family;
}

std::string point_id(const std::string& dtype, int head_dim, const std::string& mask, int seqlen) {
  return dtype + "_d" + std::to_string(head_dim) + "_" + mask + "_s" + std::to_string(seqlen);
}

namespace {

template <class T>
std::vector<T> pick(const std::vector<T>& all, const std::vector<T>& filter) {
  return filter.empty() ? all : filter;
}

}  // namespace

std::vector<BenchPoint> fa3_grid(const GridFilter& f, const std::string& arch,
                                 const nlohmann::json& tuning, const std::string& family) {
  std::vector<std::string> masks;
  for (const auto& m : pick(grid_masks(), f.masks)) {
    std::string n = normalize_mask(m);
    if (n == "sliding_window") throw UsageError("--mask: the grid has none and causal only");
    if (std::find(masks.begin(), masks.end(), n) == masks.end()) masks.push_back(n);
  }
  for (const auto& d : pick(grid_dtypes(), f.dtypes))
    if (d != "bf16" && d != "fp16")
      throw UsageError("--dtype \"" + d + "\": the grid takes bf16 and fp16");
  for (int d : pick(grid_head_dims(), f.head_dims))
    if (d <= 0 || kGridHidden % d)
      throw UsageError("--head-dim " + std::to_string(d) + ": heads * head_dim must be 2048");
  for (int s : pick(grid_seqlens(), f.seqlens))
    if (s <= 0 || kGridTokens % s)
      throw UsageError("--seqlen " + std::to_string(s) + ": batch * seqlen must be 16384");

  std::vector<BenchPoint> out;
  for (const auto& dtype : pick(grid_dtypes(), f.dtypes))
    for (int d : pick(grid_head_dims(), f.head_dims))
      for (const auto& mask : masks)
        for (int s : pick(grid_seqlens(), f.seqlens)) {
          BenchPoint p;
          p.id = point_id(dtype, d, mask, s);
          p.config = point_config(dtype, d, mask, arch);
          apply_tuning(p.config, tuning, family);
          p.shape.batch = kGridTokens / s;
          p.shape.seqlen_q = p.shape.seqlen_k = s;
          p.shape.heads_q = p.shape.heads_k = kGridHidden / d;
          p.shape.layout = Layout::bshd;
          out.push_back(std::move(p));
        }
  return out;
}

}  // namespace flashjit::bench
