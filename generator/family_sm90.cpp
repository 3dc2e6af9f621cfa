// The sm90 family: Hopper forward with TMA loads on mbarrier rings, wgmma (SS for QK^T, RS for
// PV), a producer warpgroup and 1-3 consumer warpgroups with setmaxnreg, ping-pong scheduling
// between consumers, and transient, persistent or dynamic tile schedulers.
#include "generator/element_types.hpp"
#include "generator/emit.hpp"
#include "generator/family.hpp"
#include "generator/resolve.hpp"
#include "generator/sm90_spill_limits.hpp"
#include "generator/tuning_rules.hpp"
#include "generator/wgmma_emitter.hpp"
#include "sm90/smem_regions.cuh"

#include <algorithm>
#include <stdexcept>

namespace flashjit {

namespace {

constexpr const char* kName = "sm90";

// The expected key length, when the config gives one (tuning.seqlen_hint). Without it the
// defaults stay those chosen over the grid's lengths as a whole.
struct Length {
  std::optional<int> hint;
  bool at_most(int n) const { return hint && *hint <= n; }
  bool at_least(int n) const { return hint && *hint >= n; }
};

struct Sm90Tile {
  int cwg, BN, stages;
  int BM() const { return 64 * cwg; }
};

// What shared memory holds besides one Q buffer and the K/V ring, where it fits (sm_90a: 227 KB):
//  - O slabs, one 64 x dv block per consumer, the source of its TMA store. That frees the
//    consumers after a few hundred cycles instead of a microsecond of global stores. Not for
//    ragged batches: a TMA store cannot stop at a sequence end inside the packed rows.
//  - then a second Q buffer, so the next tile's Q loads while this one runs instead of after
//    its last Q K^T (short tiles waited for it).
struct SmemPlan {
  bool o_slabs = false;
  int q_stages = 1;
  int bytes = 0;
};

// The regions are laid out by templates/sm90/smem_regions.cuh, which the kernel's SmemLayout
// uses too; here we only choose which optional regions fit.
SmemPlan smem_plan(const Config& c, const Sm90Tile& t, const ArchInfo& arch) {
  sm90::SmemShape shape{t.BM(),
                        t.BN,
                        c.head_dim.qk,
                        c.head_dim.v,
                        dtype_bytes(c.dtype.qkv),
                        dtype_bytes(c.dtype.out),
                        t.stages,
                        1,
                        0,
                        is_float8(c.dtype.qkv),
                        c.head_dim.rope,
                        dtype_bytes(c.dtype.rope.value_or(c.dtype.qkv)),
                        c.scales.k == ScaleGranularity::per_token};
  auto bytes = [&] { return sm90::smem_regions(shape).total; };
  const int limit = arch.max_smem_per_block;
  SmemPlan p;
  shape.o_slabs = t.cwg;
  if (!c.varlen && bytes() <= limit) p.o_slabs = true;
  else shape.o_slabs = 0;
  shape.q_stages = 2;
  if (bytes() <= limit) p.q_stages = 2;
  else shape.q_stages = 1;
  p.bytes = bytes();
  return p;
}

// The longest-first (causal) order's head groups: as many (batch, head) pairs as have K/V within
// ~32 MB of L2. H200 measurements (docs/sm90.md, steps 3 and 8): with the dynamic scheduler the
// groups pay at every head dim. At d256 causal the global order read 447 MB from DRAM at 512 and
// 719 MB at 2k (the minimum is ~270 MB), grouped 256 and 297 MB (bf16, TFLOP/s: 512 279 -> 340,
// 1k 385 -> 466). The static persistent schedule strides over the order, so a group narrower
// than a wave mixes long and short tiles; above d128 it keeps one global order (d256 causal 8k:
// 567 vs 421).
long long lpt_l2_bytes(const Config& c, Scheduler scheduler) {
  if (c.mask != Mask::causal) return 0;
  const bool wide = std::max(c.head_dim.qk, c.head_dim.v) > 128;
  return wide && scheduler != Scheduler::dynamic ? 0 : 32ll << 20;
}

// Registers each consumer thread gets after setmaxnreg (the producer keeps 24-56); how large a
// tile fits them without spills is sm90_spill_free_bn's (measured) table.
// fp8 kernels' producer warpgroup also transposes V (three warps), which takes 40 registers.
int consumer_regs(int cwg, bool fp8) { return cwg == 1 ? 256 : cwg == 2 ? (fp8 ? 232 : 240) : (fp8 ? 152 : 160); }
int producer_regs(int cwg, bool fp8) { return cwg == 1 ? 56 : fp8 ? 40 : cwg == 2 ? 24 : 32; }

// fp8 P V steps take 32 keys (k32), so fp8 tiles come in multiples of 32 keys.
int bn_step(const Config& c) { return is_float8(c.dtype.qkv) ? 32 : 16; }

std::string mask_phrase(const Config& c) {
  return c.mask == Mask::none ? "no mask" : std::string("a ") + to_string(c.mask) + " mask";
}

class Sm90Family final : public KernelFamily {
 public:
  Family id() const override { return Family::sm90; }

