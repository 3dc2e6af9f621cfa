// Where the keys of a batch entry live: KV addressing as a policy the kernels call instead of
// writing row offsets into their load loops.
//   contiguous  [batch, seqlen_k, heads_k, d] with strides, or ragged rows from cu_seqlens_k
//   paged       [num_pages, page_size, heads_k, d]: key j of entry b is row j % page_size of page
//               page_table[b][j / page_size] (the vLLM layout; params.cuh)
// Either way seqused_k, when given, says how many keys each entry has.
#pragma once

#include "common/params.cuh"
#include "common/seqinfo.cuh"
#include "common/types.cuh"

namespace flashjit {

template <bool kVarlen, bool kPaged, int kPageSize>
struct KvCache {
  static_assert(!kPaged || (kPageSize >= 1 && (kPageSize & (kPageSize - 1)) == 0), "page sizes are powers of two");

  int k_start;       // contiguous ragged: the entry's first row along the row axis; else 0
  int seqlen_k;      // keys of this entry
  const int* pages;  // paged: this entry's page-table row
  int num_pages;
  int max_pages;

  __device__ __forceinline__ static KvCache make(const AttentionParams& p, int batch) {
    KvCache c{};
    if constexpr (kPaged) {
      c.pages = p.page_table + i64(batch) * p.page_table_stride;
      c.num_pages = p.num_pages;
      c.max_pages = p.max_pages;
      c.seqlen_k = p.seqused_k ? p.seqused_k[batch] : p.seqlen_k;
    } else if constexpr (kVarlen) {
      c.k_start = p.cu_seqlens_k[batch];
      c.seqlen_k = p.seqused_k ? p.seqused_k[batch] : p.cu_seqlens_k[batch + 1] - c.k_start;
    } else {
      c.seqlen_k = p.seqused_k ? p.seqused_k[batch] : p.seqlen_k;
    }
    return c;
  }

  // The entry's query rows (ragged: from cu_seqlens_q) and its keys as this policy sees them.
  __device__ __forceinline__ SeqInfo sequence(const AttentionParams& p, int batch) const {
    SeqInfo s;
    if constexpr (kVarlen) {
      s.q_start = p.cu_seqlens_q[batch];
      s.seqlen_q = p.cu_seqlens_q[batch + 1] - s.q_start;
    } else {
      s.q_start = 0;
      s.seqlen_q = p.seqlen_q;
    }
    s.k_start = k_start;
    s.seqlen_k = seqlen_k;
    return s;
  }

  // The page-table entry of key `row` (paged caches; -1 past the table's row), read apart from
  // the offsets so that a kernel can issue the read early and use it a step later.
  __device__ __forceinline__ int page_entry(int row) const {
    if constexpr (kPaged) {
      const int slot = row / kPageSize;
      return slot < max_pages ? pages[slot] : -1;
    } else {
      return 0;
    }
  }

  // Element offset of key `row`, KV head `kv_head`, column 0 in K or V (`t`). `ok` is false when
  // the page table names no page of the cache for it; the offset is then 0 and must not be read.
  __device__ __forceinline__ i64 offset(const TensorArg& t, int batch, int row, int kv_head, bool& ok) const {
    i64 outer, inner;
    ok = place(page_entry(row), batch, row, outer, inner);
    return ok ? at(t, outer, inner, kv_head) : 0;
  }

  // Both offsets of key `row` (K's and V's) from one page-table entry, `entry` being
  // page_entry(row); false, with both offsets -1, when the entry names no page of the cache.
  __device__ __forceinline__ bool offsets(int entry, const TensorArg& k, const TensorArg& v, int batch, int row,
                                          int kv_head, i64& k_off, i64& v_off) const {
    i64 outer, inner;
    if (!place(entry, batch, row, outer, inner)) {
      k_off = v_off = -1;
      return false;
    }
    k_off = at(k, outer, inner, kv_head);
    v_off = at(v, outer, inner, kv_head);
    return true;
  }

 private:
  // Where key `row` lies: `outer` along the batch axis (the page, or the batch entry; 0 for
  // ragged rows) and `inner` along the row axis. False when `entry` names no page.
  __device__ __forceinline__ bool place(int entry, int batch, int row, i64& outer, i64& inner) const {
    if constexpr (kPaged) {
      outer = entry;
      inner = row % kPageSize;
      return unsigned(entry) < unsigned(num_pages);
    } else {
      outer = kVarlen ? 0 : batch;
      inner = k_start + row;
      return true;
    }
  }

  __device__ __forceinline__ static i64 at(const TensorArg& t, i64 outer, i64 inner, int kv_head) {
    return outer * t.batch_stride + inner * t.row_stride + i64(kv_head) * t.head_stride;
  }
};

}  // namespace flashjit
