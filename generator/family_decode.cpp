// The decode family: a few query tokens per sequence (tuning.max_seqlen_q, 1-16 typically)
// against a long contiguous or paged KV cache. An operation of two kernels in one module: the
// split pass (templates/decode/split_kv.cuh), which packs the query heads of a KV head times the
// query tokens into tiles and splits the keys across CTAs, and the combine pass (combine.cuh),
// which merges the splits. The split count is chosen per launch (runtime/host_decode.cpp)
// unless tuning.splitk_partitions names one. On sm_90a, 16-bit caches whose packed rows fill a
// 64-row tile take a wgmma split pass (split_kv_wgmma.cuh, tuning.consumer_warpgroups 1 or 2:
// warpgroups that split each key tile's keys; from 128 rows, BM 128: two warpgroups of 64 rows
// on every key) with the same loads, softmax and merge. fp8
// caches (e4m3, e5m2) keep K/V in fp8 through shared memory and widen them in registers
// (templates/decode/kv_operands.cuh), on every target.
// A shared K/V cache (kv_layout.shared_kv, MLA's latent cache: V is the first head_dim.v columns
// of K; up to kLatentMaxTokens query tokens, so prefill chunks too) takes its own split pass with
// the same combine: mma.sync warps (latent_split.cuh) on every target (fp8 latent caches: only
// these), or on sm_90a two wgmma warpgroups sharing a 64-row tile (latent_wgmma.cuh,
// tuning.consumer_warpgroups 2) once the packed rows fill one; with tuning.kv_loads "tma" the two
// warpgroups take alternate key tiles that a third warpgroup loads (latent_seesaw.cuh; the
// default where TMA boxes apply).
#include "decode/combine_shape.cuh"
#include "decode/latent_regions.cuh"
#include "decode/smem_regions.cuh"
#include "generator/element_types.hpp"
#include "generator/emit.hpp"
#include "generator/family.hpp"
#include "generator/resolve.hpp"
#include "generator/tuning_rules.hpp"
#include "generator/wgmma_emitter.hpp"

#include <algorithm>
#include <optional>
#include <string>

