// The sm80 family's forward kernel: FlashAttention-2 on mma.sync.m16n8k16 (bf16/fp16 in, fp32
// accumulate), for every GPU from Ampere on.
//
// One CTA computes O for kBlockM query rows of one (batch, head); kNumWarps warps each own
// kBlockM / kNumWarps consecutive rows (16 or 32: one or two 16-row m-tiles), so softmax needs
// only quad shuffles and never a CTA-wide reduction. Per KV tile of kBlockN keys, walked from the
// last visible tile down to the first:
//   S = Q K^T      A = Q, re-read from shared memory (ldmatrix); B = K (ldmatrix, [n][k] = "col")
//   mask           only on tiles at the mask's or the sequence's edge (AttentionMask ranges)
//   online softmax fp32 running max / sum, exp2 with the scale folded into one FFMA (softmax.cuh)
//   O += P V       P stays in registers: the C fragments of S repack as A fragments (mma.cuh);
//                  B = V through ldmatrix.trans
// Pipeline (cp.async, one commit group per tile load):
//   kStages == 2   K and V double-buffered: K(n-1) and V(n-1) are fetched while tile n is
//                  computed (2 barriers per tile)
//   kStages == 1   one K and one V buffer: V(n) loads under Q K^T(n) and the softmax, K(n-1)
//                  under P V(n) (2 barriers per tile; FlashAttention-2's scheme)
// Epilogue: O / l is staged through shared memory (over Q/K/V) for 16-byte coalesced stores;
// LSE (natural log) from the quad's first lane.
//
// Register budget: with 32 rows per warp at d128 / BN 64 the S and O accumulators alone are 192
// fp32 registers of the 255, which is why several choices below are about registers (softmax
// sums in shared memory, S's first mma without a zeroed accumulator, no per-pass address
// registers in tile_io.cuh); the host's default tiles (family_sm80.cpp) keep ptxas spill-free.
#pragma once

#include "common/kv_policy.cuh"
#include "common/mask.cuh"
#include "common/params.cuh"
#include "common/scales.cuh"
#include "common/scheduler.cuh"
#include "common/seqinfo.cuh"
#include "common/types.cuh"
#include "sm80/cp_async.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/smem_layout.cuh"
#include "sm80/smem_tile.cuh"
#include "sm80/softmax.cuh"
#include "sm80/tile_io.cuh"
#include "sm80/warp_gemm.cuh"

namespace flashjit::sm80 {

template <class T>
struct FwdShape {
  static constexpr int kBM = T::kBlockM;
  static constexpr int kBN = T::kBlockN;
  static constexpr int kWarps = T::kNumWarps;
  static constexpr int kThreads = T::kThreads;
  static constexpr int kDQK = T::kHeadDimQK;
  static constexpr int kDV = T::kHeadDimV;
  static constexpr int kNope = T::kHeadDimQK - T::kHeadDimRope;  // columns from q / k
  static constexpr int kWarpRows = kBM / kWarps;
  static constexpr int kMT = kWarpRows / 16;  // 16-row m-tiles per warp
  static constexpr int kNT = kBN / 8;         // 8-column n-tiles of S per row
  static constexpr int kDT = kDV / 8;         // 8-column n-tiles of O per row

