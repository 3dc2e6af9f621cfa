// What the decode family's split passes share (split_kv.cuh, latent_split.cuh), as a CRTP base:
// which rows, keys and split a CTA takes, and the ring that brings its key tiles in.
//
// Rows: the query heads of one KV head times the query tokens of one step share a tile, so each
// K/V byte is read once per KV head. Packed row r of KV head hk is token r / kGroup of query
// head hk * kGroup + r % kGroup. A CTA takes kBlockM packed rows (one m block) of one (batch,
// KV head) and one split of its keys: grid (num_splits, m_blocks * heads_k, batch).
// Ring: every thread gathers 16-byte chunks of a key tile with cp.async, row by row, so any
// page size works; a kStages-deep ring keeps (kStages - 1) tiles in flight. Each key row's two
// offsets (K's and V's, or K's and its rope part's) come from the KV policy (kv_policy.cuh) once,
// into shared memory a tile before its copies (write_rows), from page-table entries read into
// registers a tile before that (fetch_rows): no thread waits on a page-table read, neither
// between its copies nor before its math.
//
// TMA (T::kTmaKv, sm_90a): K/V tiles arrive instead as TMA boxes in the same swizzled layout,
// issued by the lanes of warp 0, each of which holds one page's table entry a tile ahead, and
// complete on one mbarrier per ring stage; pages past the cache end (and entries that name no
// page) are read out of the tensor's bounds, which TMA fills with zeros. Rows of a tile's pages
// past the cache end hold whatever the cache holds there, so the pass clears V's (K's are
// masked) before the tile's barrier.
//
// It also holds what the passes read beside the tiles: the quantisation scales, the CTA's Q rows
// in Q's stored type (QRows), and the slots of per-token K/V scales a tile ahead.
//
// The derived pass provides kR (its regions: rows_offset, rows_slot_bytes, flag_offset),
// second_tensor() (the tensor of each row's second offset), row_written(n, r, j) (after row r of
// tile n is planned), load_q(), load_kv(stage), tile_arrived(i) (tile i and Q are visible) and
// compute(n, stage, i); it may provide tile_landed() (this thread's copies of tile i are
// complete, before the barrier that makes them visible). With TMA it provides instead of
// load_kv issue_tile(n, stage, entry) (warp 0) and clear_rows_past_end(n, stage), and kR's
// barrier_offset.
#pragma once

#include "common/kv_policy.cuh"
#include "common/mask.cuh"
#include "common/element_traits.cuh"
#include "common/params.cuh"
#include "common/scales.cuh"
#include "common/seqinfo.cuh"
#include "common/types.cuh"
#include "sm80/cp_async.cuh"
#if __CUDA_ARCH__ >= 900
#include "sm90/ptx.cuh"
#endif

namespace flashjit::decode {

template <class Derived, class T>
struct KeyRing {
  static constexpr int kBM = T::kBlockM, kBN = T::kBlockN, kWarps = T::kNumWarps;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kGroup = T::kGroup, kStages = T::kStages;
  static constexpr int kWarpsM = kBM / 16;
  static constexpr int kRowsPerThread = ceil_div(kBN, kThreads);  // key rows each thread plans
  using Kv = KvCache<T::kVarlen, T::kPaged, T::kPageSize>;
  // TMA: rows per box (a page's, or the whole tile's) and boxes per tile and panel, one a lane.
  static constexpr bool kTma = T::kTmaKv;
  static constexpr int kBoxRows = T::kPaged && T::kPageSize < kBN ? T::kPageSize : kBN;
  static constexpr int kBoxes = kBN / kBoxRows;
  static_assert(!kTma || (kBoxRows >= 8 && kBN % kBoxRows == 0 && kBoxes <= 32), "TMA boxes of whole pages");

  static_assert(kStages >= 2, "a ring of at least two key stages");

  const AttentionParams& p;
  u32 smem_base;
  unsigned char* smem;
  int b, hk, split, m0, rows;  // rows: valid packed rows of this CTA's (batch, KV head)
  SeqInfo seq;                 // queries (rows of q and o)
  Kv kv;
  AttentionMask<T::kMask> mask;
  Scales<T> scales;  // quantisation scales (fp8 caches)
  int tid, warp, lane, wm, wn, g, t;
  int n_begin, n_end, n_unmasked_lo, n_unmasked_hi;

  __device__ __forceinline__ explicit KeyRing(const AttentionParams& params) : p(params) {}