namespace flashjit {

namespace {

constexpr const char* kName = "decode";
constexpr int kMaxSplits = 256;
// Query tokens per sequence (tuning.max_seqlen_q). A latent cache takes whole prefill chunks:
// absorbed MLA prefill against the cache is the same packed-row tiling, one m block per 64 rows
// (half of one token's 128 heads, or four tokens of 16), each reading the keys its rows see.
constexpr int kMaxTokens = 64;
constexpr int kLatentMaxTokens = 16384;
// About this many bytes of K/V in the ring: (stages - 1) tiles in flight cover the memory
// latency at the per-SM share of HBM bandwidth with room to spare (4.8 TB/s / 132 SMs x ~1 us).
constexpr int kRingBytes = 96 * 1024;

int packed_rows(const Config& c) { return c.group * c.tuning.max_seqlen_q.value_or(1); }

int kv_bytes(const Config& c) { return dtype_bytes(c.dtype.qkv); }

bool shared_kv(const Config& c) { return c.kv_layout.shared_kv; }

// A split pass of wgmma warpgroups (tuning.consumer_warpgroups > 0; 0: mma.sync warps).
bool wgmma_pass(const Config& c) { return c.tuning.consumer_warpgroups.value_or(0) > 0; }
bool latent_wgmma(const Config& c) { return shared_kv(c) && wgmma_pass(c); }

bool tma_loads(const Config& c) { return c.tuning.kv_loads == KvLoads::tma; }

// The latent mma.sync pass with S = Q K^T computed as K Q^T by a wgmma warpgroup per 16 rows
// (tuning.swap_qk): a tile's 64 keys are wgmma's rows.
bool swap_qk(const Config& c) { return shared_kv(c) && c.tuning.swap_qk.value_or(false); }
constexpr int kSwapQkKeys = 64;
// "auto" swaps Q K^T on sm_90a's latent mma.sync pass (32 rows: two warpgroups) from this many
// packed rows for a 16-bit cache, from 1 for an fp8 one. H100, MLA, batch 64 x 16k, page 64,
// TFLOP/s idle / sustained, 2026-12-05: e4m3 16 heads 147 / 140 against 115 / 119 unswapped; 32
// rows (32 heads, or 16 heads of two tokens) 194-197 against 132-136; bf16 16 rows 83-87 against
// 90-91 (one CTA an SM), 32 rows 177-179 against 151-155 (FlashInfer 177-181). Two 16-row blocks
// for 32 rows instead: 107-109 (bf16), 187-191 (e4m3).
constexpr int kSwapQkMaxRows = 32;
constexpr int kSwapQk16BitMinRows = 17;

// What of a config's operands swap_qk cannot take, whatever the tile: wgmma multiplies Q and K in
// one type, applies no per-block scales, and reads whole 128-byte panels.
std::vector<ConfigIssue> swap_qk_operand_issues(const Config& c) {
  std::vector<ConfigIssue> issues;
  if (c.dtype.q && *c.dtype.q != c.dtype.qkv)
    issues.push_back({"dtype.q", std::string("\"") + to_string(*c.dtype.q) + "\"",
                      "tuning.swap_qk multiplies Q in the cache's type (wgmma takes both operands in one type)"});
  if (c.scales.k_block > 0)
    issues.push_back({"scales.k_block", std::to_string(c.scales.k_block),
                      "per-block K scales are not taken with tuning.swap_qk"});
  if (c.head_dim.qk % 64 || c.head_dim.rope % 64)
    issues.push_back({"tuning.swap_qk", "true",
                      "needs whole 128-byte panels: head_dim.qk and head_dim.rope multiples of 64"});
  return issues;
}

// Whether "auto" takes swap_qk: a latent cache on the mma.sync pass of sm_90a whose operands it
// takes, V in four whole panels a row block (its BM / 4 warps), at the default tile (nothing of
// it named).
bool swap_qk_by_default(const Config& c, const ArchInfo& arch) {
  const Tuning& t = c.tuning;
  const bool fp8 = is_float8(c.dtype.qkv);
  const int rows = packed_rows(c), panel = fp8 ? 128 : 64;
  const bool rows_ok = rows <= kSwapQkMaxRows && (fp8 || rows >= kSwapQk16BitMinRows);
  const bool tile_unnamed = !t.BM && !t.BN && !t.num_warps && !t.num_kv_stages &&
                            t.consumer_warpgroups.value_or(0) == 0 && t.kv_loads != KvLoads::tma;
  return shared_kv(c) && arch.has_wgmma() && rows_ok && tile_unnamed && c.head_dim.v % (4 * panel) == 0 &&
         swap_qk_operand_issues(c).empty();
}

// The latent seesaw pass: wgmma warpgroups on alternate key tiles, loaded by TMA.
bool latent_seesaw(const Config& c) { return latent_wgmma(c) && tma_loads(c); }
constexpr int kSeesawWarps = 12;  // two wgmma warpgroups and a loader warpgroup
constexpr int kSeesawKeys = 32;   // keys per tile: four stages fit beside Q at 576 columns
// An fp8 cache's seesaw pass: a loader lane dequantises one key row of its warp's panel.
constexpr int kSeesawFp8MaxKeys = 32;
// An fp8 latent cache's ring on mma.sync (tiles of 32 keys, 20 KB at 576 columns).
constexpr int kFp8LatentStages = 3;

// From this many packed rows "auto" gives a cache the wgmma pass on sm_90a (one 64-row tile),
// and from kWgmmaWideRows a 128-row tile (two warpgroups of 64 rows), which reads the cache once
// where two 64-row CTAs would each read it.
constexpr int kWgmmaRows = 64;
constexpr int kWgmmaWideRows = 128;
// The wgmma pass's default tile for a GQA cache: warpgroups, and keys each takes of a tile.
constexpr int kWgmmaWarpgroups = 2;
constexpr int kWgmmaKeys = 64;
// The 128-row tile's keys and stages: each warpgroup takes all of a tile's keys, so its wgmmas
// are twice the 64-row tile's per key (H200, d128, 16 tokens, batch 32 x 32k, page 16,
// sustained, 2026-12-03, 64/8 and 8/1 heads: 2874 and 2618 GB/s, and in the same call 2334 and
// 2054 with 32 keys over four stages; in an earlier call 2648 and 2351 with 64 keys over three,
// 2172 and 2146 for the 64-row tile).
constexpr int kWgmmaWideKeys = 128;
constexpr int kWgmmaWideStages = 2;
// 16-bit caches with head dims up to 64 take tiles of this many keys on mma.sync (H200, d64,
// 32/8 heads, 1 token, batch 8 / 32 x 32k, page 16, sustained, 2026-12-03: 3980 / 4325 GB/s
// against 3733 / 4047 with 64 keys, 3610 / 3939 with 256).
constexpr int kNarrowHeadKeys = 128;

// Warps that split each key tile's keys (SplitKvPass::kWarpsN): those a 16-row block gets. In the
// wgmma pass, the warpgroups that split them (every warp of a warpgroup has its own row block).
int key_splits(int bm, int warps) { return std::max(1, warps / std::max(1, bm / 16)); }

// Whether a 16-bit GQA cache can take the wgmma pass: whole 128-byte panels of Q, K and V, and
// P V one wgmma wide.
bool wgmma_shapes(const Config& c) {
  return !is_float8(c.dtype.qkv) && c.head_dim.qk % 64 == 0 && c.head_dim.v % 64 == 0 && c.head_dim.v <= 256;
}

// The rule both passes' warpgroups share: wgmma exists on sm_90a only.
std::optional<std::string> wgmma_target_issue(const ArchInfo& arch) {
  if (arch.has_wgmma()) return std::nullopt;
  return "wgmma warpgroups need an sm_90a target (" + arch.name + " has none)";
}

// Why a GQA cache's K/V tiles of BN keys cannot arrive as TMA boxes (nullopt: they can). A box
// lands as 128-byte swizzled panels, the layout the passes read; one box takes a page's rows of
// one panel (pages of at least 8 rows keep the swizzle's 8-row period whole) or, where a tile
// lies inside one page or the cache is contiguous, the whole tile.
// A latent cache's boxes are its nope columns (in the cache's type) and its 16-bit rope part;
// the seesaw pass's loader warpgroup reads an fp8 cache's per-token K scales itself.
std::optional<std::string> tma_issue(const Config& c, const ArchInfo& arch, int bn) {
  if (!arch.has_wgmma()) return "TMA loads need an sm_90a target (" + arch.name + " has none)";
  const int e = kv_bytes(c);
  if (shared_kv(c)) {
    if ((c.head_dim.nope() * e) % 128 || (c.head_dim.rope * 2) % 128)
      return "TMA boxes fill whole 128-byte panels: the nope columns (" + std::to_string(c.head_dim.nope()) +
             ") must be a multiple of " + std::to_string(128 / e) + " and the rope part (" +
             std::to_string(c.head_dim.rope) + ") of 64";
  } else if ((c.head_dim.qk * e) % 128 || (c.head_dim.v * e) % 128) {
    return "TMA boxes fill whole 128-byte panels: head dims " + std::to_string(c.head_dim.qk) + "/" +
           std::to_string(c.head_dim.v) + " are not multiples of " + std::to_string(128 / e) + " elements";
  }
  if (!shared_kv(c) && (c.scales.k == ScaleGranularity::per_token || c.scales.v == ScaleGranularity::per_token))
    return "per-token K and V scales come with the cp_async loads (beside each row's offsets)";
  const int page = c.kv_layout.page_size;
  if (c.kv_layout.paged && page < 8)
    return "pages of " + std::to_string(page) + " rows are below a TMA box's 8-row swizzle period (cp_async gathers take them)";
  if (c.kv_layout.paged && page % bn && bn % page)
    return "a tile of BN " + std::to_string(bn) + " keys must hold whole pages of " + std::to_string(page) +
           " rows or lie inside one";
  return std::nullopt;
}

// Whether the seesaw pass takes a latent cache's tile as named (unset fields: its defaults):
// 12 warps, BN up to 64 (32 for an fp8 cache), at least 3 stages, TMA boxes that apply.
bool seesaw_takes(const Config& c, const ArchInfo& arch) {
  const Tuning& t = c.tuning;
  const int bn = t.BN.value_or(kSeesawKeys);
  return t.num_warps.value_or(kSeesawWarps) == kSeesawWarps &&
         bn <= (is_float8(c.dtype.qkv) ? kSeesawFp8MaxKeys : 64) && t.num_kv_stages.value_or(3) >= 3 &&
         !tma_issue(c, arch, bn) && c.head_dim.rope % 64 == 0;
}

int smem_for(const Config& c, int bm, int bn, int warps, int stages) {
  if (shared_kv(c))
    return decode::latent_regions({bm, bn, c.head_dim.qk, warps, stages, latent_seesaw(c),
                                   c.head_dim.rope, kv_bytes(c), c.scales.k == ScaleGranularity::per_token,
                                   c.k_scale_blocks(), swap_qk(c)})
        .total;
  return decode::smem_regions({bm, bn, c.head_dim.qk, c.head_dim.v, warps, stages, kv_bytes(c),
                               c.scales.k == ScaleGranularity::per_token, tma_loads(c),
                               c.scales.v == ScaleGranularity::per_token})
      .total;
}

// CTAs of the latent mma.sync pass that one SM holds (its launch bounds' minimum): as many as
// shared memory allows, while each thread keeps at least kMinLatentRegisters. Four warps at 16
// rows with an fp8 cache's two stages of 32 keys (69 KB) are three; the other tiles' two (or
// one) leave the registers alone.
constexpr int kMinLatentRegisters = 168;
int min_blocks_per_sm(const Config& c, const ArchInfo& arch, int threads) {
  if (!shared_kv(c) || wgmma_pass(c)) return 1;
  const Tuning& t = c.tuning;
  const int by_smem = arch.ctas_by_smem(smem_for(c, *t.BM, *t.BN, *t.num_warps, *t.num_kv_stages));
  const int by_regs = arch.regs_per_sm / (threads * kMinLatentRegisters);
  return std::max(1, std::min(by_smem, by_regs));
}

class DecodeFamily final : public KernelFamily {
 public:
  Family id() const override { return Family::decode; }