  std::optional<ConfigIssue> unsupported(const Config& c, const ArchInfo& arch) const override {
    if (c.dtype.q && *c.dtype.q != c.dtype.qkv)
      return ConfigIssue{"dtype.q", std::string("\"") + to_string(*c.dtype.q) + "\"",
                         "the sm90 family reads Q in dtype.qkv; a 16-bit Q beside an fp8 cache runs on the decode "
                         "and sm80 families"};
    if (!arch.has_wgmma())
      return ConfigIssue{"arch", "\"" + arch.name + "\"",
                         "the sm90 family needs the sm_90a target (wgmma, setmaxnreg)"};
    // Swizzled TMA panels (common/swizzle_panels.cuh): 64 columns of a 16-bit type fill a
    // 128-byte panel; fp8 rows take 128-byte panels, or 64-byte ones where 64 or 192 columns
    // leave half a panel. A rope part in its own tensors (MLA prefill: q_rope, k_rope, 16-bit)
    // fills whole 128-byte panels after the nope part's in the same tiles: 64 columns each.
    const bool fp8 = is_float8(c.dtype.qkv);
    const int rope = c.head_dim.rope, nope = c.head_dim.qk - rope;
    const std::string dims = std::string("the sm90 family needs a multiple of 64 up to 256 (whole swizzled TMA "
                                         "panels") + (fp8 ? "; other fp8 head dims run on the sm80 family)" : ")");
    if (nope % 64 || c.head_dim.qk > 256)
      return ConfigIssue{"head_dim.qk", std::to_string(c.head_dim.qk),
                         rope ? dims + " in its " + std::to_string(nope) + " nope columns" : dims};
    if (c.head_dim.v % 64 || c.head_dim.v > 256)
      return ConfigIssue{"head_dim.v", std::to_string(c.head_dim.v), dims};
    if (fp8 && rope && nope % 128)
      return ConfigIssue{"head_dim.qk", std::to_string(c.head_dim.qk),
                         "beside a rope part the sm90 family takes fp8 nope columns in whole 128-byte panels: a "
                         "multiple of 128 (here " + std::to_string(nope) + "; such configs run on the sm80 family)"};
    // fp8 pairs of head dims whose register limits are measured (sm90_spill_limits.cpp).
    if (fp8 && sm90_spill_free_bn(c, 2, false) == 0)
      return ConfigIssue{"head_dim", std::to_string(c.head_dim.qk) + " / " + std::to_string(c.head_dim.v),
                         "the sm90 family's fp8 kernels take head_dim.qk / v of 64 / 64, 128 or 256 / 128 or 256, "
                         "and 192 / 128 (other fp8 head dims run on the sm80 family)"};
    if (fp8 && c.dtype.out != DType::bf16 && c.dtype.out != DType::fp16)
      return ConfigIssue{"dtype.out", std::string("\"") + to_string(c.dtype.out) + "\"",
                         "the sm90 family writes fp8 attention's output in bf16 or fp16"};
    if (rope % 64)
      return ConfigIssue{"head_dim.rope", std::to_string(rope),
                         "the sm90 family loads the rope part in whole 128-byte panels: a multiple of 64"};
    // Beside fp8 nope columns the rope part is bf16: the consumers divide Q's rope columns by the
    // row's Q and K scales, so that one accumulator takes both GEMMs (fp16 would overflow there).
    if (rope && fp8 && c.dtype.rope != DType::bf16)
      return ConfigIssue{"dtype.rope", std::string("\"") + to_string(c.dtype.rope.value_or(c.dtype.qkv)) + "\"",
                         "the sm90 family takes a bf16 rope part beside fp8 nope columns (other rope types run on "
                         "the sm80 family)"};
    if (c.kv_layout.paged)
      return ConfigIssue{"kv_layout.paged", "true",
                         "the sm90 family reads contiguous caches (paged configs run on the sm80 family)"};
    if (!fp8)
      if (auto scaled = scale_issues(c, "the sm90 family applies quantisation scales to fp8 inputs (scaled 16-bit inputs run on the sm80 family)");
          !scaled.empty())
        return scaled.front();
    // Per-tensor and per-head scales are one number per tile, per-token Q scales one per row;
    // per-token K scales would scale every score column and run on the sm80 family.
    // Per-token K scales multiply S's columns (the producer warp writes each K stage's beside its
    // TMA), not beside a rope part (whose product they do not scale).
    if (c.scales.k == ScaleGranularity::per_token && c.head_dim.rope > 0)
      return ConfigIssue{"scales.k", "\"per_token\"",
                         "the sm90 family takes per-token K scales without a rope part (with one they run on the "
                         "sm80 family)"};
    if (c.scales.v == ScaleGranularity::per_token)
      return ConfigIssue{"scales.v", "\"per_token\"",
                         "the sm90 family takes per_tensor or per_head V scales (per_token runs on the sm80 family)"};
    return std::nullopt;
  }