  __device__ __forceinline__ Derived& self() { return static_cast<Derived&>(*this); }
  __device__ __forceinline__ const Derived& self() const { return static_cast<const Derived&>(*this); }

  __device__ __forceinline__ void tile_landed() const {}

  __device__ __forceinline__ int token_of(int packed) const { return packed / kGroup; }
  __device__ __forceinline__ int head_of(int packed) const { return hk * kGroup + packed % kGroup; }

  // Row pointers of the CTA's packed query rows in Q's stored type (null past the valid rows),
  // and their dequantisation scales.
  struct QRows {
    using QE = typename QElementOf<T>::type;
    const KeyRing* k;
    __device__ __forceinline__ const QE* operator()(int r) const {
      const int packed = k->m0 + r;
      if (packed >= k->rows) return nullptr;
      return static_cast<const QE*>(k->p.q.ptr) +
             SeqInfo::offset<T::kVarlen>(k->p.q, k->b, k->seq.q_start, k->token_of(packed), k->head_of(packed));
    }
    __device__ __forceinline__ const QE* operator()(int r, float& scale) const {
      const int packed = k->m0 + r;
      scale = packed < k->rows ? k->scales.q.at(k->b, k->head_of(packed), k->seq.q_start, k->token_of(packed)) : 0.f;
      return (*this)(r);
    }
  };

  // Per-token K or V scales of key tile n, in the slot (n - n_begin) % (kStages + 1) of the
  // region at `offset`: one slot more than the ring, since the slot written for tile i + stages
  // is not the one tile i is still reading.
  __device__ __forceinline__ float* token_scale_slot(int offset, int slot_bytes, int n) const {
    return reinterpret_cast<float*>(smem + offset + ((n - n_begin) % (kStages + 1)) * slot_bytes);
  }

  __device__ __forceinline__ int* bad_page_flag() const {
    return reinterpret_cast<int*>(smem + Derived::kR.flag_offset);
  }

  // The row offsets (-1: zero-fill) of the tile in flight to ring stage `stage`.
  __device__ __forceinline__ longlong2* row_slot(int stage) const {
    return reinterpret_cast<longlong2*>(smem + Derived::kR.rows_offset + stage * Derived::kR.rows_slot_bytes);
  }

  // The page-table entries of key tile n's rows that this thread plans (paged caches; a no-op
  // otherwise): loads whose results write_rows uses a step later.
  __device__ __forceinline__ void fetch_rows(int n, int (&entry)[kRowsPerThread]) const {
#pragma unroll
    for (int e = 0; e < kRowsPerThread; ++e) {
      const int r = tid + e * kThreads, j = n * kBN + r;
      entry[e] = (r < kBN && j < kv.seqlen_k) ? kv.page_entry(j) : -1;
    }
  }

  // Key tile n's row offsets into the slot of ring stage `stage`: -1 past the cache end and for a
  // page-table entry that names no page (which also raises the CTA's flag). load_kv reads them
  // after the next __syncthreads().
  __device__ __forceinline__ void write_rows(int n, int stage, const int (&entry)[kRowsPerThread]) const {
    longlong2* slot = row_slot(stage);
    const TensorArg& second = self().second_tensor();
#pragma unroll
    for (int e = 0; e < kRowsPerThread; ++e) {
      const int r = tid + e * kThreads, j = n * kBN + r;
      if (r >= kBN) break;
      i64 first_off = -1, second_off = -1;
      if (j < kv.seqlen_k && !kv.offsets(entry[e], p.k, second, b, j, hk, first_off, second_off)) *bad_page_flag() = 1;
      slot[r] = make_longlong2(first_off, second_off);
      self().row_written(n, r, j);
    }
  }