  std::optional<ConfigIssue> unsupported(const Config& c, const ArchInfo&) const override {
    if (shared_kv(c)) return latent_unsupported(c);
    const bool fp8 = is_float8(c.dtype.qkv);
    if (c.dtype.qkv != DType::bf16 && c.dtype.qkv != DType::fp16 && !fp8)
      return ConfigIssue{"dtype.qkv", std::string("\"") + to_string(c.dtype.qkv) + "\"",
                         "the decode family reads bf16, fp16, e4m3 or e5m2 caches"};
    if (c.head_dim.qk > 256 || c.head_dim.v > 256)
      return ConfigIssue{"head_dim", std::to_string(c.head_dim.qk) + "/" + std::to_string(c.head_dim.v),
                         "the decode family supports head dims up to 256"};
    // An fp8 tile row is read 32 values (two 16-byte chunks) per tensor-core step.
    if (fp8 && (c.head_dim.qk % 32 || c.head_dim.v % 32))
      return ConfigIssue{"head_dim", std::to_string(c.head_dim.qk) + "/" + std::to_string(c.head_dim.v),
                         "the decode family reads fp8 caches in head dims that are multiples of 32"};
    if (c.head_dim.rope > 0)
      return ConfigIssue{"head_dim.rope", std::to_string(c.head_dim.rope),
                         "the decode family takes rope tensors with a shared K/V cache (kv_layout.shared_kv: MLA) only"};
    if (!fp8)
      if (auto scaled = scale_issues(c, "the decode family applies quantisation scales to fp8 caches (scaled 16-bit inputs run on the sm80 family)");
          !scaled.empty())
        return scaled.front();
    return std::nullopt;
  }