  static_assert(kThreads == kWarps * 32, "one warp is 32 threads");
  static_assert(kWarpRows == 16 || kWarpRows == 32, "each warp owns 16 or 32 query rows");
  static_assert(kBN % 16 == 0 && kBN >= 16, "kBlockN is a multiple of 16");
  static_assert(kDQK % 16 == 0 && kDV % 16 == 0, "head dims are multiples of 16");
  static_assert(T::kHeadDimRope % 16 == 0 && T::kHeadDimRope < kDQK, "rope: a 16-column tail of qk");
  static_assert(T::kStages == 1 || T::kStages == 2, "one or two K/V buffers");
  static_assert(T::kGroup >= 1, "query heads per KV head");
};

// The per-CTA state of one work tile and the steps of the kernel, as member functions so that the
// two-stage loop can take its buffer index as a template argument.
template <class T>
struct Forward {
  using E = typename T::Element;          // Q, K, V as stored
  using CE = typename T::ComputeElement;  // the mma.sync operands (16-bit)
  using RE = typename T::RopeElement;
  using OE = typename T::OutElement;
  using Sh = FwdShape<T>;
  using L = SmemLayout<T>;
  using QTile = typename L::QTile;
  using KTile = typename L::KTile;
  using VTile = typename L::VTile;
  using OTile = typename L::OTile;
  static constexpr int kBM = Sh::kBM, kBN = Sh::kBN, kMT = Sh::kMT, kNT = Sh::kNT, kDT = Sh::kDT;
  static constexpr int kThreads = Sh::kThreads;
  static constexpr int kPSteps = kBN / 16;  // k-steps of the P V GEMM
  static constexpr bool kVarlen = T::kVarlen;
  static_assert(L::kBytes <= T::kSmemBytes, "shared-memory layout exceeds the launch's kSmemBytes");
  static_assert(L::kStatsBytes == OnlineSoftmax<kMT, kThreads, L::kSumsInSmem>::kStatsBytes,
                "softmax stats size");
  static_assert(sizeof(CE) == 2 && sizeof(OE) == 2, "16-bit operands and O");
  // Inputs in another type than the operands (fp8), quantisation scales, or a rope part in
  // another type go through the converting loads (tile_io.cuh); 16-bit inputs as they are take
  // cp.async.
  static constexpr bool kRopeConverts = T::kHeadDimRope > 0 && !SameType<RE, CE>::value;
  using QE = typename QElementOf<T>::type;  // E, or a 16-bit Q beside an fp8 cache (dtype.q)
  static constexpr bool kConvertQ = !SameType<QE, CE>::value || !SameType<QE, RE>::value ||
                                    T::kQScale != ScaleKind::kNone || kRopeConverts;
  static constexpr bool kConvertK = !SameType<E, CE>::value || T::kKScale != ScaleKind::kNone || kRopeConverts;
  static constexpr bool kConvertV = !SameType<E, CE>::value || T::kVScale != ScaleKind::kNone;

  const AttentionParams& p;
  u32 smem_base;
  int b, h;
  SeqInfo seq;
  int m0;
  AttentionMask<T::kMask> mask;
  int n_min, n_max, n_unmasked_lo, n_unmasked_hi;
  int tid, g, t, warp_row0;
  KvCache<kVarlen, T::kPaged, T::kPageSize> kv;
  int b_kv_head;
  mutable bool bad_page;  // this thread met a page-table entry outside the cache
  Scales<T> scales;
  int q_rows;
  GmemRows<QE> gq;
  GmemRows<E> gk, gv;
  GmemRows<RE> gq_rope, gk_rope;
  LanePart lq, lk, lv;  // this lane's ldmatrix addresses in Q, K stage 0, V stage 0
  float acc_o[kMT][kDT][4];
  OnlineSoftmax<kMT, kThreads, L::kSumsInSmem> softmax;

  // Rows n * kBN ... of K (and its rope part) or V.
  template <class X>
  __device__ __forceinline__ GmemRows<X> kv_rows(const GmemRows<X>& x, int n) const {
    return GmemRows<X>{x.ptr + i64(n * kBN) * x.stride, x.stride};
  }

  // Row sources of the converting loads: pointer and dequantisation scale of each tile row.
  template <class X, bool kScaledQ>
  struct QRows {
    const Forward* f;
    GmemRows<X> rows;
    __device__ __forceinline__ RowRef<X> operator()(int r) const {
      if (r >= f->q_rows) return {nullptr, 0.f};
      return {rows.ptr + i64(r) * rows.stride, kScaledQ ? f->scales.q.at(f->b, f->h, f->seq.q_start, f->m0 + r) : 1.f};
    }
  };
  // kScale: 0 none (rope columns), 1 K's, 2 V's.
  template <class X, int kScale>
  struct KvRows {
    const Forward* f;
    GmemRows<X> rows;          // contiguous caches: row 0 of the entry
    const TensorArg* tensor;   // paged caches
    int row0;
    __device__ __forceinline__ RowRef<X> operator()(int r) const {
      const int j = row0 + r;
      if (j >= f->seq.seqlen_k) return {nullptr, 0.f};
      const float scale = kScale == 1 ? f->scales.key(f->kv, f->b, f->b_kv_head, f->seq.k_start, j)
                          : kScale == 2 ? f->scales.value(f->kv, f->b, f->b_kv_head, f->seq.k_start, j)
                                        : 1.f;
      if constexpr (T::kPaged) {
        bool ok;
        const i64 off = f->kv.offset(*tensor, f->b, j, f->b_kv_head, ok);
        if (!ok) {
          f->bad_page = true;
          return {nullptr, 0.f};
        }
        return {static_cast<const X*>(tensor->ptr) + off, scale};
      } else {
        return {rows.ptr + i64(j) * rows.stride, scale};
      }
    }
  };
  // Paged caches: each key row's address through the KV policy (null past the entry's keys, and
  // for a page-table entry that names no page of the cache, which also marks the tile bad).
  struct PagedRows {
    const Forward* f;
    const TensorArg* tensor;
    int row0;
    __device__ __forceinline__ const E* operator()(int r) const {
      const int j = row0 + r;
      if (j >= f->seq.seqlen_k) return nullptr;
      bool ok;
      const i64 off = f->kv.offset(*tensor, f->b, j, f->b_kv_head, ok);
      if (!ok) {
        f->bad_page = true;
        return nullptr;
      }
      return static_cast<const E*>(tensor->ptr) + off;
    }
  };