  void resolve_tuning(Config& c, const ArchInfo& arch) const override {
    Tuning& t = c.tuning;
    // Three consumers (BM 192) for small head dims without a mask, where two leave the tensor
    // cores idle during the softmax (H200, d64 non-causal 8k: 524 vs 436 TFLOP/s). Masked
    // tiles are shorter, and BM 128 wastes less of them on the diagonal. With a length hint
    // (H200, bf16, 2026-11-30, TFLOP/s): d64 non-causal up to 1k takes BM 128 (512: 355 vs
    // 309; 2k: 421 vs 450), d64 causal from 4k BM 192 (8k: 489 vs 433; 1k: 252 vs 309).
    const int d = std::max(c.head_dim.qk, c.head_dim.v);
    const bool masked = c.mask != Mask::none, causal = c.mask == Mask::causal;
    const Length len{t.seqlen_hint};
    // The long-sequence rules are for causal masks: sliding-window tiles carry more mask code
    // and spill with the larger tiles.
    // fp8 d64 takes three consumers without a mask at every length and causal from 2k (H100,
    // e4m3, sustained TFLOP/s, BN 128, three consumers vs two: none 512 428 vs 391, causal 2k
    // 418 vs 396; causal 512 232 vs 245).
    const bool fp8 = is_float8(c.dtype.qkv);
    if (!t.consumer_warpgroups) {
      int cwg = t.BM   ? std::max(1, *t.BM / 64)
                : d > 64 ? 2
                : fp8    ? (masked ? (causal && len.at_least(2048) ? 3 : 2) : 3)
                         : (masked ? (causal && len.at_least(4096) ? 3 : 2) : (len.at_most(1024) ? 2 : 3));
      // A pinned BN takes a consumer count whose registers hold it without spills.
      const bool pair = t.pair_cta.value_or(false);
      if (t.BN && !t.BM && *t.BN > sm90_spill_free_bn(c, cwg, pair))
        for (int alt : {2, 1, 3})
          if (*t.BN <= sm90_spill_free_bn(c, alt, pair)) {
            cwg = alt;
            break;
          }
      t.consumer_warpgroups = cwg;
    }
    if (!t.BM) t.BM = 64 * *t.consumer_warpgroups;
    // Three K/V stages for d64 causal on two consumers: its tiles are 1-4 blocks long, and the
    // deeper ring has the next tile's K/V in flight sooner (H200, bf16, L2 flushed, two runs,
    // TFLOP/s, 3 vs 2 stages: 512 235.5 vs 231.5, 1k 313 vs 309, 2k 374 vs 372.5).
    // fp8 d128 without a mask up to 8k keys: BN 128 on three stages (pick_bn), where BN 192 on
    // two is slower (H100, e4m3, sustained TFLOP/s, three stages vs BN 192: 512 602 vs 538, 1k
    // 707 vs 619, 2k 718 vs 705, 4k 740 vs 706, 8k 779 vs 770; 16k 754 vs 771).
    const bool fp8_d128_short = fp8 && d <= 128 && !masked && len.at_most(8192) &&
                                (!t.BN || *t.BN <= 128);
    if (!t.num_kv_stages)
      t.num_kv_stages = (d <= 64 && causal && *t.consumer_warpgroups == 2) || fp8_d128_short ? 3 : 2;
    if (!t.BN) t.BN = pick_bn(c, arch, *t.consumer_warpgroups, *t.num_kv_stages);
    // pair_cta stays opt-in: d256 causal up to 1k gained 9 % with K/V warm in L2 (H200, bf16,
    // BN 64, back-to-back launches: 512 298 vs 275, 1k 417 vs 382 TFLOP/s) but nothing in the
    // benchmark grid, which flushes L2 (512 236 vs 243, 1k 331 vs 330).
    if (!t.pair_cta) t.pair_cta = false;
    // Masked tiles differ in length, so CTAs draw them dynamically; equal tiles need no atomic.
    // A pair_cta cluster needs both CTAs on one head, which a static order gives.
    if (!t.scheduler)
      t.scheduler = c.mask == Mask::none || *t.pair_cta ? Scheduler::persistent : Scheduler::dynamic;
    // Lazy rescaling saves the O multiply of most tiles for a compare, a vote and a branch per
    // tile, so it pays where O is wide. Sustained, against the same kernels without it
    // (docs/sm90.md): H200 bf16 d128 0 to +7 %, d256 +3 to +6 %; H100 bf16 d64 -5 to +0.5 %;
    // H100 e4m3 (threshold 0.5, so rows move more often) d128 -2 to -6 %, d256 -3 to +4 %.
    if (!t.lazy_rescale) t.lazy_rescale = c.head_dim.v >= (is_float8(c.dtype.qkv) ? 256 : 128);
    if (!t.swizzle) t.swizzle = 128;
    if (!t.num_qk_stages) t.num_qk_stages = 1;
    if (!t.num_pv_stages) t.num_pv_stages = 1;
    if (!t.splitk_partitions) t.splitk_partitions = 1;
  }