  void resolve_tuning(Config& c, const ArchInfo& arch) const override {
    Tuning& t = c.tuning;
    if (!t.max_seqlen_q) t.max_seqlen_q = 1;
    if (shared_kv(c)) return resolve_latent(c, arch);
    if (!t.consumer_warpgroups) {
      // Unless a tile that wgmma cannot take is named.
      const int bm = t.BM.value_or(64);
      const bool tile = (bm == 64 && (!t.num_warps || *t.num_warps == 4 || *t.num_warps == 8)) ||
                        (bm == 128 && t.num_warps.value_or(8) == 8);
      const bool wgmma = arch.has_wgmma() && wgmma_shapes(c) && tile && packed_rows(c) >= kWgmmaRows;
      t.consumer_warpgroups = !wgmma ? 0 : t.num_warps ? *t.num_warps / 4 : kWgmmaWarpgroups;
    }
    if (*t.consumer_warpgroups == 1 || *t.consumer_warpgroups == 2) {
      // 128 rows where a step packs that many: one CTA, not two, reads each K/V byte.
      if (!t.BM) t.BM = *t.consumer_warpgroups == 2 && packed_rows(c) >= kWgmmaWideRows ? 128 : 64;
      if (!t.num_warps) t.num_warps = 4 * *t.consumer_warpgroups;
      if (!t.BN) {  // fewer keys where two stages of the default would not fit (d256)
        const int warps_n = key_splits(*t.BM, *t.num_warps);
        const int step = 16 * warps_n;
        int bn = *t.BM == 128 ? kWgmmaWideKeys : kWgmmaKeys * warps_n;
        while (bn > step && smem_for(c, *t.BM, bn, *t.num_warps, 2) > arch.max_smem_per_block) bn -= step;
        t.BN = bn;
      }
    }
    // Packed rows per CTA: 16, 32 or 64 (one to four 16-row warps); more rows take more m blocks.
    if (!t.BM) {
      const int rows = packed_rows(c);
      t.BM = rows <= 16 ? 16 : rows <= 32 ? 32 : 64;
    }
    if (!t.num_warps) t.num_warps = 4;
    if (!t.BN) {
      const bool narrow = !is_float8(c.dtype.qkv) && c.head_dim.qk <= 64 && c.head_dim.v <= 64;
      t.BN = std::max(narrow ? kNarrowHeadKeys : 64, 16 * key_splits(*t.BM, *t.num_warps));
    }
    if (!t.kv_loads) {
      // TMA boxes for fp8 caches, whose widening math needs the issue slots the gathers take;
      // 16-bit caches keep the gathers, which read faster (H200, d128, 32/8 heads, 32k keys,
      // sustained, 2026-12-03: e4m3 page 16, 1/4 tokens at batch 8 and 32: TMA 3343/3223 and
      // 3695/3371 GB/s against 3093/2989 and 3409/3151; bf16 1 token at batch 8/32: TMA 3970/4166
      // against 4357/4565 at page 16, 4011/4206 against 4361/4538 contiguous).
      const bool tma = is_float8(c.dtype.qkv) && !tma_issue(c, arch, *t.BN);
      t.kv_loads = tma ? KvLoads::tma : KvLoads::cp_async;
    }
    if (!t.num_kv_stages) {
      // fp8 caches take the stage count a 16-bit cache of the same shape gets (half the ring's
      // bytes): more CTAs fit an SM, and their widening math needs the warps more than the
      // ring needs the depth (H200, e4m3 d128, 32 x 32k, 1/4/16 tokens: 3 stages 3158/2905/1158
      // GB/s against 6 stages 2701/2755/1022, sustained, 2026-12-03).
      // The wgmma pass: three stages where they fit (H200, d128, 32/8 heads, 16 tokens, batch
      // 1/8/32 x 32k, sustained: 2449/3188/3443 GB/s against 2307/3087/3262 with two; 2026-12-03).
      const int stage = *t.BN * (c.head_dim.qk + c.head_dim.v) * 2;
      int stages = *t.BM == 128 ? kWgmmaWideStages : *t.consumer_warpgroups > 0 ? 3 : std::clamp(kRingBytes / stage, 2, 8);
      while (stages > 2 && smem_for(c, *t.BM, *t.BN, *t.num_warps, stages) > arch.max_smem_per_block) --stages;
      t.num_kv_stages = stages;
    }
    if (!t.splitk_partitions) t.splitk_partitions = 0;  // chosen per launch
    if (!t.scheduler) t.scheduler = Scheduler::transient;
  }

