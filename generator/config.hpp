// The attention config (schema flashjit.attention.v1): what a kernel computes and how it is tuned.
// A Config is what the user wrote (tuning fields may be unset); resolve() fills every field for a
// target arch, and the canonical JSON of the resolved config identifies the kernel.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashjit {

inline constexpr const char* kConfigSchema = "flashjit.attention.v1";

enum class DType { bf16, fp16, e4m3, e5m2, fp32 };
enum class Mask { none, causal, sliding_window };
enum class ScaleGranularity { none, per_tensor, per_head, per_token };
// Where per-token K and V scales lie: by each key's position in its sequence ([batch, heads_k,
// positions]), or like the cache's rows ([num_pages, page_size, heads_k] paged, [batch, seqlen_k,
// heads_k] or ragged [total_k, heads_k] contiguous), as engines keep them beside their pages.
enum class ScaleLayout { positions, cache };
enum class Family { automatic, sm80, sm90, sm100, decode };
enum class Scheduler { automatic, transient, persistent, dynamic };
// How the decode family brings K/V tiles into shared memory: 16-byte cp.async gathers (any page
// size, any GPU) or TMA boxes (sm_90a; whole pages of at least 8 rows, or a contiguous cache).
enum class KvLoads { automatic, cp_async, tma };

const char* to_string(DType);
const char* to_string(Mask);
const char* to_string(ScaleGranularity);
const char* to_string(Family);
const char* to_string(Scheduler);
const char* to_string(KvLoads);
const char* to_string(ScaleLayout);
int dtype_bytes(DType);

struct DTypes {
  DType qkv = DType::bf16;
  DType out = DType::bf16;
  std::optional<DType> rope;   // dtype of the rope columns of Q and K; unset: same as qkv
  std::optional<DType> scale;  // dtype of per-token scales; set only when a scale is per_token
  std::optional<DType> q;      // dtype of Q (its nope columns); unset: dtype.qkv. A 16-bit Q beside an fp8 K/V cache
  bool operator==(const DTypes&) const = default;
};

struct HeadDims {
  int qk = 128;    // Q/K depth, rope columns included
  int v = 128;     // V/O depth
  int rope = 0;    // the last `rope` columns of Q and K, stored in their own tensors
  int nope() const { return qk - rope; }
  bool operator==(const HeadDims&) const = default;
};

struct KvLayout {
  bool paged = false;
  int page_size = 0;
  // V is the first head_dim.v columns of K (MLA's latent cache): no V tensor; decode family.
  bool shared_kv = false;
  bool operator==(const KvLayout&) const = default;
};

struct Scales {
  ScaleGranularity q = ScaleGranularity::none;
  ScaleGranularity k = ScaleGranularity::none;
  ScaleGranularity v = ScaleGranularity::none;
  ScaleLayout token_layout = ScaleLayout::positions;  // per-token K and V scales' layout
  // Nope columns of a key row that share one per-token K scale (FlashMLA's fp8 latent cache:
  // 128, four scales per 512-column row); 0: one scale for the row.
  int k_block = 0;
  bool any() const {
    return q != ScaleGranularity::none || k != ScaleGranularity::none ||
           v != ScaleGranularity::none;
  }
  bool operator==(const Scales&) const = default;
};

// Everything here is optional in a user's config and filled in by resolve().
struct Tuning {
  std::optional<Family> family;
  std::optional<int> BM;
  std::optional<int> BN;
  std::optional<int> num_kv_stages;
  std::optional<int> num_qk_stages;
  std::optional<int> num_pv_stages;
  std::optional<int> swizzle;
  std::optional<bool> pair_cta;
  std::optional<int> splitk_partitions;
  std::optional<Scheduler> scheduler;
  std::optional<int> consumer_warpgroups;  // sm90: MMA warpgroups (BM / 64)
  std::optional<int> num_warps;            // sm80: warps per CTA
  std::optional<KvLoads> kv_loads;         // decode: cp.async gathers or TMA boxes
  // sm90: one in N of the softmax's exponentials on the FMA pipe instead of the SFU (0 or unset:
  // none, 1: all). Left unset by resolve(), so other configs' canonical form is unchanged.
  std::optional<int> exp2_fma_every;
  // sm90: FA4's conditional rescaling. A row's running max moves only when a tile exceeds it by
  // more than a threshold, and a warp whose rows all kept theirs skips rescaling O. resolve()
  // sets it by the O accumulator's width (family_sm90.cpp); a named value is kept.
  std::optional<bool> lazy_rescale;
  // decode, latent caches on mma.sync warps (sm_90a): S = Q K^T computed as its transpose
  // K Q^T by a wgmma warpgroup per 16 rows, a tile's 64 keys as wgmma's rows, instead of each
  // warp's share of the head dim and the exchange of partial sums. Unset: resolve() sets true
  // where it is the default (family_decode.cpp); a named false is kept.
  std::optional<bool> swap_qk;
  // The key length the kernel is expected to see: tiles left unset are chosen for it. Read by
  // resolve() and not kept in the resolved config, which names the tiles themselves.
  std::optional<int> seqlen_hint;
  // The most query tokens per sequence a launch will have. Up to 16 selects the decode family
  // under "auto", whose tiles pack group x max_seqlen_q rows per KV head; it refuses longer
  // launches. Other families ignore it (resolve drops it).
  std::optional<int> max_seqlen_q;
  bool operator==(const Tuning&) const = default;
};

struct Config {
  std::string arch = "sm_90a";
  DTypes dtype;
  HeadDims head_dim;
  int group = 1;  // query heads per KV head (GQA/MQA)
  Mask mask = Mask::none;
  KvLayout kv_layout;
  bool varlen = false;
  Scales scales;
  bool lse = false;  // outputs.lse
  Tuning tuning;
  // Per-token K scales of each key row: one per scales.k_block nope columns, or one.
  int k_scale_blocks() const { return scales.k_block > 0 ? head_dim.nope() / scales.k_block : 1; }
  // Field by field, so a field added later is compared without anyone remembering to.
  bool operator==(const Config&) const = default;
};

// A hash of the fields that tell configs apart most often (equal configs hash equally); with
// operator== it keys the runtime's table of loaded kernels without serialising the config.
struct ConfigHash {
  std::size_t operator()(const Config& c) const;
};

// One broken rule: where (a dotted JSON path), what was found, and which rule it breaks.
struct ConfigIssue {
  std::string path;
  std::string value;
  std::string rule;
  std::string message() const;
};

class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<ConfigIssue> issues);
  const std::vector<ConfigIssue>& issues() const { return issues_; }

 private:
  std::vector<ConfigIssue> issues_;
};

// JSON <-> Config. parse_config collects every shape/type/unknown-key problem before throwing.
// Text is read within the bounds of generator/user_json.hpp (1 MiB, 64 levels of nesting, no
// key twice in an object); `origin` names it in the errors.
Config parse_config(const nlohmann::json& j);
Config parse_config_text(const std::string& text, const std::string& origin = "config");
Config load_config_file(const std::string& path);
// The steps of the two above: the bounded text of a file, and that text as checked JSON.
std::string read_config_file(const std::string& path);
nlohmann::json parse_config_json(const std::string& text, const std::string& origin);
nlohmann::json to_json(const Config& c);
// Canonical text: sorted keys, no whitespace. Byte-identical for equal configs.
std::string canonical_json(const Config& c);

}  // namespace flashjit