  // -inf where key n0 + c is not visible from its row's token (or past the cache end), in a
  // warp's 16 x (8 kNT) scores in the accumulator order of mma.sync and wgmma alike: row
  // g + 8 h of this warp's row block, column 8 j + 2 t + e at s[0][j][2 h + e].
  // (latent_wgmma.cuh keeps its own copy on its flat array: through this one its measured
  // kernel compiles to a different schedule.)
  template <int kNT>
  __device__ __forceinline__ void mask_scores(float (&s)[1][kNT][4], int n0) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int tok = token_of(m0 + 16 * wm + g + 8 * h);
      const int lo = mask.col_lo(tok) - n0, hi = mask.col_hi(tok) - n0;
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = 8 * j + 2 * t + e;
          if (c < lo || c >= hi) s[0][j][2 * h + e] = neg_inf();
        }
    }
  }

  // Where packed row (tok, head) writes: its O row (one split: column 0), its slot of this split
  // in the workspace (several: partial_o[slot * dv], partial_lse[slot]), and its LSE.
  __device__ __forceinline__ typename T::OutElement* o_row(int tok, int head) const {
    return static_cast<typename T::OutElement*>(const_cast<void*>(p.o.ptr)) +
           SeqInfo::offset<T::kVarlen>(p.o, b, seq.q_start, tok, head);
  }
  __device__ __forceinline__ i64 partial_slot(int tok, int head) const {
    const i64 row = T::kVarlen ? i64(seq.q_start + tok) : i64(b) * p.seqlen_q + tok;
    return (i64(split) * p.rows_q + row) * p.heads_q + head;
  }
  __device__ __forceinline__ void write_lse(int tok, int head, float lse) const {
    if (T::kWriteLse && p.lse != nullptr) p.lse[lse_offset<T::kVarlen>(p, b, head, seq.q_start, tok)] = lse;
  }

  // The CTA's place: rows, keys and split from the grid, the mask, the key tiles it takes. False
  // when the (batch, KV head) has fewer rows than this m block starts at.
  __device__ __forceinline__ bool begin() {
#if __CUDA_ARCH__ >= 900
    // The combine pass (a programmatic dependent) may launch once every CTA has started: its
    // CTAs then wait on this grid's completion already resident, instead of after a launch gap.
    asm volatile("griddepcontrol.launch_dependents;");
#endif
    extern __shared__ __align__(128) unsigned char smem_raw[];
    smem = smem_raw;
    smem_base = u32(__cvta_generic_to_shared(smem_raw));
    tid = int(threadIdx.x);
    warp = tid / 32;
    lane = tid % 32;
    wm = warp % kWarpsM;
    wn = warp / kWarpsM;
    g = lane / 4;
    t = lane % 4;

    split = int(blockIdx.x);
    const int m_blocks = int(gridDim.y) / p.heads_k;
    hk = int(blockIdx.y) / m_blocks;
    m0 = (int(blockIdx.y) % m_blocks) * kBM;
    b = int(blockIdx.z);
    kv = Kv::make(p, b);
    seq = kv.sequence(p, b);
    rows = kGroup * seq.seqlen_q;
    if (m0 >= rows) return false;  // this entry has fewer query tokens than the longest

    mask = AttentionMask<T::kMask>{seq.seqlen_q, seq.seqlen_k, p.window_left, p.window_right};
    scales = Scales<T>::make(p);
    // The keys the CTA's rows see: from the first row's token's lowest to the last's highest.
    const int tok_first = token_of(m0), tok_last = token_of(cmin(m0 + kBM, rows) - 1);
    const int lo = mask.col_lo(tok_first), hi = mask.col_hi(tok_last);
    const int tile_lo = lo / kBN, tile_hi = hi > lo ? ceil_div(hi, kBN) : tile_lo;
    const int per_split = ceil_div(tile_hi - tile_lo, p.num_splits);
    n_begin = tile_lo + split * per_split;
    n_end = cmin(tile_hi, n_begin + per_split);
    // Tiles inside [every row's lowest visible key, every row's highest) need no mask.
    n_unmasked_lo = ceil_div(mask.col_lo(tok_last), kBN);
    n_unmasked_hi = mask.col_hi(tok_first) / kBN;
    return true;
  }

  // TMA: the mbarrier of ring stage `stage`.
  __device__ __forceinline__ u32 stage_barrier(int stage) const {
    return smem_base + Derived::kR.barrier_offset + 8 * stage;
  }

  // TMA: the page-table entry of lane `lane`'s box of key tile n (warp 0; -1 for a box past the
  // cache end or a lane without one; 0 for contiguous caches).
  __device__ __forceinline__ int box_entry(int n) const {
    const int j = n * kBN + lane * kBoxRows;
    return lane < kBoxes && j < kv.seqlen_k ? kv.page_entry(j) : -1;
  }

  // TMA: the coordinates of lane `lane`'s box of key tile n along the row and outer axes (the
  // page and its row, or the entry and its key), from its entry. A box past the cache end, or
  // whose entry names no page (which raises the flag), reads past the outer axis: zeros.
  __device__ __forceinline__ void box_place(int n, int entry, int& row, int& outer) const {
    const int j = n * kBN + lane * kBoxRows;
    if constexpr (T::kPaged) {
      const bool ok = unsigned(entry) < unsigned(kv.num_pages);
      if (!ok && j < kv.seqlen_k) *bad_page_flag() = 1;
      row = j % T::kPageSize;
      outer = ok && j < kv.seqlen_k ? entry : 1 << 30;  // past any cache (also one of no pages)
    } else {
      row = kv.k_start + j;
      outer = T::kVarlen ? 0 : b;
    }
  }

  // Q, then the ring over tiles [n_begin, n_end), each tile's math as soon as it has arrived.
  __device__ __forceinline__ void main_loop() {
    if constexpr (kTma)
      main_loop_tma();
    else
      main_loop_cp_async();
  }

  __device__ __forceinline__ void main_loop_cp_async() {
    self().load_q();  // joins the first tile's commit group (or is synchronous)
    // Row offsets of the first kStages tiles (their page-table reads issued together), one
    // barrier, then the first kStages - 1 tiles' copies.
    {
      int first[kStages][kRowsPerThread];
#pragma unroll
      for (int s = 0; s < kStages; ++s)
        if (n_begin + s < n_end) fetch_rows(n_begin + s, first[s]);
#pragma unroll
      for (int s = 0; s < kStages; ++s)
        if (n_begin + s < n_end) write_rows(n_begin + s, s, first[s]);
    }
    int ahead[kRowsPerThread];  // page-table entries of the tile whose offsets are written next
    if (n_begin + kStages < n_end) fetch_rows(n_begin + kStages, ahead);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      if (n_begin + i < n_end) self().load_kv(i);
      sm80::cp_async_commit();  // possibly empty: the wait depth stays a constant
    }
