// The sm80 family: FlashAttention-2-style forward on mma.sync (ldmatrix, cp.async multistage).
// Runs on every GPU from Ampere on; the fallback where the sm90 family does not apply.
#include "generator/element_types.hpp"
#include "generator/emit.hpp"
#include "generator/family.hpp"
#include "generator/resolve.hpp"
#include "generator/tuning_rules.hpp"
#include "sm80/smem_regions.cuh"

namespace flashjit {

namespace {

constexpr const char* kName = "sm80";

struct Sm80Tile {
  int BM, BN, warps, stages;
  bool operator==(const Sm80Tile&) const = default;
};

// The layout is templates/sm80/smem_regions.cuh's, which the kernel uses too.
int smem_for(const Config& c, const Sm80Tile& t) {
  return sm80::smem_regions({t.BM, t.BN, c.head_dim.qk, c.head_dim.v, t.warps, t.stages}).total;
}

// fp32 accumulator registers per thread: the S tile plus the O tile of one warp's rows.
int accumulator_regs(const Config& c, const Sm80Tile& t) {
  int rows = t.BM / t.warps;
  return rows * t.BN / 32 + rows * c.head_dim.v / 32;
}

constexpr int kMaxAccumulatorRegs = 192;

// Whether ptxas keeps a tile in registers without spilling, as measured on sm_80 (NVRTC 13.0,
// bisecting BN with the LSE written, a ragged batch and a sliding window, which take the most):
// one K/V stage holds 176 accumulators (BN/32 + v/32 per warp row; 16 fewer above BN 64, with
// rope columns or on sm_100+), two stages 128 for 32-row warps; with 16-row warps and two stages
// each key column costs more the longer the Q K^T reduction (qk 256 v 128: BN 64 fits, BN 80
// spills). It steers the choices beside pinned fields and bounds pinned tiles; the defaults
// (pick() without pins) are compiled for every target by the suite.
bool spill_free(const Config& c, const Sm80Tile& t, const ArchInfo& arch) {
  const int rows = t.BM / t.warps;
  const int budget = 176 - (c.head_dim.rope > 0 || arch.major >= 10 ? 16 : 0) - (t.BN > 64 ? 16 : 0);
  if (t.stages == 1) return accumulator_regs(c, t) <= budget;
  if (rows == 32) return accumulator_regs(c, t) <= budget - 48;
  return rows * t.BN * (128 + c.head_dim.qk) / (32 * 128) + rows * c.head_dim.v / 32 <= budget;
}

class Sm80Family final : public KernelFamily {
 public:
  Family id() const override { return Family::sm80; }

  std::optional<ConfigIssue> unsupported(const Config& c, const ArchInfo&) const override {

    if (c.head_dim.qk > 256)
      return ConfigIssue{"head_dim.qk", std::to_string(c.head_dim.qk),
                         "the sm80 family supports head dims up to 256"};
    if (c.head_dim.v > 256)
      return ConfigIssue{"head_dim.v", std::to_string(c.head_dim.v),
                         "the sm80 family supports head dims up to 256"};
    // Operands are 16-bit: the inputs' own type, or for fp8 inputs (widened exactly on load) the
    // rope part's, bf16 without one. A 16-bit rope part in another type than that is refused.
    if (c.head_dim.rope > 0 && c.dtype.rope && *c.dtype.rope != c.dtype.qkv &&
        *c.dtype.rope != compute_dtype(c.dtype, c.head_dim.rope))
      return ConfigIssue{"dtype.rope", std::string("\"") + to_string(*c.dtype.rope) + "\"",
                         "the sm80 family computes in dtype.qkv for 16-bit inputs: rope columns in the same type"};
    return std::nullopt;
  }

  void resolve_tuning(Config& c, const ArchInfo& arch) const override {
    Tuning& t = c.tuning;
    if (!t.BM || !t.BN || !t.num_warps || !t.num_kv_stages) {
      const Sm80Tile best = pick(c, arch);
      t.BM = best.BM;
      t.BN = best.BN;
      t.num_warps = best.warps;
      t.num_kv_stages = best.stages;
    }
    if (!t.scheduler) t.scheduler = Scheduler::transient;
  }