  void check_tuning(const Config& c, const ArchInfo& arch,
                    std::vector<ConfigIssue>& issues) const override {
    const Tuning& t = c.tuning;
    auto bad = [&](const char* f, int v, std::string rule) {
      issues.push_back({std::string("tuning.") + f, std::to_string(v), std::move(rule)});
    };
    int cwg = *t.consumer_warpgroups;
    if (cwg < 1 || cwg > 3) bad("consumer_warpgroups", cwg, "must be 1, 2 or 3");
    else if (*t.BM != 64 * cwg)
      bad("BM", *t.BM, "each consumer warpgroup owns 64 rows, so BM must be 64 x consumer_warpgroups (" +
          std::to_string(64 * cwg) + ")");
    if (*t.BN < 16 || *t.BN > 256 || *t.BN % 16)
      bad("BN", *t.BN, "must be a multiple of 16 between 16 and 256 (wgmma N)");
    else if (*t.BN % bn_step(c))
      bad("BN", *t.BN, "must be a multiple of 32 for fp8 inputs (P V takes 32 keys per wgmma step)");
    if (*t.num_kv_stages < 2 || *t.num_kv_stages > 4)
      bad("num_kv_stages", *t.num_kv_stages, "must be 2, 3 or 4");
    rules::only_value(t.swizzle, 128, "swizzle", kName, issues);
    rules::only_value(t.num_qk_stages, 1, "num_qk_stages", kName, issues);
    rules::only_value(t.num_pv_stages, 1, "num_pv_stages", kName, issues);
    rules::only_value(t.splitk_partitions, 1, "splitk_partitions", kName, issues);
    // Per-token K scales in pairs would need each CTA's producer warp to write its own copy of a
    // stage's scales, and register limits of their own: not built yet.
    if (*t.pair_cta && c.scales.k == ScaleGranularity::per_token)
      issues.push_back({"tuning.pair_cta", "true",
                        "the sm90 family's kernels with per-token K scales run single CTAs (pairs with them "
                        "are not implemented yet)"});
    if (*t.pair_cta && *t.scheduler == Scheduler::dynamic)
      issues.push_back({"tuning.scheduler", "\"dynamic\"",
                        "pair_cta clusters take their tiles from a static order: use \"persistent\" or "
                        "\"transient\""});
    rules::not_for_family(t.num_warps, "num_warps", kName, issues);
    rules::not_for_family(t.kv_loads, "kv_loads", kName, issues);
    rules::not_for_family(t.swap_qk, "swap_qk", kName, issues);
    if (t.exp2_fma_every && (*t.exp2_fma_every < 0 || *t.exp2_fma_every > 8))
      bad("exp2_fma_every", *t.exp2_fma_every,
          "must be 0 (every exponential on the SFU), 1 (all on the FMA pipe) or up to 8 (one in that many)");
    if (!issues.empty()) return;
    Sm90Tile tile{cwg, *t.BN, *t.num_kv_stages};
    int smem = smem_plan(c, tile, arch).bytes;
    if (smem > arch.max_smem_per_block)
      bad("BN", *t.BN, "needs " + std::to_string(smem) + " bytes of shared memory; " + arch.name +
          " allows " + std::to_string(arch.max_smem_per_block));
    // Spilled accumulators cost more than a smaller tile: such a tile is not built.
    const int spill_free = sm90_spill_free_bn(c, cwg, *t.pair_cta);
    const std::string shape = std::to_string(cwg) + (cwg == 1 ? " consumer warpgroup" : " consumer warpgroups") +
                              " at head_dim.qk " + std::to_string(c.head_dim.qk) + " / v " +
                              std::to_string(c.head_dim.v) + " with " + mask_phrase(c) +
                              (*t.pair_cta ? " and pair_cta" : "");
    if (spill_free == 0)
      bad("consumer_warpgroups", cwg, "no BN compiles without register spills on " + shape + "; use fewer");
    else if (*t.BN > spill_free)
      bad("BN", *t.BN, "spills registers on " + shape + "; tiles up to BN " + std::to_string(spill_free) +
          " compile without spills");
  }

