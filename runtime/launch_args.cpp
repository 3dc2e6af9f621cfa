// The argument checks and parameters every family shares (family_host.hpp).
#include "runtime/family_host.hpp"

#include <cmath>
#include <cstring>
#include <string>

namespace flashjit {

namespace {

[[noreturn]] void fail(const std::string& what) { throw ArgumentError("flashjit launch: " + what); }

std::string str(long long v) { return std::to_string(v); }

// `paged`: the batch axis steps over pages, and is checked even for ragged batches. A tensor of
// no rows (seqlen 0) has no batch stride to check. Strides are whole 16-byte chunks (the kernels'
// copy unit): 8 elements of a 16-bit type, 16 of fp8.
void check_tensor(const char* name, const Tensor& t, DType dtype, bool ragged, bool paged, int64_t rows) {
  if (!t.data) fail(std::string("args.") + name + " is null");
  if (reinterpret_cast<uintptr_t>(t.data) % 16)
    fail(std::string("args.") + name + ".data must be 16-byte aligned (got " +
         std::to_string(reinterpret_cast<uintptr_t>(t.data) % 16) + " bytes past a 16-byte boundary)");
  const int chunk = 16 / dtype_bytes(dtype);
  auto stride = [&](const char* axis, int64_t s) {
    if (s <= 0 || s % chunk)
      fail(std::string("args.") + name + "." + axis + " = " + str(s) + ": strides must be positive multiples of " +
           str(chunk) + " elements (16 bytes of " + to_string(dtype) + ")");
  };
  stride("row_stride", t.row_stride);
  stride("head_stride", t.head_stride);
  if (paged || (!ragged && rows > 0)) stride("batch_stride", t.batch_stride);
}

void check_paging(const Config& c, const AttentionArgs& a) {
  if (!c.kv_layout.paged) {
    if (a.page_table || a.num_pages || a.max_pages)
      fail("args.page_table/num_pages/max_pages are set but the config's kv_layout is not paged");
    return;
  }
  const int page = c.kv_layout.page_size;
  if (!a.page_table) fail("the config has a paged KV layout: args.page_table is required");
  if (reinterpret_cast<uintptr_t>(a.page_table) % alignof(int)) fail("args.page_table must be 4-byte aligned");
  if (a.num_pages < 1) fail("args.num_pages = " + str(a.num_pages) + ": the cache needs at least one page");
  const int64_t needed = (int64_t(a.seqlen_k) + page - 1) / page;
  if (a.max_pages < needed)
    fail("args.max_pages = " + str(a.max_pages) + ": seqlen_k = " + str(a.seqlen_k) + " keys in pages of " +
         str(page) + " need at least " + str(needed) + " page-table entries per sequence");
  if (a.page_table_stride >= 0 && a.page_table_stride < a.max_pages)
    fail("args.page_table_stride = " + str(a.page_table_stride) + " is shorter than a row of max_pages = " +
         str(a.max_pages) + " entries");
  if (a.cu_seqlens_k) fail("args.cu_seqlens_k is set, but a paged cache takes its keys from the page table (use seqused_k)");
}

// A scale tensor (scales.q/k/v) the config asks for, or none it does not. Per-token strides
// default to the contiguous [batch, heads, rows] layout (ragged: [heads, total_rows]).
void check_scale(const char* name, ScaleGranularity g, const AttentionArgs::Scale& s, size_t elem_bytes) {
  const std::string arg = std::string("args.") + name + "_scale";
  if (g == ScaleGranularity::none) {
    if (s.data) fail(arg + " is set but the config's scales." + name + " is \"none\"");
    return;
  }
  if (!s.data)
    fail(std::string("the config has scales.") + name + " = \"" + to_string(g) + "\": " + arg + " is required");
  if (reinterpret_cast<uintptr_t>(s.data) % elem_bytes)
    fail(arg + ".data must be " + std::to_string(elem_bytes) + "-byte aligned");
}

void fill_scale_strides(const AttentionArgs::Scale& s, bool ragged, int64_t heads, int64_t rows_per_seq,
                        int64_t total_rows, long long (&out)[2]) {
  const int64_t head_default = ragged ? total_rows : rows_per_seq;
  out[1] = s.head_stride >= 0 ? s.head_stride : head_default;
  out[0] = s.batch_stride >= 0 ? s.batch_stride : heads * rows_per_seq;
}

}  // namespace

AttentionParams common_params(const Config& c, const LaunchInfo& launch, const AttentionArgs& a) {
  AttentionParams p;
  std::memset(&p, 0, sizeof p);
  const bool ragged = c.varlen, paged = c.kv_layout.paged;

  if (a.batch < 1) fail("args.batch = " + str(a.batch) + ": must be at least 1");
  if (a.heads_q < 1 || a.heads_k < 1)
    fail("args.heads_q = " + str(a.heads_q) + ", heads_k = " + str(a.heads_k) + ": must be at least 1");
  if (a.heads_q != a.heads_k * c.group)
    fail("args.heads_q = " + str(a.heads_q) + " must equal group (" + str(c.group) +
         ", from the config) x heads_k (" + str(a.heads_k) + ")");
  if (a.seqlen_q < 0 || a.seqlen_k < 0) fail("args.seqlen_q/seqlen_k must not be negative");
  if (a.heads_q > 65535 || a.batch > 65535) fail("args.heads_q and args.batch must be at most 65535 (grid limits)");

  const DType qkv = c.dtype.qkv, rope = c.dtype.rope.value_or(qkv);
  check_tensor("q", a.q, c.dtype.q.value_or(qkv), ragged, false, a.seqlen_q);  // dtype.q: a 16-bit Q's
  check_tensor("k", a.k, qkv, ragged, paged, a.seqlen_k);
  // A shared K/V cache (MLA's latent cache) reads V from the first head_dim.v columns of K.
  const bool shared_kv = c.kv_layout.shared_kv;
  if (!shared_kv)
    check_tensor("v", a.v, qkv, ragged, paged, a.seqlen_k);
  else if (a.v.data && (a.v.data != a.k.data || a.v.batch_stride != a.k.batch_stride ||
                        a.v.row_stride != a.k.row_stride || a.v.head_stride != a.k.head_stride))
    fail("args.v is set but the config has kv_layout.shared_kv = true: V is read from the first head_dim.v columns "
         "of args.k; leave args.v unset");
  check_tensor("o", a.o, c.dtype.out, ragged, false, a.seqlen_q);
  if (c.head_dim.rope > 0) {
    check_tensor("q_rope", a.q_rope, rope, ragged, false, a.seqlen_q);
    check_tensor("k_rope", a.k_rope, rope, ragged, paged, a.seqlen_k);
  } else if (a.q_rope.data || a.k_rope.data) {
    fail("args.q_rope/k_rope are set but the config has head_dim.rope = 0");
  }
  check_paging(c, a);
  if (reinterpret_cast<uintptr_t>(a.seqused_k) % alignof(int)) fail("args.seqused_k must be 4-byte aligned");

  if (ragged) {
    if (!a.cu_seqlens_q) fail("the config has varlen = true: args.cu_seqlens_q is required");
    if (!paged && !a.cu_seqlens_k) fail("the config has varlen = true: args.cu_seqlens_k is required");
    if (a.total_q < a.seqlen_q || (!paged && a.total_k < a.seqlen_k))
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

  if (reinterpret_cast<uintptr_t>(a.tile_counter) % alignof(int)) fail("args.tile_counter must be 4-byte aligned");

  if (c.mask != Mask::sliding_window && (a.window_left >= 0 || a.window_right >= 0))
    fail("args.window_left/right are set but the config's mask is \"" + std::string(to_string(c.mask)) +
         "\" (use \"sliding_window\")");
  if (!(a.softmax_scale >= 0.f) || !std::isfinite(a.softmax_scale))
    fail("args.softmax_scale = " + std::to_string(a.softmax_scale) +
         ": must be finite and > 0 (0 selects 1/sqrt(head_dim.qk))");
  const size_t scale_bytes = c.dtype.scale ? size_t(dtype_bytes(*c.dtype.scale)) : 4;
  check_scale("q", c.scales.q, a.q_scale, c.scales.q == ScaleGranularity::per_token ? scale_bytes : 4);
  check_scale("k", c.scales.k, a.k_scale, c.scales.k == ScaleGranularity::per_token ? scale_bytes : 4);
  check_scale("v", c.scales.v, a.v_scale, c.scales.v == ScaleGranularity::per_token ? scale_bytes : 4);

  if (a.num_splits < 0) fail("args.num_splits = " + str(a.num_splits) + ": must be 0 (automatic) or a split count");
  if (a.num_splits > 0 && c.tuning.family != Family::decode)
    fail("args.num_splits is set, but only decode kernels split the keys (this is the " +
         std::string(to_string(c.tuning.family.value_or(Family::automatic))) + " family)");

  auto tensor = [](const Tensor& t) { return TensorArg{t.data, t.batch_stride, t.row_stride, t.head_stride}; };
  p.q = tensor(a.q);
  p.k = tensor(a.k);
  p.v = tensor(shared_kv ? a.k : a.v);
  p.o = tensor(a.o);
  p.q_rope = tensor(a.q_rope);
  p.k_rope = tensor(a.k_rope);
  p.lse = a.lse;
  const int64_t rows_q = ragged ? a.total_q : int64_t(a.batch) * a.seqlen_q;
  p.lse_head_stride = a.lse_head_stride >= 0 ? a.lse_head_stride : (ragged ? a.total_q : a.seqlen_q);
  p.lse_batch_stride = a.lse_batch_stride >= 0 ? a.lse_batch_stride : int64_t(a.heads_q) * a.seqlen_q;
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
  p.page_table = a.page_table;
  p.page_table_stride = a.page_table_stride >= 0 ? a.page_table_stride : a.max_pages;
  p.num_pages = a.num_pages;
  p.max_pages = a.max_pages;
  p.seqused_k = a.seqused_k;
  if (rows_q > (int64_t(1) << 31) - 1) fail("too many query rows for one launch");
  p.rows_q = static_cast<int>(rows_q);
  p.num_splits = 1;
  p.q_scale = a.q_scale.data;
  p.k_scale = a.k_scale.data;
  p.v_scale = a.v_scale.data;
  fill_scale_strides(a.q_scale, ragged, a.heads_q, a.seqlen_q, a.total_q, p.q_scale_strides);
  // Per-token K and V scales: by the key's position in its sequence, paged or not, or like the
  // cache's rows ([pages or batch, rows, heads_k], contiguous unless strides are given).
  // Per-block K scales add a last dimension, the row's blocks.
  const bool in_cache = c.scales.token_layout == ScaleLayout::cache;
  const int64_t blocks = c.k_scale_blocks();
  if (c.scales.k_block == 0 && a.k_scale.block_stride >= 0)
    fail("args.k_scale.block_stride is set, but the config has one K scale per key row (scales.k_block 0)");
  if (a.v_scale.block_stride >= 0) fail("args.v_scale.block_stride is set, but V scales have no blocks (V takes K's)");
  p.k_scale_block_stride = a.k_scale.block_stride >= 0 ? a.k_scale.block_stride : 1;
  auto key_scales = [&](const char* name, const AttentionArgs::Scale& s, long long (&strides)[2], long long& row,
                        int64_t per_row) {
    if (!in_cache && s.row_stride >= 0)
      fail(std::string("args.") + name + "_scale.row_stride is set, but the config's per-token scales are by position "
           "(scales.token_layout \"positions\"); a row stride goes with \"cache\"");
    if (!in_cache) return fill_scale_strides(s, ragged && !paged, a.heads_k, a.seqlen_k, a.total_k, strides);
    const int64_t rows = paged ? c.kv_layout.page_size : ragged ? 0 : a.seqlen_k;
    strides[1] = s.head_stride >= 0 ? s.head_stride : per_row;
    row = s.row_stride >= 0 ? s.row_stride : a.heads_k * per_row;
    strides[0] = s.batch_stride >= 0 ? s.batch_stride : rows * a.heads_k * per_row;
  };
  key_scales("k", a.k_scale, p.k_scale_strides, p.k_scale_row_stride, blocks);
  key_scales("v", a.v_scale, p.v_scale_strides, p.v_scale_row_stride, 1);
  return p;
}

void FamilyHost::finish(const Config&, const LaunchInfo&, const AttentionArgs&, void*, LaunchPlan&) const {}

}  // namespace flashjit