  void check_tuning(const Config& c, const ArchInfo& arch,
                    std::vector<ConfigIssue>& issues) const override {
    const Tuning& t = c.tuning;
    auto bad = [&](const char* f, int v, std::string rule) {
      issues.push_back({std::string("tuning.") + f, std::to_string(v), std::move(rule)});
    };
    rules::not_for_family(t.consumer_warpgroups, "consumer_warpgroups", kName, issues);
    rules::not_for_family(t.pair_cta, "pair_cta", kName, issues);
    rules::not_for_family(t.num_qk_stages, "num_qk_stages", kName, issues);
    rules::not_for_family(t.num_pv_stages, "num_pv_stages", kName, issues);
    rules::not_for_family(t.splitk_partitions, "splitk_partitions", kName, issues);
    rules::not_for_family(t.swizzle, "swizzle", kName, issues);
    rules::not_for_family(t.kv_loads, "kv_loads", kName, issues);
    rules::not_for_family(t.exp2_fma_every, "exp2_fma_every", kName, issues);
    rules::not_for_family(t.lazy_rescale, "lazy_rescale", kName, issues);
    rules::not_for_family(t.swap_qk, "swap_qk", kName, issues);
    Sm80Tile tile{*t.BM, *t.BN, *t.num_warps, *t.num_kv_stages};
    if (tile.warps != 4 && tile.warps != 8) bad("num_warps", tile.warps, "must be 4 or 8");
    if (tile.BM != 64 && tile.BM != 128) bad("BM", tile.BM, "must be 64 or 128");
    else if (tile.warps == 4 || tile.warps == 8) {
      int rows = tile.BM / tile.warps;
      if (rows != 16 && rows != 32)
        bad("BM", tile.BM, "each warp owns 16 or 32 rows, so BM / num_warps must be 16 or 32");
    }
    if (tile.BN < 16 || tile.BN > 128 || tile.BN % 16)
      bad("BN", tile.BN, "must be a multiple of 16 from 16 to 128 (one mma k-step of P V per 16 keys)");
    if (tile.stages != 1 && tile.stages != 2)
      bad("num_kv_stages", tile.stages, "must be 1 or 2 (cp.async double buffering)");
    if (!issues.empty()) return;  // the budgets below assume a well-formed tile
    int smem = smem_for(c, tile);
    if (smem > arch.max_smem_per_block)
      bad("BN", tile.BN, "needs " + std::to_string(smem) + " bytes of shared memory; " + arch.name +
          " allows " + std::to_string(arch.max_smem_per_block));
    int regs = accumulator_regs(c, tile);
    if (regs > kMaxAccumulatorRegs)
      bad("BN", tile.BN, "needs " + std::to_string(regs) +
          " accumulator registers per thread (BM/num_warps rows x (BN + head_dim.v) / 32); at most " +
          std::to_string(kMaxAccumulatorRegs) + " fit");
    else if (!(tile == default_tile(c, arch)) && !spill_free(c, tile, arch))
      bad("BN", tile.BN, "spills registers with BM " + std::to_string(tile.BM) + ", num_warps " +
          std::to_string(tile.warps) + " and num_kv_stages " + std::to_string(tile.stages) + " at head_dim.qk " +
          std::to_string(c.head_dim.qk) + " / v " + std::to_string(c.head_dim.v) +
          (c.head_dim.rope ? " with rope columns" : "") + "; use a smaller BN, fewer rows per warp or one stage");
    if (t.scheduler && *t.scheduler != Scheduler::transient)
      issues.push_back({"tuning.scheduler", to_string(*t.scheduler),
                        "the sm80 family launches one CTA per tile (transient)"});
  }

  int smem_bytes(const Config& c) const override {
    const Tuning& t = c.tuning;
    return smem_for(c, {*t.BM, *t.BN, *t.num_warps, *t.num_kv_stages});
  }

  KernelSource emit(const Config& c, const ArchInfo& arch) const override {
    const Tuning& t = c.tuning;
    int threads = *t.num_warps * 32;
    KernelSource s = source_skeleton(c, arch, kName, threads, smem_bytes(c));
    s.unit = emit::unit_header(s.name, c) +
             emit::traits_struct(c, {{"kBlockM", std::to_string(*t.BM)},
                                     {"kBlockN", std::to_string(*t.BN)},
                                     {"kNumWarps", std::to_string(*t.num_warps)},
                                     {"kStages", std::to_string(*t.num_kv_stages)},
                                     {"kThreads", std::to_string(threads)},
                                     {"kSmemBytes", std::to_string(s.launch.smem_bytes)}}) +
             "#include \"sm80/attention_fwd.cuh\"\n\n" +
             emit::entry_function(s.launch.entry, threads, 1, "flashjit::sm80::attention_fwd");
    return s;
  }