  int smem_bytes(const Config& c) const override {
    const Tuning& t = c.tuning;
    // A resolved config names a concrete target (resolution rejects any other).
    const std::optional<ArchInfo> arch = parse_arch(c.arch);
    if (!arch) throw std::invalid_argument("sm90 smem_bytes: unresolved arch \"" + c.arch + "\"");
    return smem_plan(c, {*t.consumer_warpgroups, *t.BN, *t.num_kv_stages}, *arch).bytes;
  }

  KernelSource emit(const Config& c, const ArchInfo& arch) const override {
    const Tuning& t = c.tuning;
    int cwg = *t.consumer_warpgroups;
    int threads = 128 * (cwg + 1);
    bool dynamic = *t.scheduler == Scheduler::dynamic;
    bool persistent = dynamic || *t.scheduler == Scheduler::persistent;
    const bool fp8 = is_float8(c.dtype.qkv);
    KernelSource s = source_skeleton(c, arch, kName, threads, smem_bytes(c));
    s.launch.persistent = persistent;
    s.launch.tile_counter = dynamic;
    s.launch.uses_tma = true;
    const SmemPlan plan = smem_plan(c, {cwg, *t.BN, *t.num_kv_stages}, arch);
    s.launch.tma_store_o = plan.o_slabs;
    s.launch.cluster_m = *t.pair_cta ? 2 : 1;
    s.launch.lpt_l2_bytes = lpt_l2_bytes(c, *t.scheduler);
    std::vector<int> widths = {*t.BN, c.head_dim.v};
    // fp8 P V over Vt's rows of ones: 8 more columns, the row sums (smem_regions.cuh).
    if (fp8 && sm90::vt_sums_rows(c.head_dim.v)) widths.push_back(c.head_dim.v + sm90::kVtSumRows);
    s.unit = emit::unit_header(s.name, c) +
             emit::traits_struct(
                 c, {{"kBlockM", std::to_string(*t.BM)},
                     {"kBlockN", std::to_string(*t.BN)},
                     {"kConsumerWarpgroups", std::to_string(cwg)},
                     {"kStages", std::to_string(*t.num_kv_stages)},
                     {"kPersistent", persistent ? "true" : "false"},
                     {"kDynamic", dynamic ? "true" : "false"},
                     {"kTmaStoreO", plan.o_slabs ? "true" : "false"},
                     {"kPairCta", *t.pair_cta ? "true" : "false"},
                     {"kFmaExp2Every", std::to_string(t.exp2_fma_every.value_or(0))},
                     {"kLazyRescale", *t.lazy_rescale ? "true" : "false"},
                     {"kQStages", std::to_string(plan.q_stages)},
                     {"kProducerRegs", std::to_string(producer_regs(cwg, fp8))},
                     {"kConsumerRegs", std::to_string(consumer_regs(cwg, fp8))},
                     {"kThreads", std::to_string(threads)},
                     {"kSmemBytes", std::to_string(s.launch.smem_bytes)}}) +
             "#include \"sm90/wgmma.cuh\"\n\n" + wgmma::specialisations(c.dtype.qkv, widths) + rope_wgmma(c) +
             "\n#include \"sm90/attention_fwd.cuh\"\n\n" +
             emit::entry_function(s.launch.entry, threads, 1, "flashjit::sm90::attention_fwd");
    return s;
  }