  __device__ __forceinline__ void load_k(int n, int stage, int rows) const {
    if constexpr (kConvertK) {
      convert_tile<KTile, kThreads, Sh::kNope, CE>(smem_base + L::k_stage(stage), KvRows<E, 1>{this, gk, &p.k, n * kBN},
                                                   KvRows<RE, 0>{this, gk_rope, &p.k_rope, n * kBN}, tid);
    } else if constexpr (T::kPaged) {
      gather_tile<KTile, kThreads, Sh::kNope, E>(smem_base + L::k_stage(stage), PagedRows{this, &p.k, n * kBN},
                                                 PagedRows{this, &p.k_rope, n * kBN}, gk.ptr, tid);
    } else {
      load_tile<KTile, kThreads, Sh::kNope>(smem_base + L::k_stage(stage), kv_rows(gk, n),
                                            T::kHeadDimRope > 0 ? kv_rows(gk_rope, n) : gk_rope,
                                            rows, tid);
    }
  }
  __device__ __forceinline__ void load_v(int n, int stage, int rows) const {
    if constexpr (kConvertV) {
      convert_tile<VTile, kThreads, Sh::kDV, CE>(smem_base + L::v_stage(stage), KvRows<E, 2>{this, gv, &p.v, n * kBN},
                                                 KvRows<E, 2>{this, gv, &p.v, n * kBN}, tid);
    } else if constexpr (T::kPaged) {
      gather_tile<VTile, kThreads, Sh::kDV, E>(smem_base + L::v_stage(stage), PagedRows{this, &p.v, n * kBN},
                                               PagedRows{this, &p.v, n * kBN}, gv.ptr, tid);
    } else {
      load_tile<VTile, kThreads, Sh::kDV>(smem_base + L::v_stage(stage), kv_rows(gv, n), gv, rows,
                                          tid);
    }
  }
  __device__ __forceinline__ int kv_rows_valid(int n) const { return seq.seqlen_k - n * kBN; }

  // S = Q K^T for KV tile n from the K buffer at byte offset k_off from stage 0, masked where
  // the tile crosses the mask's or the sequence's edge.
  __device__ __forceinline__ void scores(int n, u32 k_off, float (&s)[kMT][kNT][4]) const {
    gemm_qk<CE, QTile, KTile>(s, lq, lk.plus(k_off));
    if (n >= n_unmasked_hi || n < n_unmasked_lo)
      apply_mask(s, mask, m0 + warp_row0 + g, n * kBN, t);
  }