  void check_tuning(const Config& c, const ArchInfo& arch, std::vector<ConfigIssue>& issues) const override {
    const Tuning& t = c.tuning;
    auto bad = [&](const char* f, int v, std::string rule) {
      issues.push_back({std::string("tuning.") + f, std::to_string(v), std::move(rule)});
    };
    rules::not_for_family(t.pair_cta, "pair_cta", kName, issues);
    rules::not_for_family(t.exp2_fma_every, "exp2_fma_every", kName, issues);
    rules::not_for_family(t.lazy_rescale, "lazy_rescale", kName, issues);
    rules::not_for_family(t.num_qk_stages, "num_qk_stages", kName, issues);
    rules::not_for_family(t.num_pv_stages, "num_pv_stages", kName, issues);
    rules::not_for_family(t.swizzle, "swizzle", kName, issues);
    const int most_tokens = shared_kv(c) ? kLatentMaxTokens : kMaxTokens;
    if (*t.max_seqlen_q < 1 || *t.max_seqlen_q > most_tokens)
      bad("max_seqlen_q", *t.max_seqlen_q,
          "the decode family takes 1 to " + std::to_string(kMaxTokens) + " query tokens per sequence (1 to " +
              std::to_string(kLatentMaxTokens) + " with a latent cache, kv_layout.shared_kv: chunked prefill)");
    if (shared_kv(c)) return check_latent(c, arch, issues);
    if (t.swap_qk.value_or(false))
      issues.push_back({"tuning.swap_qk", "true", "takes a latent cache (kv_layout.shared_kv)"});
    const int bm = *t.BM, warps = *t.num_warps, bn = *t.BN, cwg = *t.consumer_warpgroups;
    if (bm != 16 && bm != 32 && bm != 64 && (bm != 128 || cwg != 2))
      bad("BM", bm, "must be 16, 32 or 64 (one to four 16-row warps), or 128 with two wgmma warpgroups");
    if (warps != 4 && warps != 8) bad("num_warps", warps, "must be 4 or 8");
    if (cwg < 0 || cwg > 2)
      bad("consumer_warpgroups", cwg, "must be 0 (mma.sync warps), 1 or 2 (wgmma warpgroups that split each key tile)");
    else if (auto target = wgmma_target_issue(arch); cwg > 0 && target)
      bad("consumer_warpgroups", cwg, *target);
    else if (cwg > 0 && !wgmma_shapes(c))
      bad("consumer_warpgroups", cwg, "the wgmma pass reads 16-bit caches with head dims that are multiples of 64, v up to 256");
    else if (cwg > 0) {
      if (bm != 64 && (bm != 128 || cwg != 2))
        bad("BM", bm, "must be 64 with wgmma warpgroups (one 64-row wgmma tile), or 128 with two (64 rows each)");
      if (warps != 4 * cwg) bad("num_warps", warps, "must be 4 x consumer_warpgroups (" + std::to_string(4 * cwg) + ")");
    }
    if (*t.kv_loads == KvLoads::tma)
      if (auto why = tma_issue(c, arch, bn)) issues.push_back({"tuning.kv_loads", "\"tma\"", *why});
    if (!issues.empty()) return;
    if (warps % (bm / 16))
      bad("num_warps", warps, "must be a multiple of BM / 16 (" + std::to_string(bm / 16) + "): each 16-row block gets the same number of warps");
    const int warps_n = warps / (bm / 16);
    if (bn < 16 * warps_n || bn > 256 || bn % (16 * warps_n))
      bad("BN", bn, "must be a multiple of " + std::to_string(16 * warps_n) + " up to 256 (" +
                        std::to_string(warps_n) + " warps split each tile's keys, 16 at a time)");
    check_ring_and_grid(c, arch, issues);
  }

  int smem_bytes(const Config& c) const override {
    const Tuning& t = c.tuning;
    return smem_for(c, *t.BM, *t.BN, *t.num_warps, *t.num_kv_stages);
  }

  KernelSource emit(const Config& c, const ArchInfo& arch) const override {
    const Tuning& t = c.tuning;
    const int threads = *t.num_warps * 32;
    const bool latent = shared_kv(c), wgmma = wgmma_pass(c);
    const bool seesaw = latent_seesaw(c);
    const char* split_header = latent ? (seesaw ? "decode/latent_seesaw.cuh"
                                                : wgmma ? "decode/latent_wgmma.cuh" : "decode/latent_split.cuh")
                                      : (wgmma ? "decode/split_kv_wgmma.cuh" : "decode/split_kv.cuh");
    const char* split_body = latent ? (seesaw ? "flashjit::decode::latent_seesaw"
                                              : wgmma ? "flashjit::decode::latent_wgmma" : "flashjit::decode::latent_split")
                                    : (wgmma ? "flashjit::decode::split_kv_wgmma" : "flashjit::decode::split_kv");
    // wgmma widths: Q K^T's N (a tile's keys: all of them for the latent pass, whose warpgroups
    // split the head dim, a warpgroup's share otherwise) and P V's (a warpgroup's O columns).
    const std::vector<int> widths = latent ? std::vector<int>{*t.BN, c.head_dim.v / 2}
                                           : std::vector<int>{*t.BN / key_splits(*t.BM, *t.num_warps), c.head_dim.v};
    KernelSource s = source_skeleton(c, arch, kName, threads, smem_bytes(c));
    const std::string symbol = s.launch.entry;  // the operation's: its passes take suffixes
    s.launch.entry = symbol + "_split";
    s.launch.passes.push_back({"combine", symbol + "_combine", decode::kCombineThreads, 0});
    emit::Constants constants = {{"kBlockM", std::to_string(*t.BM)},
                                 {"kBlockN", std::to_string(*t.BN)},
                                 {"kNumWarps", std::to_string(*t.num_warps)},
                                 {"kStages", std::to_string(*t.num_kv_stages)},
                                 {"kMaxSeqlenQ", std::to_string(*t.max_seqlen_q)},
                                 {"kThreads", std::to_string(threads)},
                                 {"kSmemBytes", std::to_string(s.launch.smem_bytes)},
                                 {"kTmaKv", tma_loads(c) ? "true" : "false"}};
    s.launch.uses_tma = tma_loads(c);
    const int min_blocks = min_blocks_per_sm(c, arch, threads);
    if (latent) {
      constants.push_back({"kMinBlocksPerSm", std::to_string(min_blocks)});
      constants.push_back({"kSwapQk", swap_qk(c) ? "true" : "false"});
    }
    // The wgmma wrappers: the wgmma passes' GEMMs in the cache's type, or fp16 for an fp8 cache's
    // dequantised stages (the seesaw pass); swap_qk's m64n16 Q K^T (16 rows a warpgroup) in the
    // cache's own type (k32 for fp8). A rope part of another type multiplies in its own steps.
    const bool swapped = swap_qk(c);
    const DType math = is_float8(c.dtype.qkv) && !swapped ? DType::fp16 : c.dtype.qkv;
    const DType rope = c.dtype.rope.value_or(c.dtype.qkv);
    std::string wgmma_source;
    if (wgmma || swapped)
      wgmma_source = "#include \"sm90/wgmma.cuh\"\n\n" +
                     wgmma::specialisations(math, swapped ? std::vector<int>{16} : widths) +
                     (latent && c.head_dim.rope > 0 && rope != math
                          ? wgmma::specialisations(rope, {swapped ? 16 : *t.BN})
                          : std::string());
    s.unit = emit::unit_header(s.name, c) + emit::traits_struct(c, constants) + wgmma_source +
             "#include \"" + split_header + "\"\n#include \"decode/combine.cuh\"\n\n" +
             emit::entry_function(s.launch.entry, threads, min_blocks, split_body) +
             emit::entry_function(symbol + "_combine", decode::kCombineThreads, 1, "flashjit::decode::combine");
    return s;
  }

