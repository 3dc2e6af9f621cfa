// The kernel ABI: one struct passed by value (as a __grid_constant__ parameter) to every flashjit
// kernel. Included by the device templates and by the host runtime, so it is plain C++ with no
// CUDA headers. Strides are in elements. Layout of a non-ragged tensor element (b, s, h, d):
//   base + b*batch_stride + s*row_stride + h*head_stride + d        (d is contiguous)
// Ragged (varlen) tensors pack sequences along the row axis: row = cu_seqlens[b] + s.
#pragma once

namespace flashjit {

// A CUtensorMap (128 bytes, 64-byte aligned) without including cuda.h.
struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};

struct TensorArg {
  const void* ptr;
  long long batch_stride;
  long long row_stride;
  long long head_stride;
};

struct AttentionParams {
  // sm90 family: TMA descriptors for Q, K, V (and the rope parts), and for O when the kernel
  // stores it by TMA. Zero for other families.
  TmaDescriptor tma_q;
  TmaDescriptor tma_k;
  TmaDescriptor tma_v;
  TmaDescriptor tma_o;
  TmaDescriptor tma_q_rope;
  TmaDescriptor tma_k_rope;

  TensorArg q;       // [B, Sq, Hq, d_nope]  (rope columns excluded when head_dim.rope > 0)
  TensorArg k;       // [B, Sk, Hk, d_nope]
  TensorArg v;       // [B, Sk, Hk, d_v]
  TensorArg o;       // [B, Sq, Hq, d_v]     written
  TensorArg q_rope;  // [B, Sq, Hq, d_rope]  only when head_dim.rope > 0
  TensorArg k_rope;  // [B, Sk, Hk, d_rope]

  // Log-sum-exp of each query row in natural log, fp32 (outputs.lse). Element (b, h, s) at
  // lse + b*lse_batch_stride + h*lse_head_stride + s; ragged: lse + h*lse_head_stride + row.
  float* lse;
  long long lse_batch_stride;
  long long lse_head_stride;

  // Quantisation scales (scales.q/k/v): the stored values times the scale are the inputs
  // (dequantisation). per_tensor: one fp32; per_head: fp32 [H] of the tensor's heads; per_token:
  // dtype.scale, element (b, h, s) at b*batch_stride + h*head_stride + s (ragged: h*head_stride
  // + row), strides in q_scale_strides / k_scale_strides below.
  const void* q_scale;
  const void* k_scale;
  const void* v_scale;

  const int* cu_seqlens_q;  // varlen: batch + 1 row offsets
  const int* cu_seqlens_k;

  int batch;
  int seqlen_q;  // varlen: max_seqlen_q
  int seqlen_k;  // varlen: max_seqlen_k
  int heads_q;
  int heads_k;
  int window_left;   // sliding_window: keys j with  i' - left <= j <= i' + right  are visible,
  int window_right;  // where i' = i + seqlen_k - seqlen_q (bottom-right aligned, as causal)
  float softmax_scale;
  float softmax_scale_log2;  // softmax_scale * log2(e)

  // Scheduling: tiles along M per (batch, head), each cluster_m blocks of BM rows (sm90
  // pair_cta: 2), and the tile counter of the dynamic scheduler (zero before a launch, left
  // zero after it).
  int num_m_blocks;
  int total_tiles;
  // Persistent longest-first order: heads are visited in groups of this many (batch, head) pairs
  // whose K/V fit in L2 together; within a group the longest m blocks come first.
  int lpt_group;
  int* tile_counter;

  // ---- KV caches and split-K (appended, so the fields above keep their offsets) -----------
  // Paged KV (kv_layout.paged): k and v are [num_pages, page_size, heads_k, d] with the page
  // axis in batch_stride; key j of batch entry b is row j % page_size of page
  // page_table[b * page_table_stride + j / page_size]. A page index outside [0, num_pages), or a
  // key past max_pages * page_size, is never read: the rows it would feed come out NaN.
  const int* page_table;
  long long page_table_stride;
  int num_pages;
  int max_pages;  // entries per page-table row
  // Keys of each batch entry ([batch], device); null: seqlen_k, or cu_seqlens_k when ragged.
  const int* seqused_k;
  // Split-K (decode family): each of num_splits splits writes its rows' partial O, normalised
  // by its own sum, and their LSE, fp32: partial_o[((split * rows_q + row) * heads_q + h) * dv
  // + d], partial_lse[(split * rows_q + row) * heads_q + h], with row the query row over the
  // whole batch (b * seqlen_q + s, ragged: the packed row) and rows_q their count. The combine
  // pass merges them into o and lse. num_splits == 1 writes o directly.
  float* partial_o;
  float* partial_lse;
  int num_splits;
  int rows_q;

  // Per-token scales: {batch stride, head stride} in elements.
  long long q_scale_strides[2];
  long long k_scale_strides[2];
  // Per-token K scales laid out like the cache (scales.token_layout "cache"): their row stride; the
  // batch (or page) stride and head stride are k_scale_strides.
  long long k_scale_row_stride;
  // Per-token V scales: {batch (or page) stride, head stride}, and their row stride laid out like
  // the cache.
  long long v_scale_strides[2];
  long long v_scale_row_stride;
  // Per-block K scales (scales.k_block): the stride between a key row's blocks.
  long long k_scale_block_stride;
};

}  // namespace flashjit
