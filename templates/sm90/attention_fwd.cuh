// sm90 forward attention: warp-specialised, TMA + wgmma (FlashAttention-3's recipe).
//   warpgroup 0      producer: warp 0 walks the tiles, its lane 0 issues TMA for Q and the K/V
//                    ring (setmaxnreg down)
//   warpgroups 1..C  consumers: 64 query rows each; S = Q K^T by SS-wgmma, O += P V by
//                    RS-wgmma with P from registers (setmaxnreg up). The next tile's Q K^T is
//                    issued before this tile's P V, so softmax overlaps the tensor cores, and
//                    named barriers ping-pong the consumers' GEMM issue. Each consumer
//                    releases Q after its last GEMM that reads it, so the next tile's Q loads
//                    while this tile finishes. O goes out through a shared-memory slab per
//                    consumer and a TMA store where the slabs fit (kTmaStoreO), else from
//                    registers.
//   fp8 (1-byte elements): 8-bit wgmma takes B K-major only, so warps 1-3 of the producer
//                    warpgroup transpose each V stage into Vt (v_transpose.cuh), which the
//                    consumers' P V reads; P is packed to fp8 with a max offset of 8. Q/K scales
//                    fold into each row's softmax scale, V scales into the final 1 / sum.
//   pair_cta (kPair): clusters of two CTAs on adjacent m blocks of one head share K/V. Rank 0
//                    multicasts each K tile into both CTAs, rank 1 each V tile, so each CTA
//                    fetches half the K/V bytes from L2. Both walk the union of their KV
//                    ranges; a CTA waits out and frees the tiles outside its own range.
// KV tiles are visited from the last to the first, so masked diagonal tiles come first.
#pragma once

#include "common/element_traits.cuh"
#include "common/mask.cuh"
#include "common/params.cuh"
#include "common/scales.cuh"
#include "common/scheduler.cuh"
#include "common/seqinfo.cuh"
#include "common/swizzle_panels.cuh"
#include "common/types.cuh"
#include "sm90/dynamic_scheduler.cuh"
#include "sm90/epilogue.cuh"
#include "sm90/pipeline.cuh"
#include "sm90/ptx.cuh"
#include "sm90/smem_layout.cuh"
#include "sm90/softmax.cuh"
#include "sm90/v_transpose.cuh"
#include "sm90/wgmma.cuh"

namespace flashjit::sm90 {

template <bool kCond, class A, class B> struct Select { using type = A; };
template <class A, class B> struct Select<false, A, B> { using type = B; };

// The KV range one tile visits; producer and consumers derive it identically.
struct TileRange {
  SeqInfo seq;
  int m0;
  int n_min, n_max;                     // tiles [n_min, n_max), visited downwards
  int n_unmasked_min, n_unmasked_max;   // tiles outside need elementwise masking
  bool skip;                            // no rows: past the end of the (ragged) sequence
  int kv_min, kv_max;                   // tiles loaded: [n_min, n_max), or with pair_cta the
                                        // union over both CTAs' ranges
};

template <class T>
struct ForwardKernel {
  using Element = typename T::Element;
  using Traits = ElementTraits<Element>;
  using Layout = SmemLayout<T>;
  static constexpr int BM = T::kBlockM, BN = T::kBlockN;
  static constexpr int DQK = T::kHeadDimQK, DV = T::kHeadDimV;
  static constexpr int kCwg = T::kConsumerWarpgroups;
  static constexpr int kStages = T::kStages;
  static constexpr bool kLongestFirst = T::kMask == MaskKind::kCausal;
  static constexpr bool kPair = T::kPairCta;
  static constexpr int kClusterM = kPair ? 2 : 1;
  using Scheduler = typename Select<
      T::kDynamic, DynamicScheduler<kLongestFirst, Layout>,
      typename Select<T::kPersistent, PersistentScheduler<kLongestFirst, kClusterM>,
                      TransientScheduler<kLongestFirst, kClusterM>>::type>::type;
  using Pipe = StageBarriers<Layout, kStages, kPair>;
  using State = PipelineState<kStages>;
  static constexpr bool kTransposeV = Layout::kTransposeV;
  // The stages P V reads: V's, shared by a pair_cta cluster, or (fp8) this CTA's own Vt.
  using PvPipe = StageBarriers<Layout, kStages, kPair && !kTransposeV>;
  // V's rows in the panels TMA lands them in: 128 bytes, or 64 for an fp8 dv of 64 or 192.
  static constexpr int kVPanelBytes = panel_bytes(DV * int(sizeof(Element)));
  using Transpose = VTranspose<T::kBlockN, T::kHeadDimV, kVPanelBytes>;
  // fp8 with dv + 8 <= 256: P V is 8 columns wider, over Vt's rows of ones (smem_regions.cuh), and
  // those columns of O are the tile's row sums. The consumers take them into the fp32 running sums
  // and clear them every tile: the fp8 tensor cores' accumulation loses a long sum of positive
  // terms (relative error 0.3 at 16k keys, 2 at 128k, when they were left to run), not a tile's.
  static constexpr bool kSumsInO = kTransposeV && vt_sums_rows(DV);
  static constexpr int kOCols = kSumsInO ? DV + kVtSumRows : DV;
  using Softmax = OnlineSoftmax<T::kBlockN, kTransposeV ? 8 : 0, T::kFmaExp2Every, T::kLazyRescale, kTransposeV ? 4 : 1,
                                kSumsInO>;
  static constexpr int kPSteps = BN / Traits::kMmaK;  // K steps of P V; one u32[4] of P each

