#include "generator/emit.hpp"

#include "generator/element_types.hpp"

#include <cstdint>
#include <cstdio>

namespace flashjit::emit {

std::string device_type(DType d) { return element_type(d).device_type; }

std::string mask_kind(Mask m) {
  switch (m) {
    case Mask::none: return "flashjit::MaskKind::kNone";
    case Mask::causal: return "flashjit::MaskKind::kCausal";
    case Mask::sliding_window: return "flashjit::MaskKind::kSlidingWindow";
  }
  return "";
}

std::string scale_kind(ScaleGranularity s) {
  switch (s) {
    case ScaleGranularity::none: return "flashjit::ScaleKind::kNone";
    case ScaleGranularity::per_tensor: return "flashjit::ScaleKind::kPerTensor";
    case ScaleGranularity::per_head: return "flashjit::ScaleKind::kPerHead";
    case ScaleGranularity::per_token: return "flashjit::ScaleKind::kPerToken";
  }
  return "";
}

std::string entry_symbol(const std::string& name, const std::string& canonical_config) {
  // FNV-1a: only disambiguates symbols; cache identity is the SHA-256 key computed elsewhere.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : canonical_config) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(h ^ (h >> 32)));
  return name + "_" + buf;
}

std::string unit_header(const std::string& name, const Config& resolved) {
  return "// flashjit generated kernel: " + name + "\n// resolved config: " +
         canonical_json(resolved) +
         "\n#include \"common/params.cuh\"\n#include \"common/types.cuh\"\n\n";
}

std::string traits_struct(const Config& r, const Constants& extra) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  Constants c = {
      {"kHeadDimQK", std::to_string(r.head_dim.qk)},
      {"kHeadDimV", std::to_string(r.head_dim.v)},
      {"kHeadDimRope", std::to_string(r.head_dim.rope)},
      {"kGroup", std::to_string(r.group)},
      {"kMask", mask_kind(r.mask)},
      {"kVarlen", b(r.varlen)},
      {"kPaged", b(r.kv_layout.paged)},
      {"kPageSize", std::to_string(r.kv_layout.page_size)},
      {"kWriteLse", b(r.lse)},
      {"kQScale", scale_kind(r.scales.q)},
      {"kKScale", scale_kind(r.scales.k)},
      {"kVScale", scale_kind(r.scales.v)},
  };
  // Per-token K scales laid out like the cache's rows (only where so: other sources unchanged).
  if (r.scales.token_layout == ScaleLayout::cache) c.push_back({"kTokenScalesInCache", b(true)});
  // Per-block K scales: the blocks of a key row's nope columns (only where set).
  if (r.scales.k_block > 0)
    c.push_back({"kKScaleBlocks", std::to_string(r.k_scale_blocks())});
  c.insert(c.end(), extra.begin(), extra.end());
  std::string s = "namespace flashjit::generated {\nstruct Traits {\n";
  s += "  using Element = " + device_type(r.dtype.qkv) + ";\n";
  s += "  using OutElement = " + device_type(r.dtype.out) + ";\n";
  if (r.dtype.q) s += "  using QElement = " + device_type(*r.dtype.q) + ";\n";  // else Element (QElementOf)
  s += "  using RopeElement = " + device_type(r.dtype.rope.value_or(r.dtype.qkv)) + ";\n";
  s += "  using ScaleElement = " + device_type(r.dtype.scale.value_or(DType::fp32)) + ";\n";
  s += "  using ComputeElement = " + device_type(compute_dtype(r.dtype, r.head_dim.rope)) + ";\n";
  for (const auto& [name, value] : c) {
    std::string type = value == "true" || value == "false" ? "bool"
                       : value.rfind("flashjit::", 0) == 0 ? "auto"
                                                           : "int";
    s += "  static constexpr " + type + " " + name + " = " + value + ";\n";
  }
  s += "};\n}  // namespace flashjit::generated\n\n";
  return s;
}

std::string entry_function(const std::string& symbol, int threads, int min_blocks,
                           const std::string& body, const std::string& attributes) {
  return "extern \"C\" __global__ void " + attributes + "__launch_bounds__(" +
         std::to_string(threads) + ", " + std::to_string(min_blocks) + ")\n" + symbol +
         "(const __grid_constant__ flashjit::AttentionParams params) {\n  " + body +
         "<flashjit::generated::Traits>(params);\n}\n";
}

}  // namespace flashjit::emit
