#include "runtime/launch_params.hpp"

#include "generator/element_types.hpp"
#include "runtime/tensor_map.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace flashjit {

namespace {

[[noreturn]] void fail(const std::string& what) { throw ArgumentError("flashjit launch: " + what); }

std::string str(long long v) { return std::to_string(v); }

void check_tensor(const char* name, const Tensor& t, bool ragged) {
  if (!t.data) fail(std::string("args.") + name + " is null");
  if (reinterpret_cast<uintptr_t>(t.data) % 16)
    fail(std::string("args.") + name + ".data must be 16-byte aligned (got " +
         std::to_string(reinterpret_cast<uintptr_t>(t.data) % 16) + " bytes past a 16-byte boundary)");
  auto stride = [&](const char* axis, int64_t s) {
    if (s <= 0 || s % 8)
      fail(std::string("args.") + name + "." + axis + " = " + str(s) +
           ": strides must be positive multiples of 8 elements (16 bytes)");
  };
  stride("row_stride", t.row_stride);
  stride("head_stride", t.head_stride);
  if (!ragged) stride("batch_stride", t.batch_stride);
}

}  // namespace

AttentionParams make_params(const Config& c, const LaunchInfo& launch, const AttentionArgs& a,
                            int resident_ctas, LaunchGeometry& geo) {
  AttentionParams p;
  std::memset(&p, 0, sizeof p);
  const bool ragged = c.varlen;

  if (a.batch < 1) fail("args.batch = " + str(a.batch) + ": must be at least 1");
  if (a.heads_q < 1 || a.heads_k < 1)
    fail("args.heads_q = " + str(a.heads_q) + ", heads_k = " + str(a.heads_k) + ": must be at least 1");
  if (a.heads_q != a.heads_k * c.group)
    fail("args.heads_q = " + str(a.heads_q) + " must equal group (" + str(c.group) +
         ", from the config) x heads_k (" + str(a.heads_k) + ")");
  if (a.seqlen_q < 0 || a.seqlen_k < 0)
    fail("args.seqlen_q/seqlen_k must not be negative");
  if (a.heads_q > 65535 || a.batch > 65535)
    fail("args.heads_q and args.batch must be at most 65535 (grid limits)");

  check_tensor("q", a.q, ragged);
  check_tensor("k", a.k, ragged);
  check_tensor("v", a.v, ragged);
  check_tensor("o", a.o, ragged);
  if (c.head_dim.rope > 0) {
    check_tensor("q_rope", a.q_rope, ragged);
    check_tensor("k_rope", a.k_rope, ragged);
  } else if (a.q_rope.data || a.k_rope.data) {
    fail("args.q_rope/k_rope are set but the config has head_dim.rope = 0");
  }

  if (ragged) {
    if (!a.cu_seqlens_q || !a.cu_seqlens_k)
      fail("the config has varlen = true: args.cu_seqlens_q and cu_seqlens_k are required");
    if (a.total_q < a.seqlen_q || a.total_k < a.seqlen_k || a.total_q < 1 || a.total_k < 1)
      fail("args.total_q/total_k (" + str(a.total_q) + ", " + str(a.total_k) +
           ") must be the total rows, at least seqlen_q/seqlen_k (the longest sequences)");
  } else if (a.cu_seqlens_q || a.cu_seqlens_k) {
    fail("args.cu_seqlens_q/k are set but the config has varlen = false");
  }

  // The reference kernel writes the LSE whenever given a buffer; fast kernels follow the config.
  if (launch.family != "reference") {
    if (c.lse && !a.lse) fail("the config has outputs.lse = true: args.lse is required");
    if (!c.lse && a.lse) fail("args.lse is set but the config has outputs.lse = false");
  }

  if (reinterpret_cast<uintptr_t>(a.tile_counter) % alignof(int))
    fail("args.tile_counter must be 4-byte aligned");

  if (c.mask != Mask::sliding_window && (a.window_left >= 0 || a.window_right >= 0))
    fail("args.window_left/right are set but the config's mask is \"" +
         std::string(to_string(c.mask)) + "\" (use \"sliding_window\")");
  if (!(a.softmax_scale >= 0.f) || !std::isfinite(a.softmax_scale))
    fail("args.softmax_scale = " + std::to_string(a.softmax_scale) + ": must be finite and > 0 (0 selects 1/sqrt(head_dim.qk))");

  auto tensor = [](const Tensor& t) {
    return TensorArg{t.data, t.batch_stride, t.row_stride, t.head_stride};
  };
  p.q = tensor(a.q);
  p.k = tensor(a.k);
  p.v = tensor(a.v);
  p.o = tensor(a.o);
  p.q_rope = tensor(a.q_rope);
  p.k_rope = tensor(a.k_rope);
  p.lse = a.lse;
  const int64_t rows_q = ragged ? a.total_q : a.seqlen_q;
  p.lse_head_stride = a.lse_head_stride >= 0 ? a.lse_head_stride : rows_q;
  p.lse_batch_stride = a.lse_batch_stride >= 0 ? a.lse_batch_stride : int64_t(a.heads_q) * rows_q;
  p.cu_seqlens_q = a.cu_seqlens_q;
  p.cu_seqlens_k = a.cu_seqlens_k;
  p.batch = a.batch;
  p.seqlen_q = a.seqlen_q;
  p.seqlen_k = a.seqlen_k;
  p.heads_q = a.heads_q;
  p.heads_k = a.heads_k;
  p.window_left = a.window_left;
  p.window_right = a.window_right;
  p.softmax_scale = a.softmax_scale > 0.f ? a.softmax_scale : 1.f / std::sqrt(float(c.head_dim.qk));
  p.softmax_scale_log2 = p.softmax_scale * 1.4426950408889634f;

  if (launch.family == "reference") {
    geo.grid[0] = static_cast<unsigned>(a.seqlen_q);
    geo.grid[1] = a.heads_q;
    geo.grid[2] = a.batch;
    geo.empty = a.seqlen_q == 0;
    return p;
  }
  // A tile is one m block per CTA of a cluster (pair_cta: two adjacent blocks).
  const int cluster = std::max(1, launch.cluster_m);
  const int64_t tile_rows = int64_t(launch.block_m) * cluster;
  p.num_m_blocks = static_cast<int>((a.seqlen_q + tile_rows - 1) / tile_rows);
  const int64_t tiles = int64_t(p.num_m_blocks) * a.heads_q * a.batch;
  if (tiles > (int64_t(1) << 31) - 1) fail("too many tiles for one launch");
  p.total_tiles = static_cast<int>(tiles);
  // (batch, head) pairs per longest-first group: as many as have K/V within the L2 budget the
  // generator chose (launch.lpt_l2_bytes), or all of them.
  const int64_t pairs = int64_t(a.heads_q) * a.batch;
  const int64_t kv_bytes = std::max<int64_t>(1, int64_t(a.seqlen_k) * (c.head_dim.qk + c.head_dim.v) *
                                                    dtype_bytes(c.dtype.qkv));
  p.lpt_group = static_cast<int>(
      launch.lpt_l2_bytes > 0 ? std::clamp<int64_t>(launch.lpt_l2_bytes / kv_bytes, 1, pairs) : pairs);
  geo.empty = tiles == 0;
  if (launch.persistent) {
    const int64_t clusters = std::max<int64_t>(1, std::min<int64_t>(tiles, resident_ctas / cluster));
    geo.grid[0] = static_cast<unsigned>(clusters * cluster);
  } else {
    geo.grid[0] = static_cast<unsigned>(int64_t(p.num_m_blocks) * cluster);
    geo.grid[1] = a.heads_q;
    geo.grid[2] = a.batch;
  }
  return p;
}

void encode_tma_descriptors(const Config& c, const LaunchInfo& launch, const AttentionArgs& a,
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
  const int in_panel = panel_elements(in), out_panel = panel_elements(c.dtype.out);
  p.tma_q = encode_tma(tensor(a.q, in, rows_q, dqk, a.heads_q), launch.block_m, dqk / in_panel);
  p.tma_k = encode_tma(tensor(a.k, in, rows_k, dqk, a.heads_k), launch.block_n, dqk / in_panel);
  p.tma_v = encode_tma(tensor(a.v, in, rows_k, dv, a.heads_k), launch.block_n, dv / in_panel);
  if (launch.tma_store_o)
    p.tma_o = encode_tma(tensor(a.o, c.dtype.out, rows_q, dv, a.heads_q), 64, dv / out_panel);
}

}  // namespace flashjit
