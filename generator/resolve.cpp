#include "generator/resolve.hpp"

#include "generator/excerpt.hpp"
#include "generator/family.hpp"

#include <algorithm>

namespace flashjit {

namespace {

bool is_16bit(DType d) { return d == DType::bf16 || d == DType::fp16; }
bool is_fp8(DType d) { return d == DType::e4m3 || d == DType::e5m2; }
std::string quoted(const char* s) { return std::string("\"") + s + "\""; }
std::string num(int v) { return std::to_string(v); }

void check_common(const Config& c, std::vector<ConfigIssue>& out) {
  auto bad = [&](std::string path, std::string value, std::string rule) {
    out.push_back({std::move(path), std::move(value), std::move(rule)});
  };
  if (c.arch == "native")
    bad("arch", quoted("native"), "\"native\" is resolved from the current GPU by the runtime; "
        "name a target such as \"sm_90a\" here");
  else if (const std::string why = arch_problem(c.arch); !why.empty())
    bad("arch", quoted_excerpt(c.arch), why);

  const DTypes& d = c.dtype;
  if (d.qkv == DType::fp32)
    bad("dtype.qkv", quoted("fp32"), "tensor cores take 16-bit (bf16, fp16) or 8-bit (e4m3, e5m2) inputs");
  if (!is_16bit(d.out))
    bad("dtype.out", quoted(to_string(d.out)),
        is_fp8(d.qkv) ? "fp8 inputs need a 16-bit output (bf16 or fp16)"
                      : "must be a 16-bit type (bf16 or fp16)");

  const HeadDims& h = c.head_dim;
  if (h.qk < 16 || h.qk > 576 || h.qk % 16)
    bad("head_dim.qk", num(h.qk), "must be a multiple of 16 between 16 and 576");
  if (h.v < 16 || h.v > 512 || h.v % 16)
    bad("head_dim.v", num(h.v), "must be a multiple of 16 between 16 and 512");
  if (h.rope < 0 || h.rope % 16)
    bad("head_dim.rope", num(h.rope), "must be 0 or a positive multiple of 16");
  else if (h.rope > 0 && h.rope >= h.qk)
    bad("head_dim.rope", num(h.rope), "rope columns are part of head_dim.qk, so rope < qk (qk = " +
        num(h.qk) + ")");
  if (c.scales.token_layout == ScaleLayout::cache && c.scales.k != ScaleGranularity::per_token &&
      c.scales.v != ScaleGranularity::per_token)
    bad("scales.token_layout", quoted("cache"),
        "lays out per-token K and V scales: set only with scales.k or scales.v per_token");
  if (const int kb = c.scales.k_block; kb != 0) {
    // One scale per block of a key row's nope columns: FlashMLA's fp8 latent rows carry them
    // beside the columns, so they lie like the cache's rows.
    const int nope = h.qk - h.rope;
    if (kb < 0 || kb % 128 || nope % kb)
      bad("scales.k_block", num(kb),
          "must be 0 (one scale per key row) or a multiple of 128 that divides the nope columns (" + num(nope) + ")");
    else if (!c.kv_layout.shared_kv || !is_fp8(d.qkv))
      bad("scales.k_block", num(kb), "per-block K scales are read from fp8 shared K/V (latent) caches (kv_layout.shared_kv)");
    else if (c.scales.k != ScaleGranularity::per_token || c.scales.token_layout != ScaleLayout::cache)
      bad("scales.k_block", num(kb),
          "blocks of one key row's columns share a scale: set with scales.k per_token and scales.token_layout \"cache\"");
  }
  if (d.q && *d.q != d.qkv) {
    if (!is_fp8(d.qkv))
      bad("dtype.q", quoted(to_string(*d.q)),
          "a Q type of its own goes beside an fp8 K/V cache (dtype.qkv e4m3 or e5m2); here Q is dtype.qkv");
    else if (!is_16bit(*d.q))
      bad("dtype.q", quoted(to_string(*d.q)), "must be bf16, fp16, or the same as dtype.qkv");
    else if (c.scales.q != ScaleGranularity::none)
      bad("scales.q", quoted(to_string(c.scales.q)), std::string("a 16-bit Q (dtype.q ") + to_string(*d.q) + ") is not quantised");
  }
  if (d.rope) {
    if (h.rope == 0)
      bad("dtype.rope", quoted(to_string(*d.rope)), "set only when head_dim.rope > 0");
    else if (!is_16bit(*d.rope) && *d.rope != d.qkv)
      bad("dtype.rope", quoted(to_string(*d.rope)), "must be bf16, fp16, or the same as dtype.qkv");
  }

  if (c.tuning.seqlen_hint && *c.tuning.seqlen_hint < 1)
    bad("tuning.seqlen_hint", num(*c.tuning.seqlen_hint), "must be at least 1 (a key length)");

  if (c.group < 1 || c.group > 256)
    bad("group", num(c.group), "query heads per KV head must be between 1 and 256");

  if (c.tuning.max_seqlen_q && *c.tuning.max_seqlen_q < 1)
    bad("tuning.max_seqlen_q", num(*c.tuning.max_seqlen_q), "must be at least 1 (query tokens per sequence)");

  const KvLayout& kv = c.kv_layout;
  if (kv.paged) {
    if (kv.page_size < 1 || kv.page_size > 256 || (kv.page_size & (kv.page_size - 1)))
      bad("kv_layout.page_size", num(kv.page_size),
          "a paged KV cache needs a page size that is a power of two from 1 to 256");
  } else if (kv.page_size != 0) {
    bad("kv_layout.page_size", num(kv.page_size), "must be 0 unless kv_layout.paged is true");
  }

  const Scales& s = c.scales;
  const bool per_token = s.q == ScaleGranularity::per_token || s.k == ScaleGranularity::per_token ||
                         s.v == ScaleGranularity::per_token;
  if (per_token && !d.scale)
    bad("dtype.scale", "null", "per_token scales need dtype.scale (fp32 or bf16)");
  if (d.scale) {
    if (!per_token)
      bad("dtype.scale", quoted(to_string(*d.scale)), "set only when scales.q, scales.k or scales.v is per_token");
    else if (*d.scale != DType::fp32 && *d.scale != DType::bf16)
      bad("dtype.scale", quoted(to_string(*d.scale)), "must be fp32 or bf16");
  }
}

// Up to this many query tokens per sequence (tuning.max_seqlen_q), "auto" takes the decode
// family: its tiles pack the group's heads times the tokens, and split the keys over the GPU.
constexpr int kDecodeMaxTokens = 16;

// The family a config runs on: the one it names, or the fastest that implements it.
Family choose_family(const Config& c, const ArchInfo& arch) {
  if (c.tuning.family && *c.tuning.family != Family::automatic) return *c.tuning.family;
  if (c.kv_layout.shared_kv) return Family::decode;  // the only family with shared K/V
  const auto& max_q = c.tuning.max_seqlen_q;
  if (max_q && *max_q <= kDecodeMaxTokens && !family_decode().unsupported(c, arch)) return Family::decode;
  if (arch.has_wgmma() && !family_sm90().unsupported(c, arch)) return Family::sm90;
  return Family::sm80;
}

// `c` with family `f` and every tuning field the family chooses filled in ("auto" counts as
// unset, so families only see set or unset fields). The length hint is spent here: configs
// that resolve to the same tiles are the same kernel.
Config with_family_tuning(const Config& c, Family f, const ArchInfo& arch) {
  Config r = c;
  r.tuning.family = f;
  if (r.dtype.q == r.dtype.qkv) r.dtype.q.reset();  // Q in the inputs' type: the same kernel
  if (r.tuning.scheduler == Scheduler::automatic) r.tuning.scheduler.reset();
  if (r.tuning.kv_loads == KvLoads::automatic) r.tuning.kv_loads.reset();
  family(f).resolve_tuning(r, arch);
  r.tuning.seqlen_hint.reset();
  if (f != Family::decode) r.tuning.max_seqlen_q.reset();  // only decode tiles depend on it
  return r;
}

}  // namespace

ArchInfo config_arch(const Config& c) {
  auto a = parse_arch(c.arch);
  if (!a) throw ConfigError(check_problem(c));
  return *a;
}

std::vector<ConfigIssue> check_problem(const Config& c) {
  std::vector<ConfigIssue> issues;
  check_common(c, issues);
  return issues;
}

std::vector<ConfigIssue> scale_issues(const Config& c, const std::string& rule) {
  std::vector<ConfigIssue> issues;
  const std::pair<const char*, ScaleGranularity> scales[] = {
      {"scales.q", c.scales.q}, {"scales.k", c.scales.k}, {"scales.v", c.scales.v}};
  for (const auto& [path, s] : scales)
    if (s != ScaleGranularity::none) issues.push_back({path, quoted(to_string(s)), rule});
  return issues;
}

std::vector<ConfigIssue> check_config(const Config& c) {
  std::vector<ConfigIssue> issues = check_problem(c);
  if (!issues.empty()) return issues;  // family rules assume the common rules hold

  ArchInfo arch = *parse_arch(c.arch);
  Family f = choose_family(c, arch);
  if (f == Family::sm100) {
    issues.push_back({"tuning.family", quoted("sm100"),
                      "the sm100 (tcgen05) family is not available yet; use sm80 or auto"});
    return issues;
  }
  if (c.kv_layout.shared_kv && f != Family::decode) {
    issues.push_back({"kv_layout.shared_kv", "true", std::string("the ") + to_string(f) +
                      " family reads separate K and V; shared K/V latent caches run on the decode family (auto picks it)"});
    return issues;
  }
  const KernelFamily& fam = family(f);
  if (auto why = fam.unsupported(c, arch)) {
    issues.push_back(*why);
    return issues;
  }
  fam.check_tuning(with_family_tuning(c, f, arch), arch, issues);
  return issues;
}

Config with_seqlen_hint(Config c, int64_t seqlen_k) {
  if (c.tuning.seqlen_hint) return c;
  int64_t bucket = 16;
  while (bucket < seqlen_k && bucket < (int64_t{1} << 30)) bucket *= 2;
  c.tuning.seqlen_hint = static_cast<int>(bucket);
  return c;
}

Config resolve(const Config& c) {
  auto issues = check_config(c);
  if (!issues.empty()) throw ConfigError(std::move(issues));
  ArchInfo arch = *parse_arch(c.arch);
  return with_family_tuning(c, choose_family(c, arch), arch);
}

std::string readable_name(const Config& r) {
  std::string arch = r.arch;
  arch.erase(std::remove(arch.begin(), arch.end(), '_'), arch.end());
  std::string n = "fwd_";
  // Appended piece by piece: `"x" + std::string` here trips GCC 12's -Wrestrict false positive.
  auto add = [&n](const char* tag, const std::string& value) { n.append(tag).append(value); };
  add("", arch);
  add("_", to_string(r.dtype.qkv));
  add("_d", num(r.head_dim.qk));
  if (r.head_dim.v != r.head_dim.qk) add("v", num(r.head_dim.v));
  if (r.head_dim.rope) add("r", num(r.head_dim.rope));
  if (r.dtype.q) add("_q", to_string(*r.dtype.q));
  if (r.dtype.out != r.dtype.qkv) add("_o", to_string(r.dtype.out));
  add("_", to_string(r.mask));
  if (r.group > 1) add("_g", num(r.group));
  if (r.varlen) add("_varlen", "");
  if (r.kv_layout.paged) add("_paged", num(r.kv_layout.page_size));
  if (r.scales.any()) add("_scaled", "");
  if (r.lse) add("_lse", "");
  const Tuning& t = r.tuning;
  if (t.family) add("_", to_string(*t.family));
  if (t.max_seqlen_q) add("_q", num(*t.max_seqlen_q));
  if (r.kv_layout.shared_kv) add("_latent", "");
  if (t.family == Family::decode && t.consumer_warpgroups.value_or(0) > 0) add("_wgmma", "");
  if (t.kv_loads == KvLoads::tma) add("_tma", "");
  if (t.swap_qk.value_or(false)) add("_swapqk", "");
  if (t.BM && t.BN) {
    add("_bm", num(*t.BM));
    add("_bn", num(*t.BN));
  }
  return n;
}

}  // namespace flashjit