 private:
  // Default tiles, measured on an H200 (bf16, seqlen 2k-16k, TFLOP/s non-causal / causal at 16k):
  //  - d <= 128: 4 warps x 32 rows, one K/V buffer, two CTAs per SM (FlashAttention-2's tiles).
  //    BN is the largest of 64 / 48 / 32 whose accumulators (32 rows x (BN + v) / 32 fp32)
  //    stay within kComfortableAccumulatorRegs: at d128 BN 64 (367 / 317) needs 192 and ptxas
  //    then spills a few bytes on some variants, BN 48 (354 / 310) does not; BN 64 is taken up
  //    to d96. Rope, paged caches, and sm_100+, get 16 registers less (d128 there: BN 32).
  //    Two K/V buffers are no faster here and leave no registers.
  //  - d > 128: 8 warps x 16 rows, two K/V buffers (d256: 293 / 299); one buffer where shared
  //    memory is short (sm_80: 128 KB), then 4 warps x 16 rows (sm_86: 99 KB).
  static constexpr int kComfortableAccumulatorRegs = 176;

  Sm80Tile pick(const Config& c, const ArchInfo& arch) const {
    int d = std::max(c.head_dim.qk, c.head_dim.v);
    std::vector<Sm80Tile> prefs;
    if (d <= 128) {
      // Empirical (ptxas 13.0 over sm_80 ... sm_100a): BN 64 itself wants 16 spare registers.
      // The rope split needs two more pointers per K tile; ptxas for sm_100+ keeps a few more
      // registers live (this family is only a fallback there: no GPU to tune on).
      // Paged caches keep the gathers' page lookups live beside the accumulators: the same.
      const bool tight = c.head_dim.rope > 0 || c.kv_layout.paged || arch.major >= 10;
      int budget = kComfortableAccumulatorRegs - (tight ? 16 : 0) - (c.head_dim.rope > 0 && c.kv_layout.paged ? 16 : 0);
      for (int bn : {64, 48, 32})
        if (accumulator_regs(c, {128, bn, 4, 1}) <= budget - (bn == 64 ? 16 : 0))
          prefs.push_back({128, bn, 4, 1});
      prefs.push_back({64, 64, 4, 1});
    } else {
      prefs = {{128, 64, 8, 2}, {128, 64, 8, 1}, {64, 64, 4, 1}, {64, 32, 4, 1}};
    }
    prefs.push_back({64, 32, 4, 1});
    const Tuning& pin = c.tuning;
    if (!pin.BM && !pin.BN && !pin.num_warps && !pin.num_kv_stages) {
      for (const auto& t : prefs)
        if (smem_for(c, t) <= arch.max_smem_per_block && accumulator_regs(c, t) <= kMaxAccumulatorRegs) return t;
      return prefs.back();
    }
    // Fields the user pinned replace the preference's; the first tile that then fits is taken.
    prefs.push_back({64, 16, 4, 1});
    Sm80Tile last{};
    for (Sm80Tile t : prefs) {
      if (pin.BM && *pin.BM != t.BM) {
        t.warps = *pin.BM / t.warps == 16 || *pin.BM / t.warps == 32 ? t.warps : *pin.BM == 64 ? 4 : 8;
        t.BM = *pin.BM;
      }
      t.BN = pin.BN.value_or(t.BN);
      t.warps = pin.num_warps.value_or(t.warps);
      t.stages = pin.num_kv_stages.value_or(t.stages);
      last = t;
      const int rows = t.warps > 0 ? t.BM / t.warps : 0;
      if ((rows == 16 || rows == 32) && smem_for(c, t) <= arch.max_smem_per_block &&
          accumulator_regs(c, t) <= kMaxAccumulatorRegs && spill_free(c, t, arch))
        return t;
    }
    return last;  // check_tuning says what does not fit
  }

  // The tile pick() chooses for the problem with nothing pinned.
  Sm80Tile default_tile(const Config& c, const ArchInfo& arch) const {
    Config unpinned = c;
    unpinned.tuning.BM.reset();
    unpinned.tuning.BN.reset();
    unpinned.tuning.num_warps.reset();
    unpinned.tuning.num_kv_stages.reset();
    return pick(unpinned, arch);
  }
};

}  // namespace

const KernelFamily& family_sm80() {
  static const Sm80Family f;
  return f;
}

}  // namespace flashjit