#pragma unroll 1
    for (int i = 0; n_begin + i < n_end; ++i) {
      sm80::cp_async_wait<kStages - 2>();
      self().tile_landed();
      // Tile i is visible to every thread, every warp is done with tile i - 1, whose stage is
      // refilled next, and that stage's row offsets are written.
      __syncthreads();
      self().tile_arrived(i);
      const int next = n_begin + i + kStages - 1;
      if (next < n_end) self().load_kv((i + kStages - 1) % kStages);
      sm80::cp_async_commit();
      // The tile after `next` goes to tile i's stage, whose offsets its copies no longer need.
      if (next + 1 < n_end) {
        write_rows(next + 1, i % kStages, ahead);
        if (next + 2 < n_end) fetch_rows(next + 2, ahead);
      }
      self().compute(n_begin + i, i % kStages, i);
    }
  }

  // The same ring with TMA boxes: warp 0 issues tile i + kStages - 1 into the stage tile i - 1
  // left, after the barrier that says every warp is done with it.
  __device__ __forceinline__ void main_loop_tma() {
#if __CUDA_ARCH__ >= 900
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) sm90::mbar_init(stage_barrier(s), 1);
      sm90::fence_barrier_init();
    }
    self().load_q();
    sm80::cp_async_commit();
    __syncthreads();  // the barriers are initialised
    int ahead = -1;   // warp 0: the entry of the tile issued next
    if (warp == 0) {
      int first[kStages - 1];
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) first[s] = n_begin + s < n_end ? box_entry(n_begin + s) : -1;
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s)
        if (n_begin + s < n_end) self().issue_tile(n_begin + s, s, first[s]);
      if (n_begin + kStages - 1 < n_end) ahead = box_entry(n_begin + kStages - 1);
    }
#pragma unroll 1
    for (int i = 0; n_begin + i < n_end; ++i) {
      const int n = n_begin + i, stage = i % kStages;
      sm90::mbar_wait(stage_barrier(stage), u32(i / kStages) & 1u);
      if (i == 0) sm80::cp_async_wait<0>();
      if ((n + 1) * kBN > kv.seqlen_k) self().clear_rows_past_end(n, stage);
      self().tile_landed();
      __syncthreads();
      self().tile_arrived(i);
      const int next = n + kStages - 1;
      if (warp == 0 && next < n_end) {
        self().issue_tile(next, (i + kStages - 1) % kStages, ahead);
        if (next + 1 < n_end) ahead = box_entry(next + 1);
      }
      self().compute(n, stage, i);
    }
#endif
  }
};

}  // namespace flashjit::decode
