// Host side of the decode family: packed-row blocks, the split count (decode_splits.hpp), the
// workspace of the splits' partial outputs, the combine pass that merges them, and the K/V
// descriptors of TMA loads (tuning.kv_loads "tma").
#include "decode/combine_shape.cuh"
#include "generator/element_types.hpp"
#include "runtime/decode_splits.hpp"
#include "runtime/family_host.hpp"
#include "runtime/tensor_map.hpp"

#include <algorithm>
#include <cstdint>

namespace flashjit {

namespace {

[[noreturn]] void fail(const std::string& what) { throw ArgumentError("flashjit launch: " + what); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The keys the rows of one sequence can see: all of them, or a window's span around the
// query tokens (so windows are not split more than their keys warrant).
int64_t visible_keys(const Config& c, const AttentionArgs& a) {
  if (c.mask != Mask::sliding_window || a.window_left < 0) return a.seqlen_k;
  const int64_t right = a.window_right < 0 ? a.seqlen_k : a.window_right;
  return std::min<int64_t>(a.seqlen_k, a.window_left + right + a.seqlen_q);
}

class DecodeHost final : public FamilyHost {
 public:
  LaunchPlan plan(const Config& c, const LaunchInfo& launch, const AttentionArgs& a,
                  const DeviceLimits& device) const override {
    LaunchPlan plan;
    AttentionParams& p = plan.params;
    p = common_params(c, launch, a);
    const int max_q = c.tuning.max_seqlen_q.value_or(1);
    if (a.seqlen_q > max_q)
      fail("args.seqlen_q = " + std::to_string(a.seqlen_q) + ": this decode kernel packs at most " +
           std::to_string(max_q) + " query tokens per sequence (tuning.max_seqlen_q)");
    const int64_t rows = int64_t(c.group) * a.seqlen_q;
    const int64_t m_blocks = ceil_div(rows, launch.block_m);
    if (m_blocks == 0 || p.rows_q == 0) return plan;
    if (m_blocks * a.heads_k > 65535) fail("too many query rows per KV head for one launch");

    int splits = a.num_splits > 0 ? a.num_splits : c.tuning.splitk_partitions.value_or(0);
    if (splits == 0) {
      SplitShape s;
      s.ctas = int64_t(a.batch) * a.heads_k * m_blocks;
      s.key_tiles = ceil_div(visible_keys(c, a), launch.block_n);
      s.slots = int64_t(device.sm_count) * std::max(1, device.ctas_per_sm);
      splits = choose_decode_splits(s);
    }
    if (splits > 65535) fail("args.num_splits = " + std::to_string(splits) + ": at most 65535");
    p.num_splits = splits;

    PassLaunch split;
    split.threads = launch.threads;
    split.smem_bytes = launch.smem_bytes;
    split.grid[0] = static_cast<unsigned>(splits);
    split.grid[1] = static_cast<unsigned>(m_blocks * a.heads_k);
    split.grid[2] = static_cast<unsigned>(a.batch);
    plan.passes[plan.num_passes++] = split;
    if (splits == 1) return plan;

    const KernelPass& combine = launch.passes.at(0);
    PassLaunch merge;
    merge.kernel = 1;
    merge.threads = combine.threads;
    merge.smem_bytes = combine.smem_bytes;
    merge.overlaps_previous = true;
    const int64_t items = int64_t(p.rows_q) * a.heads_q;  // one CTA each (decode/combine_shape.cuh)
    if (items > INT32_MAX) fail("too many query rows x heads for one combine launch");
    merge.grid[0] = static_cast<unsigned>(items);
    plan.passes[plan.num_passes++] = merge;
    plan.workspace_bytes = workspace_bytes(c, p);
    return plan;
  }

  void finish(const Config& c, const LaunchInfo& launch, const AttentionArgs& a, void* workspace,
              LaunchPlan& plan) const override {
    AttentionParams& p = plan.params;
    if (launch.uses_tma && plan.num_passes > 0) encode_kv_descriptors(c, launch, a, p);
    if (plan.workspace_bytes == 0) return;
    p.partial_o = static_cast<float*>(workspace);
    p.partial_lse = p.partial_o + o_floats(c, p);
  }

 private:
  // K and V as the split pass's boxes read them (key_ring.cuh): a paged cache as [num_pages,
  // page_size, heads_k, d] with a box of one panel of a page's rows, or the whole tile where a
  // tile lies inside a page (an fp8 latent cache's: one panel of it); a contiguous cache as [batch, seqlen_k,
  // heads_k, d] (ragged: all rows as one entry) with a box of the whole tile. A box past the outer axis reads zeros. A
  // shared K/V (latent) cache has K's rows and its rope part (latent_seesaw.cuh).
  static void encode_kv_descriptors(const Config& c, const LaunchInfo& launch, const AttentionArgs& a,
                                    AttentionParams& p) {
    const DType e = c.dtype.qkv;
    const int bn = launch.block_n;
    const bool paged = c.kv_layout.paged;
    const int box_rows = paged ? std::min(bn, c.kv_layout.page_size) : bn;
    // The latent seesaw pass lands an fp8 cache's panels apart (each in the fp16 panel it becomes):
    // boxes of one panel. A 16-bit latent tile inside a page is one box, as for the other caches.
    const bool panel_boxes = c.kv_layout.shared_kv && is_float8(e);
    auto tensor = [&](const Tensor& t, int dim, DType type) {
      TmaTensor m{t.data, type, 0, dim, a.heads_k, 0, t.row_stride, t.head_stride, t.batch_stride};
      if (paged) {
        m.rows = c.kv_layout.page_size;
        m.batch = std::max(1, a.num_pages);
      } else {
        m.rows = std::max<int64_t>(1, c.varlen ? a.total_k : a.seqlen_k);
        m.batch = c.varlen ? 1 : a.batch;
      }
      return encode_tma(m, box_rows, box_rows == bn && !panel_boxes ? dim / panel_elements(type, dim) : 1);
    };
    if (c.kv_layout.shared_kv) {  // a latent cache: K's rows (nope, or all columns) and the rope part, in its own type
      const int rope = c.head_dim.rope;
      p.tma_k = tensor(a.k, rope > 0 ? c.head_dim.nope() : c.head_dim.qk, e);
      if (rope > 0) p.tma_k_rope = tensor(a.k_rope, rope, c.dtype.rope.value_or(e));
      return;
    }
    p.tma_k = tensor(a.k, c.head_dim.qk, e);
    p.tma_v = tensor(a.v, c.head_dim.v, e);
  }

  static size_t o_floats(const Config& c, const AttentionParams& p) {
    return size_t(p.num_splits) * p.rows_q * p.heads_q * c.head_dim.v;
  }
  static size_t workspace_bytes(const Config& c, const AttentionParams& p) {
    const size_t lse = size_t(p.num_splits) * p.rows_q * p.heads_q;
    return (o_floats(c, p) + lse) * sizeof(float);
  }
};

}  // namespace

int choose_decode_splits(const SplitShape& s) {
  if (s.key_tiles <= 1 || s.ctas <= 0 || s.slots <= 0) return 1;
  if (s.ctas * 10 >= s.slots * 8) return 1;  // most of a wave already
  const int most = static_cast<int>(
      std::clamp<int64_t>(s.key_tiles / kMinTilesPerSplit, 1, kMaxDecodeSplits));
  auto fill = [&](int splits) {
    const int64_t ctas = s.ctas * splits;
    return double(ctas) / double(ceil_div(ctas, s.slots) * s.slots);
  };
  double best = 0;
  for (int k = 1; k <= most; ++k) best = std::max(best, fill(k));
  for (int k = 1; k <= most; ++k)
    if (fill(k) >= 0.9 * best) return k;
  return most;
}

const FamilyHost& host_decode() {
  static const DecodeHost h;
  return h;
}

}  // namespace flashjit