 private:
  // Shared K/V (MLA): one 16-bit latent tile per key row, nope then rope columns, with V the
  // first head_dim.v nope columns.
  static std::optional<ConfigIssue> latent_unsupported(const Config& c) {
    const char* why = "with kv_layout.shared_kv (V read from K's columns: MLA's latent cache)";
    const bool fp8 = is_float8(c.dtype.qkv);
    if (c.dtype.qkv != DType::bf16 && c.dtype.qkv != DType::fp16 && !fp8)
      return ConfigIssue{"dtype.qkv", std::string("\"") + to_string(c.dtype.qkv) + "\"",
                         std::string("the decode family reads bf16, fp16, e4m3 or e5m2 latent caches ") + why};
    if (fp8 && c.head_dim.rope > 0 && (!c.dtype.rope || is_float8(*c.dtype.rope)))
      return ConfigIssue{"dtype.rope", c.dtype.rope ? std::string("\"") + to_string(*c.dtype.rope) + "\"" : "null",
                         std::string("an fp8 latent cache keeps its rope part 16-bit: dtype.rope bf16 or fp16 ") + why};
    if (!fp8 && c.dtype.rope && *c.dtype.rope != c.dtype.qkv)
      return ConfigIssue{"dtype.rope", std::string("\"") + to_string(*c.dtype.rope) + "\"",
                         std::string("the rope part of a 16-bit latent cache is in dtype.qkv ") + why};
    if (c.head_dim.qk % 64)
      return ConfigIssue{"head_dim.qk", std::to_string(c.head_dim.qk),
                         std::string("must be a multiple of 64 ") + why};
    // An fp8 tile row is its nope bytes then its 16-bit rope part, each in whole 128-byte panels
    // (with qk a multiple of 64, so is the rope part).
    if (fp8 && c.head_dim.nope() % 128)
      return ConfigIssue{"head_dim.qk", std::to_string(c.head_dim.qk),
                         "an fp8 latent cache's nope columns (head_dim.qk - head_dim.rope = " +
                             std::to_string(c.head_dim.nope()) + ") must be a multiple of 128: whole 128-byte panels"};
    // Two or four warps (or two warpgroups) split O's columns in whole 64-column panels; 384
    // would leave two mma.sync warps 192 columns each, more registers than a warp has.
    const int v = c.head_dim.v;
    if ((v != 128 && v != 256 && v != 512) || v > c.head_dim.nope())
      return ConfigIssue{"head_dim.v", std::to_string(v),
                         "V is the first head_dim.v columns of K's nope part: 128, 256 or 512, at most head_dim.qk - "
                         "head_dim.rope (" + std::to_string(c.head_dim.nope()) + ")"};
    // fp8: each warp of a row block takes whole 128-column panels of V; one warp on V 128 would
    // hold all 36 of Q's k-steps beside O and spill.
    if (fp8 && v < 256)
      return ConfigIssue{"head_dim.v", std::to_string(v),
                         "an fp8 latent cache's V is 256 or 512 columns (whole 128-column panels for two or four warps)"};
    if (!fp8) {
      if (auto scaled = scale_issues(c, std::string("16-bit latent caches take no quantisation scales ") + why);
          !scaled.empty())
        return scaled.front();
    } else if (c.scales.v != ScaleGranularity::none) {
      return ConfigIssue{"scales.v", std::string("\"") + to_string(c.scales.v) + "\"",
                         "V is the first head_dim.v columns of K and takes K's scale (scales.k) " + std::string(why)};
    }
    return std::nullopt;
  }