  // Online softmax on S, then P packed as the A operand of the second GEMM (the C fragments of
  // n-tiles 2kk, 2kk+1 form the A fragment of k-step kk, mma.cuh).
  __device__ __forceinline__ void probabilities(float (&s)[kMT][kNT][4], u32 (&pa)[kMT][kPSteps][4]) {
    softmax.update(s, acc_o, p.softmax_scale_log2);
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
      for (int kk = 0; kk < kPSteps; ++kk) {
        pa[mi][kk][0] = pack2<CE>(s[mi][2 * kk][0], s[mi][2 * kk][1]);          // row g,   k 2t..
        pa[mi][kk][1] = pack2<CE>(s[mi][2 * kk][2], s[mi][2 * kk][3]);          // row g+8, k 2t..
        pa[mi][kk][2] = pack2<CE>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);  // row g,   k 2t+8..
        pa[mi][kk][3] = pack2<CE>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);  // row g+8, k 2t+8..
      }
  }

  // Two buffers: tile n sits in stage kStage; tile n - 1 is fetched into the other meanwhile.
  template <int kStage>
  __device__ __forceinline__ void step_double_buffered(int n) {
    // In flight: K(n), V(n). Wait for K(n); the barrier also means every warp is done with
    // tile n + 1, whose buffers (the other stage) are refilled next.
    cp_async_wait<1>();
    __syncthreads();
    if (n > n_min) load_k(n - 1, kStage ^ 1, kv_rows_valid(n - 1));
    cp_async_commit();  // empty after the last tile: keeps the wait depths constant
    if (n > n_min) load_v(n - 1, kStage ^ 1, kv_rows_valid(n - 1));
    cp_async_commit();
    float s[kMT][kNT][4];
    scores(n, L::k_stage(kStage) - L::k_stage(0), s);
    u32 pa[kMT][kPSteps][4];
    probabilities(s, pa);
    cp_async_wait<2>();  // V(n); K(n-1), V(n-1) may stay in flight
    __syncthreads();
    gemm_pv<CE, VTile>(acc_o, pa, lv.plus(L::v_stage(kStage) - L::v_stage(0)));
  }

  // One buffer each: V(n) loads under Q K^T(n) and the softmax, K(n-1) under P V(n).
  __device__ __forceinline__ void step_single_buffered(int n) {
    cp_async_wait<0>();  // K(n) (and Q); the barrier also frees V's buffer (P V of tile n + 1)
    __syncthreads();
    load_v(n, 0, kv_rows_valid(n));
    cp_async_commit();
    float s[kMT][kNT][4];
    scores(n, 0, s);
    u32 pa[kMT][kPSteps][4];
    probabilities(s, pa);
    cp_async_wait<0>();  // V(n); the barrier also frees K's buffer
    __syncthreads();
    if (n > n_min) load_k(n - 1, 0, kv_rows_valid(n - 1));
    cp_async_commit();
    gemm_pv<CE, VTile>(acc_o, pa, lv);
  }

  __device__ __forceinline__ void main_loop() {
    if constexpr (kConvertQ)
      convert_tile<QTile, kThreads, Sh::kNope, CE>(smem_base + u32(L::kQ), QRows<QE, true>{this, gq},
                                                   QRows<RE, false>{this, gq_rope}, tid);
    else
      load_tile<QTile, kThreads, Sh::kNope>(smem_base + u32(L::kQ), gq, gq_rope, q_rows, tid);
    load_k(n_max - 1, 0, kv_rows_valid(n_max - 1));
    cp_async_commit();  // group: Q + K(n_max - 1)
    if constexpr (T::kStages == 2) {
      load_v(n_max - 1, 0, kv_rows_valid(n_max - 1));
      cp_async_commit();  // group: V(n_max - 1)
      // Unrolled by two so that buffer offsets are compile-time constants: they fold into the
      // ldmatrix / cp.async immediates instead of taking registers.
      for (int n = n_max - 1;; n -= 2) {
        step_double_buffered<0>(n);
        if (n - 1 < n_min) break;
        step_double_buffered<1>(n - 1);
        if (n - 2 < n_min) break;
      }
    } else {
      for (int n = n_max - 1; n >= n_min; --n) step_single_buffered(n);
    }
  }

  // O / l through shared memory (over Q/K/V) to 16-byte coalesced global stores; LSE per row.
  __device__ __forceinline__ void epilogue(int q_rows) {
    float inv_sum[kMT][2], lse[kMT][2];
    softmax.finalize(p.softmax_scale, inv_sum, lse);

    cp_async_wait<0>();
    // Every warp is done with Q/K/V; a paged tile that met a bad page-table entry writes NaN.
    bool bad = false;
    if constexpr (T::kPaged) bad = __syncthreads_or(bad_page);
    else __syncthreads();
    if (bad) {
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) inv_sum[mi][hh] = lse[mi][hh] = __int_as_float(0x7fc00000);
    }
    const u32 so = smem_base + u32(L::kO);
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = warp_row0 + 16 * mi + g + 8 * hh;
#pragma unroll
        for (int d = 0; d < kDT; ++d) {
          // C fragment: row g (+8), columns 8d + 2t, 8d + 2t + 1 = bytes 4t..4t+3 of chunk d.
          const u32 v = pack2<OE>(acc_o[mi][d][2 * hh] * inv_sum[mi][hh],
                                  acc_o[mi][d][2 * hh + 1] * inv_sum[mi][hh]);
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(so + OTile::offset(row, d) + 4 * t), "r"(v)
                       : "memory");
        }
      }
    __syncthreads();
    OE* go = static_cast<OE*>(const_cast<void*>(p.o.ptr)) +
             SeqInfo::offset<kVarlen>(p.o, b, seq.q_start, m0, h);
    store_tile<OTile, kThreads>(so, go, p.o.row_stride, q_rows, tid);

    if constexpr (T::kWriteLse) {
      if (p.lse != nullptr && t == 0) {
#pragma unroll
        for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int row = m0 + warp_row0 + 16 * mi + g + 8 * hh;
            if (row < seq.seqlen_q)
              p.lse[lse_offset<kVarlen>(p, b, h, seq.q_start, row)] = lse[mi][hh];
          }
      }
    }
  }

  __device__ __forceinline__ explicit Forward(const AttentionParams& params) : p(params) {}

  __device__ __forceinline__ void run() {
    extern __shared__ __align__(128) unsigned char smem[];
    smem_base = u32(__cvta_generic_to_shared(smem));

    // ---- which tile, and which keys it sees ------------------------------------------------
    const TransientScheduler<T::kMask == MaskKind::kCausal> sched;  // causal: longest first
    const WorkTile work = sched.work(p, sched.initial(p));
    b = work.batch;
    h = work.head;
    const int hk = work.head / T::kGroup;
    kv = KvCache<kVarlen, T::kPaged, T::kPageSize>::make(p, b);
    seq = kv.sequence(p, b);
    b_kv_head = hk;
    bad_page = false;
    m0 = work.m_block * kBM;
    if (m0 >= seq.seqlen_q) return;  // ragged batch: this sequence is shorter than the longest
    q_rows = cmin(kBM, seq.seqlen_q - m0);
    scales = Scales<T>::make(p);

    mask = AttentionMask<T::kMask>{seq.seqlen_q, seq.seqlen_k, p.window_left, p.window_right};
    n_min = mask.n_block_min(m0, kBN);
    n_max = mask.n_block_max(m0, kBM, kBN);
    n_unmasked_lo = mask.n_unmasked_min(m0, kBM, kBN);
    n_unmasked_hi = mask.n_unmasked_max(m0, kBN);

    tid = int(threadIdx.x);
    const int warp = tid / 32, lane = tid % 32;
    g = lane / 4;  // fragment row group and quad index (mma.cuh)
    t = lane % 4;
    warp_row0 = warp * Sh::kWarpRows;

    // ---- global tensors ----------------------------------------------------------------------
    gq = {static_cast<const QE*>(p.q.ptr) + SeqInfo::offset<kVarlen>(p.q, b, seq.q_start, m0, h), p.q.row_stride};
    gq_rope = {nullptr, 0};
    gk = {static_cast<const E*>(p.k.ptr) + SeqInfo::offset<kVarlen>(p.k, b, seq.k_start, 0, hk),
          p.k.row_stride};
    gk_rope = {nullptr, 0};
    if constexpr (T::kHeadDimRope > 0) {
      gq_rope = {static_cast<const RE*>(p.q_rope.ptr) +
                     SeqInfo::offset<kVarlen>(p.q_rope, b, seq.q_start, m0, h),
                 p.q_rope.row_stride};
      gk_rope = {static_cast<const RE*>(p.k_rope.ptr) +
                     SeqInfo::offset<kVarlen>(p.k_rope, b, seq.k_start, 0, hk),
                 p.k_rope.row_stride};
    }
    gv = {static_cast<const E*>(p.v.ptr) + SeqInfo::offset<kVarlen>(p.v, b, seq.k_start, 0, hk),
          p.v.row_stride};

    // ---- per-lane ldmatrix addressing (ldmatrix.cuh, smem_tile.cuh) ---------------------------
    // Q (A operand) and V (.trans B operand): lane l addresses row l % 16 and chunk l / 16 of a
    // 16x16 block: matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
    // K (B operand): row (l % 8) + 8 * (l / 16) and chunk (l / 8) % 2: matrices (keys 0-7, k 0-7),
    // (0-7, 8-15), (8-15, 0-7), (8-15, 8-15).
    lq = LanePart::make(smem_base + u32(L::kQ), warp_row0 + (lane & 15), lane >> 4);
    lk = LanePart::make(smem_base + L::k_stage(0), (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
    lv = LanePart::make(smem_base + L::v_stage(0), lane & 15, lane >> 4);

#pragma unroll
    for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
      for (int d = 0; d < kDT; ++d)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[mi][d][e] = 0.f;
    softmax.init(smem + L::kStats, tid);

    // No visible key at all (e.g. causal with seqlen_q > seqlen_k): O = 0, LSE = -inf.
    if (n_max > n_min) main_loop();
    epilogue(q_rows);
  }
};

template <class T>
__device__ void attention_fwd(const AttentionParams& p) {
  Forward<T> f(p);
  f.run();
}

}  // namespace flashjit::sm80
