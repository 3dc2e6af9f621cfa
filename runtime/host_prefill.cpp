// Host sides of the prefill families: sm80 (one CTA per tile), sm90 (TMA descriptors,
// persistent and clustered grids, longest-first head groups, the dynamic scheduler's tile
// counter), and the fp32 reference (one CTA per query row).
#include "generator/element_types.hpp"
#include "runtime/family_host.hpp"
#include "runtime/tensor_map.hpp"

#include <algorithm>

namespace flashjit {

namespace {

[[noreturn]] void fail(const std::string& what) { throw ArgumentError("flashjit launch: " + what); }

// Tiles along M per (batch, head): one m block per CTA of a cluster (pair_cta: two adjacent).
void count_tiles(const LaunchInfo& launch, const AttentionArgs& a, AttentionParams& p) {
  const int cluster = std::max(1, launch.cluster_m);
  const int64_t tile_rows = int64_t(launch.block_m) * cluster;
  p.num_m_blocks = static_cast<int>((a.seqlen_q + tile_rows - 1) / tile_rows);
  const int64_t tiles = int64_t(p.num_m_blocks) * a.heads_q * a.batch;
  if (tiles > (int64_t(1) << 31) - 1) fail("too many tiles for one launch");
  p.total_tiles = static_cast<int>(tiles);
}

PassLaunch main_pass(const LaunchInfo& launch) {
  PassLaunch pass;
  pass.threads = launch.threads;
  pass.smem_bytes = launch.smem_bytes;
  pass.cluster_m = std::max(1, launch.cluster_m);
  return pass;
}

class Sm80Host final : public FamilyHost {
 public:
  LaunchPlan plan(const Config& c, const LaunchInfo& launch, const AttentionArgs& a,
                  const DeviceLimits&) const override {
    LaunchPlan plan;
    plan.params = common_params(c, launch, a);
    count_tiles(launch, a, plan.params);
    if (plan.params.total_tiles == 0) return plan;
    PassLaunch pass = main_pass(launch);
    pass.grid[0] = static_cast<unsigned>(plan.params.num_m_blocks);
    pass.grid[1] = a.heads_q;
    pass.grid[2] = a.batch;
    plan.passes[plan.num_passes++] = pass;
    return plan;
  }
};

class Sm90Host final : public FamilyHost {
 public:
  LaunchPlan plan(const Config& c, const LaunchInfo& launch, const AttentionArgs& a,
                  const DeviceLimits& device) const override {
    LaunchPlan plan;
    AttentionParams& p = plan.params;
    p = common_params(c, launch, a);
    if (a.seqused_k)
      fail("args.seqused_k: the sm90 family reads every sequence's keys up to seqlen_k (ragged: cu_seqlens_k); "
           "pass the lengths as a ragged batch, or use the sm80 family");
    count_tiles(launch, a, p);
    // (batch, head) pairs per longest-first group: as many as have K/V within the L2 budget the
    // generator chose (launch.lpt_l2_bytes), or all of them.
    const int64_t pairs = int64_t(a.heads_q) * a.batch;
    const int64_t kv_bytes = std::max<int64_t>(1, int64_t(a.seqlen_k) * (c.head_dim.qk + c.head_dim.v) *
                                                      dtype_bytes(c.dtype.qkv));
    p.lpt_group = static_cast<int>(
        launch.lpt_l2_bytes > 0 ? std::clamp<int64_t>(launch.lpt_l2_bytes / kv_bytes, 1, pairs) : pairs);
    if (p.total_tiles == 0) return plan;
    PassLaunch pass = main_pass(launch);
    const int cluster = pass.cluster_m;
    if (launch.persistent) {
      const int64_t clusters =
          std::max<int64_t>(1, std::min<int64_t>(p.total_tiles, device.resident_ctas / cluster));
      pass.grid[0] = static_cast<unsigned>(clusters * cluster);
    } else {
      pass.grid[0] = static_cast<unsigned>(int64_t(p.num_m_blocks) * cluster);
      pass.grid[1] = a.heads_q;
      pass.grid[2] = a.batch;
    }
    plan.passes[plan.num_passes++] = pass;
    plan.tile_counter = launch.tile_counter;
    return plan;
  }

  void finish(const Config& c, const LaunchInfo& launch, const AttentionArgs& a, void*,
              LaunchPlan& plan) const override {
    if (launch.uses_tma) encode_descriptors(c, launch, a, plan.params);
  }

 private:
  static void encode_descriptors(const Config& c, const LaunchInfo& launch, const AttentionArgs& a,
                                 AttentionParams& p) {
    const bool ragged = c.varlen;
    auto tensor = [&](const Tensor& t, DType dtype, int64_t rows, int64_t dim, int64_t heads) {
      return TmaTensor{t.data, dtype, rows, dim, heads, ragged ? 1 : a.batch, t.row_stride, t.head_stride,
                       t.batch_stride};
    };
    // A TMA extent must be non-zero; an empty K still needs a legal descriptor it never reads.
    const int64_t rows_q = std::max<int64_t>(1, ragged ? a.total_q : a.seqlen_q);
    const int64_t rows_k = std::max<int64_t>(1, ragged ? a.total_k : a.seqlen_k);
    const int dqk = c.head_dim.qk, dv = c.head_dim.v;
    const DType in = c.dtype.qkv;
    // A rope part in its own tensors (its own 16-bit type beside fp8): the nope columns from q
    // and k, the rope columns from q_rope and k_rope, each box landing in its panels of the same
    // tile. A box takes every panel of its rows (64-byte panels for fp8 rows of 64 or 192).
    const int rope = c.head_dim.rope, nope = dqk - rope;
    auto panels = [](DType t, int columns) { return columns / panel_elements(t, columns); };
    p.tma_q = encode_tma(tensor(a.q, in, rows_q, nope, a.heads_q), launch.block_m, panels(in, nope));
    p.tma_k = encode_tma(tensor(a.k, in, rows_k, nope, a.heads_k), launch.block_n, panels(in, nope));
    if (rope > 0) {
      const DType r = c.dtype.rope.value_or(in);
      p.tma_q_rope = encode_tma(tensor(a.q_rope, r, rows_q, rope, a.heads_q), launch.block_m, panels(r, rope));
      p.tma_k_rope = encode_tma(tensor(a.k_rope, r, rows_k, rope, a.heads_k), launch.block_n, panels(r, rope));
    }
    p.tma_v = encode_tma(tensor(a.v, in, rows_k, dv, a.heads_k), launch.block_n, panels(in, dv));
    if (launch.tma_store_o)
      p.tma_o = encode_tma(tensor(a.o, c.dtype.out, rows_q, dv, a.heads_q), 64, panels(c.dtype.out, dv));
  }
};

class ReferenceHost final : public FamilyHost {
 public:
  LaunchPlan plan(const Config& c, const LaunchInfo& launch, const AttentionArgs& a,
                  const DeviceLimits&) const override {
    LaunchPlan plan;
    plan.params = common_params(c, launch, a);
    if (a.seqlen_q == 0) return plan;
    PassLaunch pass = main_pass(launch);
    pass.grid[0] = static_cast<unsigned>(a.seqlen_q);
    pass.grid[1] = a.heads_q;
    pass.grid[2] = a.batch;
    plan.passes[plan.num_passes++] = pass;
    return plan;
  }
};

}  // namespace

const FamilyHost& host_sm80() {
  static const Sm80Host h;
  return h;
}
const FamilyHost& host_sm90() {
  static const Sm90Host h;
  return h;
}
const FamilyHost& host_reference() {
  static const ReferenceHost h;
  return h;
}

}  // namespace flashjit