  // mma.sync: 16 packed rows a warp row block; four warps split each block's O columns and Q K^T's
  // head dim; two stages of 32 keys. At 576 columns that is 107 KB for 16 rows, so two CTAs share
  // an SM (H200, MLA bf16, 16 heads, batch 32-128, 4k-32k keys, sustained: 2632-3346 GB/s against
  // 1948-2385 with four stages, 2407-2899 with three of 16 keys; 2026-12-03).
  // wgmma (sm_90a, 64 packed rows or more): 64 rows, two warpgroups, two stages of 48 keys: 206 KB
  // at 576 columns, one CTA an SM (H200, MLA bf16, batch 64 x 16k, sustained: 128 heads 268
  // TFLOP/s against 231 with three stages of 32 keys, 253 with two, 183-185 with 16 keys; 64
  // heads 265 against 240; at 32 heads, 32 rows, no faster than mma.sync, 138 against 137;
  // 2026-12-03).
  // The seesaw pass (kv_loads "tma"): two wgmma warpgroups and a loader warpgroup, 64 rows, key tiles
  // of 32 over as many stages as fit (four at 576 columns: 231,040 bytes with Q).
  // swap_qk (mma.sync with Q K^T on a wgmma warpgroup per 16 rows; swap_qk_by_default says where):
  // 64 keys, two stages, BM / 4 warps.
  static void resolve_latent(Config& c, const ArchInfo& arch) {
    Tuning& t = c.tuning;
    const bool fp8 = is_float8(c.dtype.qkv);
    if (!t.consumer_warpgroups) {
      const bool tile = t.BM.value_or(64) == 64 &&
                        (!t.num_warps || *t.num_warps == 8 || *t.num_warps == kSeesawWarps);  // unless others are named
      // An fp8 cache takes the wgmma warpgroups only on the seesaw pass (its fp16 stages): where
      // TMA loads are named (their rules then name what breaks) or apply to the default tile.
      const bool fp8_seesaw = t.kv_loads == KvLoads::tma || (!t.kv_loads && seesaw_takes(c, arch));
      t.consumer_warpgroups = arch.has_wgmma() && tile && packed_rows(c) >= kWgmmaRows && (!fp8 || fp8_seesaw) ? 2 : 0;
    }
    const bool wgmma = *t.consumer_warpgroups == 2;
    if (!t.swap_qk && !wgmma && swap_qk_by_default(c, arch)) t.swap_qk = true;
    if (!t.kv_loads) {
      // TMA boxes, so the seesaw pass, wherever they apply to the wgmma pass's caches, unless a
      // tile only the ring's pass takes is named (H200, MLA bf16, page 64, batch 64/128 x
      // 16k/32k, 1-2 tokens, 64 and 128 heads, sustained: 425-560 TFLOP/s against the ring's
      // 291-333, 1.5-1.6x; in the seesaw pass four stages of 32 keys 497 at 128 heads, three 351,
      // eight of 16 keys 382; 2026-12-05).
      t.kv_loads = wgmma && seesaw_takes(c, arch) ? KvLoads::tma : KvLoads::cp_async;
    }
    const bool seesaw = wgmma && *t.kv_loads == KvLoads::tma;
    if (!t.BM) t.BM = wgmma ? 64 : packed_rows(c) <= 16 ? 16 : 32;
    if (!t.num_warps) {
      // mma.sync: four warps a row block where V's columns split into four whole panels, else two
      // (fp8: panels of 128 columns).
      const int warps_n = is_float8(c.dtype.qkv) ? c.head_dim.v / 128 : c.head_dim.v >= 256 ? 4 : 2;
      t.num_warps = seesaw ? kSeesawWarps : wgmma ? 8 : swap_qk(c) ? *t.BM / 4 : warps_n * (*t.BM / 16);
    }
    if (!t.BN) t.BN = seesaw ? kSeesawKeys : wgmma ? 48 : swap_qk(c) ? kSwapQkKeys : 32;
    if (!t.num_kv_stages) {
      // The seesaw pass: four stages at 576 columns (an fp8 cache's too: its tiles land inside them).
      int stages = seesaw ? 4 : fp8 && !swap_qk(c) ? kFp8LatentStages : 2;
      while (stages > (seesaw ? 3 : 2) && smem_for(c, *t.BM, *t.BN, *t.num_warps, stages) > arch.max_smem_per_block) --stages;
      t.num_kv_stages = stages;
    }
    if (!t.splitk_partitions) t.splitk_partitions = 0;
    if (!t.scheduler) t.scheduler = Scheduler::transient;
  }