  // A rope part (T::kHeadDimRope, its own tensors q_rope and k_rope, 16-bit) lands in the panels
  // after the nope part's. In the inputs' type the tiles are those of a DQK-column head; beside
  // fp8 nope columns its k-steps are 16-bit wgmma into the same accumulator, Q's rope columns
  // divided by the row's Q and K scales first (kRopeBesideFp8), so S = nope x scales + rope.
  using RopeElement = typename T::RopeElement;
  using RopeTraits = ElementTraits<RopeElement>;
  static constexpr int DR = T::kHeadDimRope, DN = DQK - DR;
  // The nope columns' panels: 128 bytes a row, or 64 for fp8 nope parts of 64 or 192 columns
  // (64-byte swizzle); the rope part's are 128 bytes (64 16-bit columns) after them.
  static constexpr int kNopePanelBytes = panel_bytes(DN * int(sizeof(Element)));
  static constexpr int kRopePanels = DR / RopeTraits::kPanelElems;
  static constexpr bool kRopeBesideFp8 = DR > 0 && Traits::kBytes == 1;
  static_assert(DR % 64 == 0 && (DR == 0 || sizeof(RopeElement) == 2) && (DN * sizeof(Element)) % 64 == 0,
                "nope rows of whole 64-byte panels and a 16-bit rope part of whole 128-byte panels");
  // The rope part's first panel in a Q buffer and a K stage: after the nope part's, which beside
  // a rope part are 128-byte panels (family_sm90.cpp).
  static constexpr int kRopeFirstPanel = DN * int(sizeof(Element)) / 128;
  static_assert(DR == 0 || kNopePanelBytes == 128, "beside a rope part, nope rows of 128-byte panels");
  static_assert(kRopeBesideFp8 || DR == 0 || SameType<RopeElement, Element>::value, "a 16-bit rope part in the inputs' type");
  // Per-token K scales (scales.k per_token) multiply S's columns: the producer warp writes each
  // K stage's into its slot of the seeds' k_scale region.
  static constexpr bool kKeyScales = T::kKScale == ScaleKind::kPerToken;
  using KPipe = StageBarriers<Layout, kStages, kPair, kKeyScales>;  // its stages carry the key scales
  static_assert(!kKeyScales || (!kPair && !kRopeBesideFp8),
                "per-token K scales: single CTAs (pairs not built yet), no rope part beside fp8");
  static constexpr u32 kQBytes = BM * (DN * sizeof(Element) + DR * sizeof(RopeElement));
  static constexpr u32 kKBytes = BN * (DN * sizeof(Element) + DR * sizeof(RopeElement));
  static constexpr u32 kVBytes = BN * DV * sizeof(Element);
  static constexpr u32 kPingBarrier = 1;                // named barriers 1..kCwg
  static constexpr u32 kStoreBarrier = kCwg + 1;        // kCwg + 1 + wg: one warpgroup
  static constexpr bool kTmaStoreO = T::kTmaStoreO;
  // Release Q right after the last Q K^T rather than after the last P V. Not above head dim
  // 128, where O fills the consumers' registers: the extra live state spills (d256 causal BN
  // 80: 32 B, non-causal with LSE: 20 B), and where it does not (causal BN 64) it measured no
  // faster (H200, d256 causal 512-2k: 0.98-1.00x).
  static constexpr bool kReleaseQEarly = DV <= 128;

  static_assert(T::kThreads == 128 * (kCwg + 1), "one producer warpgroup plus the consumers");
  static_assert(BM == 64 * kCwg, "each consumer warpgroup owns 64 rows");
  static_assert(BN % 16 == 0 && BN <= 256 && DV <= 256, "wgmma N limits");
  static_assert(!(kPair && T::kDynamic), "pair_cta clusters take tiles from a static schedule");

  __device__ __forceinline__ static TileRange own_range(const AttentionParams& p, const WorkTile& w) {
    TileRange r;
    r.seq = SeqInfo::make<T::kVarlen>(p, w.batch);
    r.m0 = w.m_block * BM;
    r.skip = r.m0 >= r.seq.seqlen_q;
    const AttentionMask<T::kMask> mask{r.seq.seqlen_q, r.seq.seqlen_k, p.window_left, p.window_right};
    r.n_max = mask.n_block_max(r.m0, BM, BN);
    r.n_min = mask.n_block_min(r.m0, BN);
    r.n_unmasked_max = mask.n_unmasked_max(r.m0, BN);
    r.n_unmasked_min = mask.n_unmasked_min(r.m0, BM, BN);
    r.kv_max = r.n_max;
    r.kv_min = r.n_min;
    return r;
  }