 private:
  // Beside fp8 nope columns, Q K^T's rope k-steps are 16-bit wgmma of BN columns.
  static std::string rope_wgmma(const Config& c) {
    if (c.head_dim.rope == 0 || !is_float8(c.dtype.qkv)) return "";
    return wgmma::specialisations(*c.dtype.rope, {*c.tuning.BN});
  }

  // FlashAttention-3's tile table as the starting point, shrunk until it fits the budgets.
  int pick_bn(const Config& c, const ArchInfo& arch, int cwg, int stages) const {
    int d = std::max(c.head_dim.qk, c.head_dim.v);
    bool masked = c.mask != Mask::none;
    const Length len{c.tuning.seqlen_hint};
    // H200 sweeps (bf16, FA3 grid shapes, TFLOP/s at seqlen 512 / 2k / 8k / 16k):
    //   d128 non-causal BN 128: 458 / 598 / 639 / 592, 176: 442 / 607 / 652 / 622,
    //                   BN 192: 416 / 599 / 651 / 626;
    //   d128 causal     BN 128: 274 / 515 / 626 / 623, 176: 249 / 498 / 638 / 665;
    //   d256 causal     BN  80: 2k 503, 8k 709;  BN 64: 492, 654.
    // With a length hint (2026-11-30): d128 non-causal up to 2k takes BN 128, whose O slabs fit
    // for the TMA-store epilogue (1k: 596 vs 571 for BN 176 from registers, 2k: 635 vs 626; 8k:
    // 666 vs 654, within run-to-run spread, so the default stays); d128 causal from 8k BN 176
    // (648 vs 635; 1k: 393 vs 425); d256 causal up to 1k BN 64 (512: 271 vs 246; 2k: 519 vs
    // 526; BN 48, where O slabs fit, is slower: 272 at 512, 505 at 2k).
    // Sliding-window tiles carry the most mask code: d192 and d256 take smaller tiles, which
    // compile without spills.
    const bool causal = c.mask == Mask::causal, window = c.mask == Mask::sliding_window;
    int bn = d <= 64    ? (cwg == 3 ? 112 : masked || len.at_most(1024) ? 128 : 192)
             : d <= 128 ? (masked ? (causal && len.at_least(8192) ? 176 : 128) : (len.at_most(2048) ? 128 : 176))
             : d <= 192 ? (window ? 96 : 112)
                        : (window || (masked && len.at_most(1024)) ? 64 : 80);
    // fp8 (H100 80GB HBM3, 2026-12-06, e4m3 with per-tensor scales, FA3 grid shapes, sustained
    // TFLOP/s; docs/sm90.md, "fp8 tiles"):
    //   d128 without a mask: BN 192 on two stages, or 128 on three (resolve_tuning, up to 8k);
    //   d128 causal BN 192 from 8k (8k 729 vs 703, 16k 782 vs 720), 128 below (1k 498 vs 476,
    //   2k 630 vs 590, 4k 688 vs 683); sliding windows 128;
    //   d256 BN 96 on two consumers, which fp8's register table allows (without a mask 1k-16k
    //   +4 to +11 % over BN 64, causal 1k-16k -2 to +4 %), 64 at 512 keys (603 vs 590) and with
    //   a sliding window. Other head dims above 128 start from the 16-bit table's limit, the tiles
    //   timed when the fp8 kernels came.
    const bool pair = c.tuning.pair_cta.value_or(false);
    if (is_float8(c.dtype.qkv)) {
      Config as_16bit = c;
      as_16bit.dtype.qkv = DType::bf16;
      const bool d256 = c.head_dim.qk == 256 && c.head_dim.v == 256 && c.head_dim.rope == 0;
      bn = d <= 128 ? (!masked ? (stages >= 3 ? 128 : 192) : causal && len.at_least(8192) ? 192 : 128)
           : d256   ? (window || len.at_most(512) ? 64 : 96)
                    : sm90_spill_free_bn(as_16bit, cwg, pair);
    }
    const int spill_free = sm90_spill_free_bn(c, cwg, pair);
    const int step = bn_step(c);
    bn -= bn % step;
    while (bn > step && (smem_plan(c, {cwg, bn, stages}, arch).bytes > arch.max_smem_per_block || bn > spill_free))
      bn -= step;
    return bn;
  }
};

}  // namespace

const KernelFamily& family_sm90() {
  static const Sm90Family f;
  return f;
}

}  // namespace flashjit