  static void check_latent(const Config& c, const ArchInfo& arch, std::vector<ConfigIssue>& issues) {
    const Tuning& t = c.tuning;
    auto bad = [&](const char* f, int v, std::string rule) {
      issues.push_back({std::string("tuning.") + f, std::to_string(v), std::move(rule)});
    };
    const int bm = *t.BM, warps = *t.num_warps, bn = *t.BN, cwg = *t.consumer_warpgroups;
    if (bn < 16 || bn > 128 || bn % 16) bad("BN", bn, "must be a multiple of 16 from 16 to 128");
    if (swap_qk(c) && cwg != 0)
      issues.push_back({"tuning.swap_qk", "true", "takes the mma.sync pass (tuning.consumer_warpgroups 0)"});
    if (t.kv_loads == KvLoads::tma) {
      if (cwg != 2)
        issues.push_back({"tuning.kv_loads", "\"tma\"",
                          "the latent mma.sync pass gathers its tiles with cp.async; TMA loads come with two wgmma "
                          "warpgroups (tuning.consumer_warpgroups 2)"});
      else if (auto why = tma_issue(c, arch, bn))
        issues.push_back({"tuning.kv_loads", "\"tma\"", *why});
      else if (c.head_dim.rope % 64)
        issues.push_back({"tuning.kv_loads", "\"tma\"",
                          "TMA boxes fill whole 128-byte panels: head_dim.rope " + std::to_string(c.head_dim.rope) +
                              " is not a multiple of 64"});
    }
    if (cwg != 0 && cwg != 2)
      bad("consumer_warpgroups", cwg, "must be 0 (mma.sync warps) or 2 (two wgmma warpgroups share a 64-row tile)");
    else if (cwg == 2 && is_float8(c.dtype.qkv) && !latent_seesaw(c))
      bad("consumer_warpgroups", cwg,
          "an fp8 latent cache takes two wgmma warpgroups only with TMA loads (tuning.kv_loads \"tma\": the seesaw pass "
          "dequantises its tiles into fp16 stages); with cp_async gathers it runs on the mma.sync pass (0)");
    else if (auto target = wgmma_target_issue(arch); cwg == 2 && target)
      bad("consumer_warpgroups", cwg, *target);
    else if (cwg == 2) {
      if (bm != 64) bad("BM", bm, "must be 64 with two wgmma warpgroups (one 64-row wgmma tile)");
      if (latent_seesaw(c)) {
        if (warps != kSeesawWarps) bad("num_warps", warps, "must be 12 with TMA loads (two wgmma warpgroups and a loader warpgroup)");
        if (bn > 64) bad("BN", bn, "must be at most 64 with TMA loads (each warpgroup's P is one tile)");
        else if (is_float8(c.dtype.qkv) && bn > kSeesawFp8MaxKeys)
          bad("BN", bn, "must be at most 32 for an fp8 cache with TMA loads (a loader lane dequantises one key row of a tile)");
        if (*t.num_kv_stages < 3)
          bad("num_kv_stages", *t.num_kv_stages, "must be at least 3 with TMA loads: a warpgroup frees its tile only while it works on its next");
      } else if (warps != 8) {
        bad("num_warps", warps, "must be 8 with two wgmma warpgroups");
      }
      return check_ring_and_grid(c, arch, issues);
    }
    if (bm != 16 && bm != 32 && bm != 64) {
      bad("BM", bm, "must be 16, 32 or 64 (one to four 16-row warp blocks)");
      return;
    }
    if (swap_qk(c)) check_swap_qk(c, arch, issues);
    const int blocks = bm / 16, warps_n = warps / blocks;
    if (warps % blocks || (warps_n != 1 && warps_n != 2 && warps_n != 4))
      bad("num_warps", warps, "must be 1, 2 or 4 warps per 16-row block (BM / 16 = " + std::to_string(blocks) +
                                  "): they split the head dim's 64-column panels four k-steps at a time");
    else if (const int panel = is_float8(c.dtype.qkv) ? 128 : 64; c.head_dim.v % (panel * warps_n))
      bad("num_warps", warps, "the " + std::to_string(warps_n) + " warps of a row block each take whole " +
                                  std::to_string(panel) + "-column panels of V (" + std::to_string(c.head_dim.v) + " columns)");
    else if (const int kb = c.scales.k_block; kb > 0 && kb % (c.head_dim.v / warps_n))
      bad("num_warps", warps, "each warp's " + std::to_string(c.head_dim.v / warps_n) +
                                  " V columns must lie in one block of scales.k_block " + std::to_string(kb) +
                                  " columns (its P takes that block's scales)");
    check_ring_and_grid(c, arch, issues);
  }

  // tuning.swap_qk: a wgmma warpgroup for each 16 rows of the tile multiplies each tile's 64 keys
  // by its rows of Q, both operands K-major from shared memory in the ring's 128-byte panels; Q
  // stays in the cache's type, so its scale applies to S, as K's does.
  static void check_swap_qk(const Config& c, const ArchInfo& arch, std::vector<ConfigIssue>& issues) {
    const Tuning& t = c.tuning;
    auto bad = [&](const char* f, int v, std::string rule) {
      issues.push_back({std::string("tuning.") + f, std::to_string(v), std::move(rule)});
    };
    if (auto target = wgmma_target_issue(arch))
      return issues.push_back({"tuning.swap_qk", "true", *target});
    if (*t.BM != 16 && *t.BM != 32)
      bad("BM", *t.BM, "must be 16 or 32 with tuning.swap_qk (each warpgroup's 16 rows are its wgmma's N)");
    else if (*t.num_warps != *t.BM / 4)
      bad("num_warps", *t.num_warps,
          "must be " + std::to_string(*t.BM / 4) + " with tuning.swap_qk (a wgmma warpgroup per 16 rows)");
    if (*t.BN != kSwapQkKeys)
      bad("BN", *t.BN, "must be 64 with tuning.swap_qk (a tile's keys are the wgmma's 64 rows)");
    for (ConfigIssue& issue : swap_qk_operand_issues(c)) issues.push_back(std::move(issue));
  }

  // The rules both split passes share: the ring's depth, the split count, the grid, and the
  // shared memory of the whole tile.
  static void check_ring_and_grid(const Config& c, const ArchInfo& arch, std::vector<ConfigIssue>& issues) {
    const Tuning& t = c.tuning;
    auto bad = [&](const char* f, int v, std::string rule) {
      issues.push_back({std::string("tuning.") + f, std::to_string(v), std::move(rule)});
    };
    if (*t.num_kv_stages < 2 || *t.num_kv_stages > 8) bad("num_kv_stages", *t.num_kv_stages, "must be 2 to 8");
    if (*t.splitk_partitions < 0 || *t.splitk_partitions > kMaxSplits)
      bad("splitk_partitions", *t.splitk_partitions,
          "must be 0 (chosen per launch) or a split count up to " + std::to_string(kMaxSplits));
    if (*t.scheduler != Scheduler::transient)
      issues.push_back({"tuning.scheduler", std::string("\"") + to_string(*t.scheduler) + "\"",
                        "the decode family launches one CTA per (split, row block, KV head, batch entry)"});
    if (!issues.empty()) return;
    const int smem = smem_for(c, *t.BM, *t.BN, *t.num_warps, *t.num_kv_stages);
    if (smem > arch.max_smem_per_block)
      bad("num_kv_stages", *t.num_kv_stages, "needs " + std::to_string(smem) + " bytes of shared memory; " +
                                                 arch.name + " allows " + std::to_string(arch.max_smem_per_block));
  }
};

}  // namespace

const KernelFamily& family_decode() {
  static const DecodeFamily f;
  return f;
}

}  // namespace flashjit