  __device__ __forceinline__ static TileRange range(const AttentionParams& p, const WorkTile& w) {
    TileRange r = own_range(p, w);
    if constexpr (kPair) {
      WorkTile partner = w;
      partner.m_block ^= 1;
      const TileRange o = own_range(p, partner);
      const bool mine = !r.skip && r.n_max > r.n_min, theirs = !o.skip && o.n_max > o.n_min;
      r.kv_max = mine && theirs ? cmax(r.n_max, o.n_max) : mine ? r.n_max : theirs ? o.n_max : 0;
      r.kv_min = mine && theirs ? cmin(r.n_min, o.n_min) : mine ? r.n_min : theirs ? o.n_min : 0;
    }
    return r;
  }

  // The Q buffer of the n-th loaded tile, and the parity of that buffer's fill.
  __device__ __forceinline__ static int q_stage(u32 tiles) { return T::kQStages == 1 ? 0 : tiles & 1; }
  __device__ __forceinline__ static u32 q_phase(u32 tiles) { return (tiles / T::kQStages) & 1; }

  __device__ __forceinline__ static Scheduler scheduler(const Layout& smem) {
    if constexpr (Scheduler::kDynamic) return Scheduler{{}, smem, {}};
    else return Scheduler{};
  }

  // ---- producer ---------------------------------------------------------------------------

  // Loads one tile's Q and K/V; false for a tile without rows (a ragged entry's end), which loads
  // no Q. With pair_cta both CTAs arm every stage for the whole tile, and rank 0 multicasts K,
  // rank 1 V.
  __device__ __forceinline__ static bool produce_tile(const AttentionParams& p, const Layout& smem, const WorkTile& w,
                                      State& kv, u32 tiles, const KPipe& kpipe, const Pipe& vpipe) {
    const TileRange r = range(p, w);
    if (!kPair && r.skip) return false;
    const int batch = T::kVarlen ? 0 : w.batch;
    const int kv_head = w.head / T::kGroup;

    const bool leader = (threadIdx.x & 31) == 0;
    if (!r.skip) {
      const int qs = q_stage(tiles);
      mbar_wait(smem.barrier(Layout::kQEmpty + qs), q_phase(tiles) ^ 1);
      if (leader) {
        mbar_arrive_expect_tx(smem.barrier(Layout::kQFull + qs), kQBytes);
        tma_load_5d(smem.q(qs), &p.tma_q, smem.barrier(Layout::kQFull + qs), 0, r.seq.q_start + r.m0, 0,
                    w.head, batch, policy_evict_first());
        if constexpr (kRopePanels > 0)
          tma_load_5d(smem.q(qs) + kRopeFirstPanel * BM * 128, &p.tma_q_rope, smem.barrier(Layout::kQFull + qs), 0,
                      r.seq.q_start + r.m0, 0, w.head, batch, policy_evict_first());
      }
    }
    const u64 evict_last = policy_evict_last();
    const bool rank0 = cluster_m_rank<kClusterM>() == 0;
    const bool loads_k = leader && rank0;
    const bool loads_v = leader && (!kPair || !rank0);
    for (int n = r.kv_max - 1; n >= r.kv_min; --n) {
      const int row = r.seq.k_start + n * BN;
      if constexpr (kKeyScales) {
        // The stage's per-token K scales, by the warp's lanes, before they arm the stage (each
        // lane's arrival releases its own stores to the consumers, beside the TMA bytes).
        mbar_wait(kpipe.empty(kv.index), kv.phase ^ 1);
        write_key_scales(p, smem, kv.index, r, w, kv_head, n);
        kpipe.producer_arm(kv, kKBytes, leader);
      } else {
        kpipe.producer_acquire(kv, kKBytes, leader);
      }
      if (loads_k) {
        load_kv(smem.k(kv.index), &p.tma_k, kpipe.full(kv.index), row, kv_head, batch, evict_last);
        if constexpr (kRopePanels > 0)
          load_kv(smem.k(kv.index) + kRopeFirstPanel * BN * 128, &p.tma_k_rope, kpipe.full(kv.index), row, kv_head, batch,
                  evict_last);
      }
      vpipe.producer_acquire(kv, kVBytes, leader);
      if (loads_v) load_kv(smem.v(kv.index), &p.tma_v, vpipe.full(kv.index), row, kv_head, batch, evict_last);
      kv.advance();
    }
    return !r.skip;
  }

  // Per-token K scales of key tile n into stage `stage`'s slot (0 past the sequence's keys): by
  // position, or laid out like the (contiguous) cache's rows.
  __device__ __forceinline__ static void write_key_scales(const AttentionParams& p, const Layout& smem, int stage,
                                                          const TileRange& r, const WorkTile& w, int kv_head, int n) {
    const auto row = Scales<T>::make(p).key_row(w.batch, kv_head, r.seq.k_start + n * BN);
    const int keys = r.seq.seqlen_k - n * BN;  // this tile's keys inside the sequence
#pragma unroll 1
    for (int j = threadIdx.x & 31; j < BN; j += 32) {
      const float s = j < keys ? row[j] : 0.f;
      asm volatile("st.shared.f32 [%0], %1;" ::"r"(smem.key_scales(stage) + 4 * j), "f"(s) : "memory");
    }
  }

  __device__ __forceinline__ static void load_kv(u32 dst, const TmaDescriptor* desc, u32 bar, int row, int kv_head,
                                                 int batch, u64 policy) {
    if constexpr (kPair) tma_load_5d_multicast(dst, desc, bar, 0b11, 0, row, 0, kv_head, batch, policy);
    else tma_load_5d(dst, desc, bar, 0, row, 0, kv_head, batch, policy);
  }

  __device__ static void produce(const AttentionParams& p, const Layout& smem) {
    tma_prefetch_descriptor(&p.tma_q);
    tma_prefetch_descriptor(&p.tma_k);
    if constexpr (kRopePanels > 0) {
      tma_prefetch_descriptor(&p.tma_q_rope);
      tma_prefetch_descriptor(&p.tma_k_rope);
    }
    tma_prefetch_descriptor(&p.tma_v);
    if constexpr (kTmaStoreO) tma_prefetch_descriptor(&p.tma_o);
    const KPipe kpipe{smem, Layout::kKFull, Layout::kKEmpty};
    const Pipe vpipe{smem, Layout::kVFull, Layout::kVEmpty};
    Scheduler sched = scheduler(smem);
    State kv;
    u32 tiles = 0;
    for (SchedulerState st = sched.initial(p); sched.valid(p, st);) {
      if constexpr (Scheduler::kDynamic) {
        const int ticket = sched.draw(p);
        tiles += produce_tile(p, smem, sched.work(p, st), kv, tiles, kpipe, vpipe);
        st = sched.publish(ticket);
      } else {
        tiles += produce_tile(p, smem, sched.work(p, st), kv, tiles, kpipe, vpipe);
        st = sched.advance(p, st);
      }
    }
    // The transposers wait on V fills and cannot see the schedule: one last, empty fill of the
    // next stage, with that stage's closing flag set before it, tells them to stop. The flag is
    // written once, after the stage's previous fill was freed (every earlier read of it is
    // ordered before), and read after the fill completes.
    if constexpr (kTransposeV) {
      mbar_wait(vpipe.empty(kv.index), kv.phase ^ 1);
      if ((threadIdx.x & 31) == 0) {
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(smem.v_closing_flag(kv.index)), "r"(1u) : "memory");
        mbar_arrive(vpipe.full(kv.index));
      }
    }
    if constexpr (kPair) {
      kpipe.producer_tail(kv);
      vpipe.producer_tail(kv);
    }
  }

  // ---- V transposers (fp8) ---------------------------------------------------------------

  // Warps 1-3 of the producer warpgroup: each V fill becomes a Vt stage. A warp frees the V stage
  // and fills its share of Vt with one arrival each (both barriers count the three warps). With
  // pair_cta the V stages are the cluster's (rank 1 multicasts them): a warp frees the stage in
  // both CTAs, and each V empty barrier counts the transposers of both.
  __device__ static void transpose_v(const Layout& smem) {
    const int t = threadIdx.x - 32;
    State st;
#pragma unroll 1
    for (;;) {
      mbar_wait(smem.barrier(Layout::kVFull + st.index), st.phase);
      // Read by lane 0, the lane that frees the stage below.
      if (warp_read_shared(smem.v_closing_flag(st.index)) != 0) break;  // the producer's closing fill
      mbar_wait(smem.barrier(Layout::kVtEmpty + st.index), st.phase ^ 1);
      if (st.index == 0 && st.phase == 0)  // once, before the first stage's fence and arrival
        Transpose::fill_sum_rows(smem.vt(0), Layout::kRegions.vt_stage_bytes, kStages, t,
                                 pack4<Element>(1.f, 1.f, 1.f, 1.f));
      Transpose::stage(smem.v(st.index), smem.vt(st.index), t);
      fence_proxy_async_shared();  // Vt is read by wgmma, through the async proxy
      __syncwarp();
      if ((threadIdx.x & 31) == 0) {
        mbar_arrive(smem.barrier(Layout::kVtFull + st.index));
        mbar_arrive(smem.barrier(Layout::kVEmpty + st.index));
        if constexpr (kPair) mbar_arrive_cluster(smem.barrier(Layout::kVEmpty + st.index), cluster_m_rank<2>() ^ 1);
      }
      st.advance();
    }
  }

  // ---- consumers --------------------------------------------------------------------------

  // S = Q_wg K^T over the full qk depth; K-major operands: each step takes the next 32 bytes
  // of a panel row (fp8 nope panels, then 16-bit rope panels).
  __device__ __forceinline__ static void issue_qk(float (&s)[BN / 2], const Layout& smem, int wg, int q_stage,
                                                  int stage) {
    const u32 q = smem.q(q_stage), k = smem.k(stage);
    if constexpr (kRopeBesideFp8) {
      qk_steps<Element, DN / Traits::kMmaK, kNopePanelBytes, 0>(s, q + wg * (64 * kNopePanelBytes), k, false);
      qk_steps<RopeElement, DR / RopeTraits::kMmaK, 128, kRopeFirstPanel>(s, q + wg * (64 * 128), k, true);
    } else {
      qk_steps<Element, DQK / Traits::kMmaK, kNopePanelBytes, 0>(s, q + wg * (64 * kNopePanelBytes), k, false);
    }
  }
  // kSteps k-steps of E over panels of kPanel bytes from panel kFirstPanel on (Q's BM rows, K's
  // BN rows to a panel; q: this warpgroup's first row in panel 0): wgmma's K is 32 bytes,
  // kPanel / 32 steps to a panel.
  template <class E, int kSteps, int kPanel, int kFirstPanel>
  __device__ __forceinline__ static void qk_steps(float (&s)[BN / 2], u32 q, u32 k, bool accumulate) {
    constexpr int kPerPanel = kPanel / 32;
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      const u32 panel = kFirstPanel + kk / kPerPanel, step = (kk % kPerPanel) * 32;
      Wgmma<E, BN>::ss(s, k_major_desc<kPanel>(q + panel * (BM * kPanel) + step),
                       k_major_desc<kPanel>(k + panel * (BN * kPanel) + step), accumulate || kk > 0 ? 1 : 0);
    }
  }

  // Beside fp8 nope columns: this warpgroup's 64 rows of Q's rope columns (bf16) divided by the
  // row's Q and K scales, so that S = (nope + rope / scales) x scales; q_scale(row) gives the
  // row's Q scale (row: within the tile). Generic stores, fenced for wgmma's reads through the
  // async proxy; the scales are positive (dequantisation factors).
  template <class QScale>
  __device__ __forceinline__ static void unscale_q_rope(const Layout& smem, int wg, int q_stage, float k_scale,
                                                        const QScale& q_scale) {
    static_assert(SameType<RopeElement, bf16_t>::value, "a bf16 rope part beside fp8");
    constexpr int kChunks = DR / 8;  // 16-byte chunks of a row's rope part
#pragma unroll 1
    for (int i = threadIdx.x & 127; i < 64 * kChunks; i += 128) {
      const int r = i / kChunks, c = i % kChunks;
      const float inv = 1.f / (q_scale(64 * wg + r) * k_scale);
      const u32 at = smem.q(q_stage) + (kRopeFirstPanel + c / 8) * (BM * 128) + (64 * wg + r) * 128 +
                     ((((c % 8) ^ r) & 7) << 4);
      u32 w[4];
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "r"(at));
#pragma unroll
      for (int j = 0; j < 4; ++j)
        w[j] = pack2<bf16_t>(__uint_as_float(w[j] << 16) * inv, __uint_as_float(w[j] & 0xffff0000u) * inv);
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(at), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                   : "memory");
    }
    fence_proxy_async_shared();
    named_barrier_sync(kStoreBarrier + wg, 128);
  }

  // O += P V. 16-bit: V is MN-major, kMmaK key rows (that many 128-byte rows of a panel) per
  // step, panels BN*128 apart. fp8: Vt is K-major like K, 32 keys (bytes) of a 128-key panel
  // row per step, panels vt_panel_bytes apart, a last one of 64-key rows where BN leaves 64.
  __device__ __forceinline__ static void issue_pv(float (&o)[kOCols / 2], const u32 (&pf)[kPSteps][4],
                                                  const Layout& smem, int stage) {
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) {
      if constexpr (kTransposeV) {
        const u32 vt = smem.vt(stage) + (kk / 4) * vt_panel_bytes(DV) + (kk % 4) * 32;
        if (vt_row_bytes(BN, kk / 4) == 64)  // the last panel's rows are 64 bytes
          Wgmma<Element, kOCols>::rs(o, pf[kk], k_major_desc<64>(vt), 1);
        else
          Wgmma<Element, kOCols>::rs(o, pf[kk], k_major_desc<128>(vt), 1);
      } else {
        const u32 v = smem.v(stage) + kk * (Traits::kMmaK * 128);
        Wgmma<Element, DV>::rs(o, pf[kk], make_desc(v, BN * 128, 1024), 1);
      }
    }
  }

  // The last P V's row sums (O's columns DV.., rows r0 and r0 + 8, each lane of a quad holding
  // them whole) into the quad's first lane's share of the running sums, before the next softmax
  // update rescales them, unless softmax summed that tile itself (`summed`: a masked tile, every
  // lane its share); cleared for the next tile either way.
  __device__ __forceinline__ static void take_tile_sums(float (&o)[kOCols / 2], Softmax& softmax, bool summed) {
    softmax.add_tile_sums(o[DV / 2], o[DV / 2 + 2], !summed && (threadIdx.x & 3) == 0 ? 1.f : 0.f);
#pragma unroll
    for (int i = DV / 2; i < kOCols / 2; ++i) o[i] = 0.f;
  }

  __device__ __forceinline__ static void ping_sync(int wg) {
    if constexpr (kCwg > 1) named_barrier_sync(kPingBarrier + wg, 256);
  }
  __device__ __forceinline__ static void ping_arrive(int wg) {
    if constexpr (kCwg > 1) named_barrier_arrive(kPingBarrier + (wg + 1) % kCwg, 256);
  }
  // One arrival per warp once its last Q K^T has read Q: the producer may load the next Q.
  __device__ __forceinline__ static void release_q(const Layout& smem, int q_stage) {
    if ((threadIdx.x & 31) == 0) mbar_arrive(smem.barrier(Layout::kQEmpty + q_stage));
  }

  // pair_cta: waits for `count` K/V stages this CTA has no rows for, and frees them in both CTAs.
  __device__ __forceinline__ static void skip_kv(const KPipe& kpipe, const PvPipe& vpipe, State& kv, int count) {
#pragma unroll 1
    for (int i = 0; i < count; ++i) {
      kpipe.consumer_wait(kv);
      kpipe.consumer_release(kv);
      vpipe.consumer_wait(kv);
      vpipe.consumer_release(kv);
      kv.advance();
    }
  }

  // Writes this warpgroup's 64 rows of O (already normalised).
  __device__ __forceinline__ static void store_o(const float (&o)[DV / 2], const AttentionParams& p,
                                                 const Layout& smem, const WorkTile& w, const TileRange& r,
                                                 int wg, bool& pending) {
    if constexpr (kTmaStoreO) {
      const bool issuer = (threadIdx.x & 127) == 0;
      // The previous tile's store left a tile ago; its read of the slab is long done.
      if (issuer && pending) bulk_wait_group_read();
      named_barrier_sync(kStoreBarrier + wg, 128);
      stage_o_smem<T>(o, smem.o_slab(wg));
      fence_proxy_async_shared();
      named_barrier_sync(kStoreBarrier + wg, 128);
      if (issuer) {
        tma_store_5d(&p.tma_o, smem.o_slab(wg), 0, r.seq.q_start + r.m0 + 64 * wg, 0, w.head, w.batch);
        bulk_commit_group();
        pending = true;
      }
    } else {
      store_o_global<T>(o, p, w.batch, w.head, r.seq, r.m0 + 64 * wg);
    }
  }

  __device__ static void consume(const AttentionParams& p, const Layout& smem, int wg) {
    const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31;
    const KPipe kpipe{smem, Layout::kKFull, Layout::kKEmpty};
    // fp8: P V reads the transposers' Vt stages.
    const PvPipe vpipe{smem, kTransposeV ? Layout::kVtFull : Layout::kVFull,
                       kTransposeV ? Layout::kVtEmpty : Layout::kVEmpty};
    const Scales<T> scales = Scales<T>::make(p);
    Scheduler sched = scheduler(smem);
    State kv;
    u32 tiles = 0;
    bool o_pending = false;  // this thread has an O store whose slab TMA may still be reading
    if (kCwg > 1 && wg == kCwg - 1) named_barrier_arrive(kPingBarrier, 256);  // consumer 0 goes first

    for (SchedulerState st = sched.initial(p); sched.valid(p, st); st = sched.advance(p, st)) {
      const WorkTile w = sched.work(p, st);
      const TileRange r = range(p, w);
      const bool has_kv = !r.skip && r.n_max > r.n_min;
      // pair_cta: the other CTA's tiles above this one's range (all of them without a range).
      if constexpr (kPair) skip_kv(kpipe, vpipe, kv, has_kv ? r.kv_max - r.n_max : r.kv_max - r.kv_min);
      if (r.skip) continue;
      const AttentionMask<T::kMask> mask{r.seq.seqlen_q, r.seq.seqlen_k, p.window_left, p.window_right};
      const int warp_row0 = r.m0 + 64 * wg + 16 * warp;  // this warp's first row in the sequence
      const int kv_head = w.head / T::kGroup;
      // Each row's softmax scale with the Q and K dequantisation scales folded in. The scales are
      // loaded here and multiplied only once the tile's first S is ready, so a per-token Q
      // scale's global load (a new address every tile) runs beside the Q and K waits and the
      // first Q K^T instead of stalling the consumer before them.
      float row_scale[2];
      const float k_scale = kKeyScales ? 1.f : scales.k.at(w.batch, kv_head, 0, 0);  // per token: per column
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp_row0 + (lane >> 2) + 8 * h;
        row_scale[h] = T::kQScale != ScaleKind::kPerToken || row < r.seq.seqlen_q
                           ? scales.q.at(w.batch, w.head, r.seq.q_start, row) : 1.f;
      }
      const auto fold_scales = [&] {
#pragma unroll
        for (int h = 0; h < 2; ++h) row_scale[h] *= p.softmax_scale_log2 * k_scale;
      };

      float o[kOCols / 2];
#pragma unroll
      for (int i = 0; i < kOCols / 2; ++i) o[i] = 0.f;
      Softmax softmax;
      softmax.init();
      const int qs = q_stage(tiles);
      mbar_wait(smem.barrier(Layout::kQFull + qs), q_phase(tiles));
      if constexpr (kRopeBesideFp8)
        unscale_q_rope(smem, wg, qs, k_scale, [&](int row) {
          const int at = r.m0 + row;
          return T::kQScale != ScaleKind::kPerToken || at < r.seq.seqlen_q ? scales.q.at(w.batch, w.head, r.seq.q_start, at)
                                                                            : 1.f;
        });

      if (has_kv) {
        float s[BN / 2];
        u32 pf[kPSteps][4];
        float correction[2];
        int n = r.n_max - 1;
        kpipe.consumer_wait(kv);
        ping_sync(wg);
        wgmma_fence();
        issue_qk(s, smem, wg, qs, kv.index);
        wgmma_commit();
        ping_arrive(wg);
        wgmma_wait<0>();
        fence_operand(s);
        if constexpr (kKeyScales) scale_key_columns(s, smem.key_scales_generic(kv.index), lane & 3, 1.f);
        kpipe.consumer_release(kv);
        if (kReleaseQEarly && n == r.n_min) release_q(smem, qs);
        const bool masked = n >= r.n_unmasked_max || n < r.n_unmasked_min;
        if (masked) Softmax::apply_mask(s, mask, warp_row0, n * BN);
        fold_scales();
        softmax.update(s, row_scale, correction, masked);
        bool pv_summed = masked;  // the tile whose P the next P V takes
        Softmax::template pack_probabilities<Element>(s, pf);
#pragma unroll
        for (int kk = 0; kk < kPSteps; ++kk) fence_operand(pf[kk]);
        State v_read = kv;
        kv.advance();

        // One tile after the first. With kSumsInO it is inlined twice, masked and not, so that the
        // unmasked tiles' code has no branch on it (masked tiles sum themselves in update(); a
        // branch there cost the fp8 d128 kernel 13 %).
        const auto next_tile = [&](int tile, bool masked) __attribute__((always_inline)) {
          // Both waits before the fence: a wait loop between the fence and a wgmma makes ptxas
          // insert another warpgroup.arrive (C7519/C7520) and serialise the two GEMMs.
          kpipe.consumer_wait(kv);
          vpipe.consumer_wait(v_read);
          ping_sync(wg);
          wgmma_fence();
          issue_qk(s, smem, wg, qs, kv.index);
          wgmma_commit();
          issue_pv(o, pf, smem, v_read.index);
          wgmma_commit();
          ping_arrive(wg);
          wgmma_wait<1>();  // Q K^T done, P V may still run
          fence_operand(s);
          if constexpr (kKeyScales) scale_key_columns(s, smem.key_scales_generic(kv.index), lane & 3, 1.f);
          kpipe.consumer_release(kv);
          // With kSumsInO, P V is waited for before the softmax: its sums join at the old max, and
          // Vt is freed a softmax earlier for the transposers' next stage. ptxas hoisted that wait
          // by itself only where a branch on the mask preceded the softmax; without it the d128
          // tiles ran 4-13 % slower. The fp8 d256 tiles (no sums) keep it after the softmax:
          // before it they ran 4-5 % slower without a mask.
          // Sass.Sm90ConsumersReleaseStagesBeforeTheSoftmax holds the order.
          const auto finish_pv = [&] {
            wgmma_wait<0>();
            fence_operand(o);
            if constexpr (kSumsInO) take_tile_sums(o, softmax, pv_summed);
            pv_summed = masked;
#pragma unroll
            for (int kk = 0; kk < kPSteps; ++kk) fence_operand(pf[kk]);
            vpipe.consumer_release(v_read);
          };
          if constexpr (kSumsInO) finish_pv();
          if (masked) Softmax::apply_mask(s, mask, warp_row0, tile * BN);
          softmax.update(s, row_scale, correction, masked);
          if constexpr (!kSumsInO) finish_pv();
          if (kReleaseQEarly && tile == r.n_min) release_q(smem, qs);
          if (!T::kLazyRescale || rows_moved(correction)) rescale_rows(o, correction);
          Softmax::template pack_probabilities<Element>(s, pf);
          // Pin the new O and P before the next wgmma fence; otherwise the compiler sinks the
          // conversions past it and ptxas has to inject a warpgroup.arrive (C7519).
          fence_operand(o);
#pragma unroll
          for (int kk = 0; kk < kPSteps; ++kk) fence_operand(pf[kk]);
          v_read = kv;
          kv.advance();
        };
        for (n = r.n_max - 2; n >= r.n_min; --n) {
          const bool masked = n >= r.n_unmasked_max || n < r.n_unmasked_min;
          if constexpr (kSumsInO) {
            if (masked)
              next_tile(n, true);
            else
              next_tile(n, false);
          } else {
            next_tile(n, masked);
          }
        }

        vpipe.consumer_wait(v_read);
        ping_sync(wg);
        wgmma_fence();
        issue_pv(o, pf, smem, v_read.index);
        wgmma_commit();
        ping_arrive(wg);
        wgmma_wait<0>();
        fence_operand(o);
        if constexpr (kSumsInO) take_tile_sums(o, softmax, pv_summed);
#pragma unroll
        for (int kk = 0; kk < kPSteps; ++kk) fence_operand(pf[kk]);
        vpipe.consumer_release(v_read);
        if constexpr (kPair) skip_kv(kpipe, vpipe, kv, r.n_min - r.kv_min);  // and below it
      }
      if (!kReleaseQEarly || !has_kv) release_q(smem, qs);

      softmax.finalize();
      const float v_scale = scales.v.at(w.batch, kv_head, 0, 0);
      const float inv[2] = {softmax.inv_sum(0) * v_scale, softmax.inv_sum(1) * v_scale};
      rescale_rows(o, inv);
      store_o(reinterpret_cast<const float(&)[DV / 2]>(o), p, smem, w, r, wg, o_pending);
      if (T::kWriteLse && p.lse != nullptr && (lane & 3) == 0) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = warp_row0 + (lane >> 2) + 8 * h;
          if (row < r.seq.seqlen_q)
            p.lse[lse_offset<T::kVarlen>(p, w.batch, w.head, r.seq.q_start, row)] = softmax.lse(h);
        }
      }
      ++tiles;
    }
    if (kTmaStoreO && o_pending) bulk_wait_group();  // the slab must outlive the store
  }

  __device__ static void run(const AttentionParams& p) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const Layout smem{smem_addr(smem_raw)};
    const int warpgroup = threadIdx.x / 128;
    if (threadIdx.x == 0) {
      if (smem.base % 1024 != 0) __trap();  // 128B-swizzled tiles need 1 KB aligned bases
      for (int s = 0; s < T::kQStages; ++s) {
        mbar_init(smem.barrier(Layout::kQFull + s), 1);
        mbar_init(smem.barrier(Layout::kQEmpty + s), 4 * kCwg);
      }
      // fp8: the transposer warps free V and fill Vt; the consumers free Vt.
      constexpr u32 kVReaders = (kTransposeV ? kVTransposerWarps : 4 * kCwg) * kClusterM;
      for (int s = 0; s < kStages; ++s) {
        mbar_init(smem.barrier(Layout::kKFull + s), KPipe::kFullArrivals);
        mbar_init(smem.barrier(Layout::kKEmpty + s), 4 * kCwg * kClusterM * KPipe::kEmptyArrivalsPerWarp);
        mbar_init(smem.barrier(Layout::kVFull + s), 1);
        mbar_init(smem.barrier(Layout::kVEmpty + s), kVReaders);
        if constexpr (kTransposeV) {
          mbar_init(smem.barrier(Layout::kVtFull + s), kVTransposerWarps);
          mbar_init(smem.barrier(Layout::kVtEmpty + s), 4 * kCwg);
        }
      }
      if constexpr (kTransposeV)
        for (int s = 0; s < kStages; ++s)
          asm volatile("st.shared.u32 [%0], %1;" ::"r"(smem.v_closing_flag(s)), "r"(0u) : "memory");
      for (int s = 0; s < 2; ++s) {
        mbar_init(smem.barrier(Layout::kTileFull + s), 1);
        mbar_init(smem.barrier(Layout::kTileEmpty + s), 4 * kCwg);
      }
      fence_barrier_init();
    }
    // With pair_cta the other CTA's barriers must be initialised before anything reaches them.
    if constexpr (kPair) cluster_sync();
    else __syncthreads();

    if (warpgroup == 0) {
      regs_decrease<T::kProducerRegs>();
      if (threadIdx.x < 32) produce(p, smem);
      else if constexpr (kTransposeV) transpose_v(smem);
    } else {
      regs_increase<T::kConsumerRegs>();
      consume(p, smem, warpgroup - 1);
    }
  }
};

template <class T>
__device__ __forceinline__ void attention_fwd(const AttentionParams& p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  ForwardKernel<T>::run(p);
#else
  // nvcc -arch=sm_90a also compiles a plain compute_90 pass, which has no wgmma or setmaxnreg.
  __trap();
#endif
}

}  // namespace flashjit::sm90
