// The decode family's split pass for a shared K/V (latent) cache on sm_90a with TMA loads
// (tuning.kv_loads "tma"): two wgmma warpgroups take alternate key tiles of a 64-row tile of
// packed query rows (MLA's query heads times a step's tokens), as FlashMLA's "seesaw" does, and a
// third warpgroup's first warp loads the tiles (the warpgroup hands its registers to the other
// two: setmaxnreg).
//
// Why: with both warpgroups on every tile (latent_wgmma.cuh) each computes half of every Q K^T
// and both then run the same softmax on the sum, and the ring's barrier holds them in step, so the
// tensor cores wait while both run their softmax. Here warpgroup w computes the whole S = Q K^T of
// tiles i = w, w + 2, ... and their softmax alone; O's columns stay split (w owns
// [w * dv / 2, (w + 1) * dv / 2), 64 x 256 fp32 for MLA), so each warpgroup multiplies its own P by
// its V columns of its tile and the other's P, read from shared memory in register order, by its
// V columns of the other's tile. One warpgroup's softmax runs while the other's GEMMs do.
//
// A row's running max passes from tile to tile: tile i's owner starts from tile i - 1's max (the
// other warpgroup's, published with its P), so both keep the same statistics. O and each
// warpgroup's share of the row sums follow the max through every tile's rescale factor (1 unless
// the max moved by more than 2^8: FA4's lazy rescale, probabilities stay at most 256).
//
// Per tile i of warpgroup w, with s = i % stages:
//   1. wait for the tile (full[s]); if it runs past the cache end, clear its V rows there; issue
//      S = Q K^T (every 16-column k-step of Q and K, both in 128-byte-swizzled panels). An fp8
//      cache's tile has a barrier per 64-column panel (full[s][panel], its loader warps
//      dequantise panels apart), and each panel's four k-steps wait for their own.
//   2. (i > 0) wait for tile i - 1's P, max and factor (ready[1 - w]), load them, free the slot;
//      rescale O by tile i - 1's factor and issue O += P(i - 1) V(i - 1).
//   3. wait for S; mask, max, probabilities, row sums, while P(i - 1) V(i - 1) runs; publish P,
//      max and factor (ready[w]) once the other warpgroup has read the previous ones (free[w]).
//   4. wait for P(i - 1) V(i - 1) (stage i - 1 is then free of this warpgroup: empty), rescale O
//      by this tile's factor, issue O += P(i) V(i) and wait for it (stage i free of it too).
// After its last tile a warpgroup adds the sequence's last tile if the other one owns it.
// The loader waits for both warpgroups to free a stage (empty[s]: 256 arrivals) before it
// refills it: a warpgroup frees its own tile after its P V, and the other's after its P V of
// it, while it works on its next tile. Three stages at least: tiles i and i + 1 are both in use
// while the next is loaded.
//
// An fp8 cache (e4m3 or e5m2 nope columns, a 16-bit rope part) runs the same warpgroups on fp16
// stages: a tile's nope columns land by TMA in its own stage, each 128-column fp8 panel in the
// second of the two 64-column fp16 panels it becomes, and the loader warpgroup's four warps
// dequantise them in place (each its 128-column panel, a lane each key row, which it reads whole
// before writing the second panel over it: the value times its key's scale, per token, per
// block of columns, per head or per tensor, rounded to fp16), arriving on the panels' full
// barriers as TMA would; the rope panels land in the stage by TMA. So an fp8 cache keeps as
// many stages as a 16-bit one. Q's nope columns are dequantised into fp16 as they are loaded. Both GEMMs then
// read 16-bit tiles as for a 16-bit cache (the rope part's Q K^T steps in its own type), and no
// scale is left for S or O (FlashMLA's fp8 decode dequantises its tiles in shared memory the same
// way, into bf16: fp16 keeps 3 more bits of each product, which the logits and the LSE need, at
// the cost of a range of +-65504 for the dequantised values). Rows past the cache end are
// written as zeros there.
#pragma once

#include "common/params.cuh"
#include "common/types.cuh"
#include "decode/latent_ring.cuh"
#include "sm80/cp_async.cuh"
#include "sm80/smem_tile.cuh"
#include "sm90/ptx.cuh"
#include "sm90/softmax.cuh"
#include "sm90/wgmma.cuh"

namespace flashjit::decode {

// The element type the GEMMs read for the nope and V columns: an fp8 cache's dequantised to fp16.
template <class E, bool kFp8> struct SeesawMath { using type = E; };
template <class E> struct SeesawMath<E, true> { using type = fp16_t; };

template <class T>
struct LatentSeesaw : LatentRing<LatentSeesaw<T>, T> {
  using Base = LatentRing<LatentSeesaw<T>, T>;
  using Base::m0, Base::rows, Base::tid, Base::warp, Base::lane, Base::n_begin, Base::n_end,
      Base::n_unmasked_lo, Base::n_unmasked_hi, Base::p, Base::smem, Base::smem_base, Base::token_of, Base::head_of,
      Base::bad_page_flag, Base::kBM, Base::kBN, Base::kWarps, Base::kDQK, Base::kDV, Base::kDN, Base::kDR,
      Base::kStages, Base::kR, Base::kBoxRows, Base::kBoxes, Base::hk, Base::kv, Base::kFp8, Base::b, Base::seq,
      Base::scales;
  using typename Base::E;
  using ME = typename SeesawMath<E, kFp8>::type;  // the nope columns', V's and P's type in the GEMMs
  using RE = typename T::RopeElement;
  using KTile = typename Base::KTile;
  static constexpr int kVCols = kDV / 2;  // O columns of each warpgroup
  static constexpr int kSRegs = kBN / 2, kORegs = kVCols / 2, kPSteps = kBN / 16, kPWords = 4 * kPSteps;
  static constexpr int kQkSteps = kDQK / 16;
  static constexpr int kConsumers = 256;                  // two warpgroups
  static constexpr int kLoaderWarp = 8;                  // the first warp of warpgroup 2
  // An fp8 cache's loader warpgroup dequantises as well: eight registers more for it (its values
  // from before the split then fit it without spilling), eight fewer for the consumers.
  static constexpr int kLoaderRegs = kFp8 ? 48 : 40, kConsumerRegs = kFp8 ? 224 : 232;
  // Named barriers (0 is __syncthreads): each warpgroup's own (1, 2), both warpgroups' (3).
  static constexpr u32 kWarpgroupBarrier = 1, kConsumersBarrier = 3;
  static constexpr int kKPanels = (kDR > 0 ? kDN : kDQK) / 64;  // panels of p.k's rows
  static constexpr int kRopePanels = kDR / 64;                  // panels of p.k_rope's rows
  static constexpr int kPanels = kKPanels + kRopePanels;        // a tile's 64-column panels
  static constexpr u32 kPanelBytes = u32(kBN) * 128;
  // A 16-bit tile lands on one barrier, as one box of all its nope panels (and one of its rope
  // panels) where it lies inside a page: a box and a barrier per panel, to start Q K^T on the
  // first panels, measured slower (H100, 128 heads, batch 64 x 16k: 513 against 551 TFLOP/s).
  // An fp8 cache's panels are dequantised by different loader warps: a barrier each.
  static constexpr int kFullBarriers = kFp8 ? kPanels : 1;
  // A 16-bit tile's boxes per lane: one of all its nope panels and one of its rope panels where
  // the tile lies inside a page (the host encodes such boxes), else one per panel.
  static constexpr int kNopeBoxes = kBoxRows == kBN ? 1 : kKPanels;
  static constexpr int kRopeBoxes = kBoxRows == kBN ? (kRopePanels > 0 ? 1 : 0) : kRopePanels;
  // An fp8 cache's 128-column panels of nope columns, one per loader warp.
  static constexpr int kStagedPanels = kFp8 ? kDN / 128 : 0;
  static constexpr float kRescaleLog2 = 8.f;  // a row's max moves when exceeded by more than this
  using Softmax = sm90::OnlineSoftmax<kBN>;   // its layout helpers; the statistics are kept here

  static_assert(T::kTmaKv, "the seesaw pass loads its tiles by TMA");
  static_assert(!kFp8 || (kDN % 128 == 0 && kStagedPanels <= 4 && kBN <= 32),
                "fp8 nope columns: whole 128-column panels, one per loader warp, a key row per lane");
  static_assert(kBM == 64 && kWarps == 12, "two warpgroups share a 64-row tile, and a third loads");
  static_assert(kLoaderRegs * 128 + kConsumerRegs * kConsumers <= 65536, "the register file");
  static_assert(kStages >= 3, "tiles i and i + 1 are both in use while the next one loads");
  static_assert(kDQK % 64 == 0 && kDR % 64 == 0, "whole 128-byte panels of the nope and rope parts");
  static_assert(kVCols % 64 == 0 && kVCols <= 256 && kDV <= kDN,
                "each warpgroup's V columns are whole panels of the nope part, one wgmma wide");
  static_assert(kBN % 16 == 0 && kBN <= 64, "16-key steps");
  static_assert(kPanels <= 32 && kQkSteps == 4 * kPanels, "one loader lane arms each panel's barrier; four k-steps a panel");
  static_assert(kR.q_offset % 1024 == 0 && kR.kv_offset % 1024 == 0 && kR.kv_stage_bytes % 1024 == 0 &&
                    (kBN * 128) % 1024 == 0 && (kBoxRows * 128) % 1024 == 0,
                "128-byte-swizzled panels and boxes start on 1 KB");
  static_assert(kR.p_slot_bytes == kPWords * 128 * 4, "P slots hold a warpgroup's P in register order");

  float o[kORegs];
  float s_acc[kSRegs];  // the current tile's scores
  float max_scaled[2];  // each row's running max times scale_log2 (-inf: no key yet)
  float row_sum[2];     // this thread's share of each row's sum over this warpgroup's tiles
  int wg, wt;           // warpgroup, thread within it

  __device__ __forceinline__ explicit LatentSeesaw(const AttentionParams& params) : Base(params) {}

  // ---- shared state --------------------------------------------------------------------------
  __device__ __forceinline__ u32 barrier(int i) const { return smem_base + kR.barrier_offset + 8 * i; }
  __device__ __forceinline__ u32 full(int s, int panel) const {
    return barrier(s * kPanels + (kFullBarriers > 1 ? panel : 0));
  }
  __device__ __forceinline__ u32 empty(int s) const { return barrier(kStages * kPanels + s); }
  __device__ __forceinline__ u32 ready(int w) const { return barrier(kStages * (kPanels + 1) + w); }
  __device__ __forceinline__ u32 freed(int w) const { return barrier(kStages * (kPanels + 1) + 2 + w); }
  __device__ __forceinline__ u32 sums_ready() const { return barrier(kStages * (kPanels + 1) + 4); }
  // An fp8 cache's stage s: its fp8 nope columns have landed.
  __device__ __forceinline__ u32 staged(int s) const { return barrier(kStages * (kPanels + 1) + 5 + s); }
  enum Stat { kMax = 0, kFactor = 1, kSum = 2 };
  __device__ __forceinline__ float* stat(Stat kind, int slot) const {
    return reinterpret_cast<float*>(smem + kR.stats_offset) + (2 * kind + slot) * kBM;
  }
  __device__ __forceinline__ u32* p_slot(int slot) const {
    return reinterpret_cast<u32*>(smem + kR.p_offset + slot * kR.p_slot_bytes);
  }
  __device__ __forceinline__ u32 stage_base(int s) const { return smem_base + kR.kv_offset + s * kR.kv_stage_bytes; }
  // Row h (0: g, 1: g + 8) of this thread within the 64-row tile.
  __device__ __forceinline__ int tile_row(int h) const { return 16 * (warp % 4) + (lane >> 2) + 8 * h; }

  // The key tiles of this CTA's split (none where the split starts past the last tile).
  __device__ __forceinline__ int tile_count() const { return n_end > n_begin ? n_end - n_begin : 0; }

  // ---- the loader warp -----------------------------------------------------------------------
  // A 16-bit cache's tile i into stage i % stages once both warpgroups have freed it, all on
  // full(s): where the tile lies in one page or the cache is contiguous, one box of its nope
  // panels (p.k) and one of its rope panels (p.k_rope); else per 64-column panel one box per page
  // of the tile (lane l: page l).
  __device__ __forceinline__ void load_tiles() {
    const int count = tile_count();
    // Two m blocks of one KV head read the same keys: keep them in L2 for the other.
    const u64 policy = int(gridDim.y) > p.heads_k ? sm90::policy_evict_last() : sm90::policy_evict_first();
    int entry = count > 0 ? this->box_entry(n_begin) : -1;
#pragma unroll 1
    for (int i = 0; i < count; ++i) {
      const int n = n_begin + i, s = i % kStages;
      const int next = i + 1 < count ? this->box_entry(n + 1) : -1;  // a tile ahead
      if (i >= kStages) sm90::mbar_wait(empty(s), u32(i / kStages - 1) & 1u);
      if (lane == 0) sm90::mbar_arrive_expect_tx(full(s, 0), kPanels * kPanelBytes);
      __syncwarp();
      load_boxes<0, kNopeBoxes>(n, entry, stage_base(s), &p.tma_k, [&](int) { return full(s, 0); }, policy);
      load_boxes<kKPanels, kRopeBoxes>(n, entry, stage_base(s), &p.tma_k_rope, [&](int) { return full(s, 0); },
                                       policy);
      entry = next;
    }
  }

  // Lane l's box of tile n (page l's rows, or the whole tile where it lies in one page or the
  // cache is contiguous) of the panels [0, kCount) of tensor map `map`: panel c to the tile at
  // `dst` as its panel kAt + c (panels `stride` bytes apart), completing barrier bar(c).
  template <int kAt, int kCount, class Bar>
  __device__ __forceinline__ void load_boxes(int n, int entry, u32 dst, const void* map, const Bar& bar,
                                             u64 policy, u32 stride = kPanelBytes) const {
    if (lane >= kBoxes) return;
    int row, outer;
    this->box_place(n, entry, row, outer);
    dst += lane * kBoxRows * 128;
#pragma unroll
    for (int c = 0; c < kCount; ++c)
      sm90::tma_load_5d(dst + (kAt + c) * stride, map, bar(c), 0, row, c, hk, outer, policy);
  }

  // ---- an fp8 cache's loader warpgroup ---------------------------------------------------------
  // Tile i into stage i % stages (warp 8: lane l the boxes of page l): its fp8 nope panels, each
  // 128-column panel c in the stage's 64-column panel 2 c + 1, all on staged[]; its rope panels.
  __device__ __forceinline__ void stage_fp8_tile(int i, int entry, u64 policy) const {
    const int n = n_begin + i, s = i % kStages;
    if (lane == 0) sm90::mbar_arrive_expect_tx(staged(s), u32(kBN) * kDN);
    __syncwarp();
    load_boxes<0, kStagedPanels>(n, entry, stage_base(s) + kPanelBytes, &p.tma_k, [&](int) { return staged(s); },
                                 policy, 2 * kPanelBytes);
    load_rope(n, s, entry, policy);
  }

  // Tile n's rope panels straight into stage s (warp 8), each on its full barrier.
  __device__ __forceinline__ void load_rope(int n, int s, int entry, u64 policy) const {
    if (lane < kRopePanels) sm90::mbar_arrive_expect_tx(full(s, kKPanels + lane), kPanelBytes);
    __syncwarp();
    load_boxes<kKPanels, kRopePanels>(n, entry, stage_base(s), &p.tma_k_rope,
                                      [&](int c) { return full(s, kKPanels + c); }, policy);
  }

  // The K scale of loader lane `lane`'s key row of tile n in warp lw's panel (its block of
  // columns): 0 past the cache end, whose rows are then written as zeros.
  __device__ __forceinline__ float key_scale(int n, int lw) const {
    const int key = n * kBN + lane, block = lw * 128 / (kDN / Base::kKeyBlocks);
    return lane < kBN && key < kv.seqlen_k ? scales.key(kv, b, hk, seq.k_start, key, block) : 0.f;
  }

  // Loader warp lw's 128 fp8 columns [128 lw, 128 lw + 128) of key row `lane` of the tile in
  // stage s, which landed in the stage's 64-column panel 2 lw + 1, into the fp16 panels 2 lw and
  // 2 lw + 1: each value times the row's scale. The row's 128 fp8 bytes are the same 128 bytes as
  // its row of panel 2 lw + 1 (both 128-byte swizzled, so the eight rows of a quarter warp meet
  // no bank twice), and no lane touches another's row: fp8 chunks 0-3 become the first panel's
  // row, then fp8 chunk c (4-7) the second's fp16 chunks 2 c - 8 and 2 c - 7, where fp8 chunks
  // up to c lay, all read by then (the shared-memory accesses stay in program order: volatile).
  // Both 64-column panels are then full (32 arrivals each).
  // Where every row's scale is an fp16 normal (or 0), each value pair is widened exactly and
  // multiplied by the scale in fp16 (two instructions a pair; the scale rounded to fp16, 2^-11 at
  // most); otherwise in fp32, then rounded (about four times the instructions).
  __device__ __forceinline__ void dequantise(int s, int lw, float scale) const {
    const float magnitude = __int_as_float(__float_as_int(scale) & 0x7fffffff);
    const bool half_scale = __all_sync(0xffffffffu, lane >= kBN || scale == 0.f ||
                                                        (magnitude >= 0x1p-14f && magnitude <= 65504.f));
    if (lane < kBN) {
      if (half_scale) dequantise_row<true>(s, lw, scale);
      else dequantise_row<false>(s, lw, scale);
    }
    sm90::fence_proxy_async_shared();  // for wgmma's reads through the async proxy
    sm90::mbar_arrive(full(s, 2 * lw));
    sm90::mbar_arrive(full(s, 2 * lw + 1));
  }

  template <bool kHalfScale>
  __device__ __forceinline__ void dequantise_row(int s, int lw, float scale) const {
    constexpr float kWiden = SameType<E, e4m3_t>::value ? 256.f : 1.f;  // widen2's 2^-8 for e4m3
    // The row's 128 bytes start on 128 (panels on 1 KB), so its chunk c lies at (start | x) ^ c.
    const u32 x = u32(lane % 8) << 4;
    const u32 lo_panel = (stage_base(s) + 2 * lw * kPanelBytes + lane * 128) | x, hi_panel = lo_panel + kPanelBytes;
    const float factor = scale * kWiden;
    const u32 factor2 = pack2<fp16_t>(scale, scale);
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      u32 words[4];
      sm80::ld_shared_16(hi_panel ^ (u32(c) << 4), words[0], words[1], words[2], words[3]);
      if (scale == 0.f) words[0] = words[1] = words[2] = words[3] = 0u;  // past the end: zeros, whatever the bytes
      u32 w[8];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        if constexpr (kHalfScale) {
          widen4_f16<E>(words[q], w[2 * q], w[2 * q + 1]);
          w[2 * q] = mul_f16x2(w[2 * q], factor2);
          w[2 * q + 1] = mul_f16x2(w[2 * q + 1], factor2);
        } else {
          const u32 lo = widen2<E, 0x1404>(words[q]), hi = widen2<E, 0x3424>(words[q]);
          w[2 * q] = pack2<ME>(to_float(fp16_t{u16(lo)}) * factor, to_float(fp16_t{u16(lo >> 16)}) * factor);
          w[2 * q + 1] = pack2<ME>(to_float(fp16_t{u16(hi)}) * factor, to_float(fp16_t{u16(hi >> 16)}) * factor);
        }
      }
      // fp8 chunk c: fp16 chunks 2 (c % 4) and 2 (c % 4) + 1 of panel c / 4 of the two.
      const u32 dst = c < 4 ? lo_panel : hi_panel;
      sm80::st_shared_16(dst ^ (u32(2 * (c % 4)) << 4), w[0], w[1], w[2], w[3]);
      sm80::st_shared_16(dst ^ (u32(2 * (c % 4) + 1) << 4), w[4], w[5], w[6], w[7]);
    }
  }

  // The loader warpgroup of an fp8 cache: warp 8 loads each tile into its stage once both
  // warpgroups have freed it, a tile ahead of the dequantisation; every warp dequantises its
  // panel of each tile in place once it has landed.
  __device__ __forceinline__ void load_and_dequantise() {
    const int count = tile_count(), lw = warp - kLoaderWarp;
    const u64 policy = int(gridDim.y) > p.heads_k ? sm90::policy_evict_last() : sm90::policy_evict_first();
    if (lw == 0 && count > 0) stage_fp8_tile(0, this->box_entry(n_begin), policy);
#pragma unroll 1
    for (int i = 0; i < count; ++i) {
      const int n = n_begin + i, s = i % kStages;
      const float scale = lw < kStagedPanels ? key_scale(n, lw) : 0.f;  // in flight through the waits below
      if (lw == 0 && i + 1 < count) {
        const int next = i + 1, entry = this->box_entry(n + 1);
        if (next >= kStages) sm90::mbar_wait(empty(next % kStages), u32(next / kStages - 1) & 1u);
        stage_fp8_tile(next, entry, policy);
      }
      sm90::mbar_wait(staged(s), u32(i / kStages) & 1u);
      if (lw < kStagedPanels) dequantise(s, lw, scale);
    }
  }

  // ---- the warpgroups' math ------------------------------------------------------------------
  // S = Q K^T of the tile in stage s; with a barrier per panel, each panel's k-steps once the
  // panel has landed (phase: the stage's fill parity; `landed`: every panel is known to have).
  __device__ __forceinline__ void issue_qk(int s, u32 phase, bool landed) {
    using namespace sm90;
    const u32 q = smem_base + kR.q_offset, k = stage_base(s);
    wgmma_fence();
#pragma unroll
    for (int step = 0; step < kQkSteps; ++step) {
      if (kFullBarriers > 1 && step % 4 == 0) {
        if (!landed) mbar_wait(full(s, step / 4), phase);
        wgmma_fence();  // after the wait's branches, so that ptxas need not inject one
      }
      const u32 at = (step % 4) * 32;
      const u64 qd = make_desc(q + (step / 4) * (kBM * 128) + at, 16, 1024);
      const u64 kd = make_desc(k + (step / 4) * (kBN * 128) + at, 16, 1024);
      if (step / 4 < kKPanels) Wgmma<ME, kBN>::ss(s_acc, qd, kd, step > 0 ? 1 : 0);
      else Wgmma<RE, kBN>::ss(s_acc, qd, kd, 1);  // the rope part, in its own type
    }
    wgmma_commit();
  }

  // O += P V over this warpgroup's V columns of stage s (V MN-major: the tile's first dv columns).
  __device__ __forceinline__ void issue_pv(const u32 (&pf)[kPSteps][4], int s) {
    using namespace sm90;
    const u32 v = stage_base(s) + wg * (kVCols / 64) * (kBN * 128);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk)
      Wgmma<ME, kVCols>::rs(o, pf[kk], make_desc(v + kk * (16 * 128), kBN * 128, 1024), 1);
    wgmma_commit();
  }

  __device__ __forceinline__ void rescale(const float (&factor)[2]) {
    row_sum[0] *= factor[0];
    row_sum[1] *= factor[1];
    if (sm90::rows_moved(factor)) sm90::rescale_rows(o, factor);
  }

  // V rows of tile n from the cache end on are zeroed before any GEMM reads the tile (P is 0
  // there, but a page's bytes past the end need not be finite); by the tile's owner, whose
  // barrier below and whose ready[] arrival order them before both warpgroups' P V.
  __device__ __forceinline__ void clear_rows_past_end(int n, int s) const {
    const int first = kv.seqlen_k - n * kBN;
    if (first >= kBN) return;
    constexpr int kChunks = kDV / 8;
    for (int i = wt + first * kChunks; i < kBN * kChunks; i += 128)
      sm80::st_shared_16(stage_base(s) + KTile::offset(i / kChunks, i % kChunks), 0u, 0u, 0u, 0u);
    sm90::fence_proxy_async_shared();
    sm90::named_barrier_sync(kWarpgroupBarrier + wg, 128);
  }

  // The other warpgroup's tile j: its P, max and factor (published on ready[j % 2]); O and the row
  // sums follow the max through the factor and O += P(j) V(j) is issued. No GEMM of this
  // warpgroup that writes O is in flight here (its P V waits to finish at the end of its tile).
  // kFresh: O is still zero (this warpgroup has added no tile), so nothing needs rescaling.
  template <bool kFresh>
  __device__ __forceinline__ void add_other(int j) {
    const int slot = j % 2;
    sm90::mbar_wait(ready(slot), u32(j / 2) & 1u);
    u32 pf[kPSteps][4];
    const u32* src = p_slot(slot);
#pragma unroll
    for (int r = 0; r < kPWords; ++r) pf[r / 4][r % 4] = src[r * 128 + wt];
    float factor[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      factor[h] = stat(kFactor, slot)[tile_row(h)];
      max_scaled[h] = stat(kMax, slot)[tile_row(h)];
    }
    sm90::mbar_arrive(freed(slot));
    if constexpr (!kFresh) rescale(factor);
    issue_pv(pf, j % kStages);
  }

  // Warpgroup wg's tile i; kOther: a tile precedes it (the other warpgroup's, i - 1); kFresh: the
  // warpgroup's first tile (O is zero). The tile's P V finishes before the next tile, so no GEMM
  // is in flight from one tile to the next (ptxas serialises wgmma otherwise) and the stage is
  // freed of this warpgroup as early as it can be.
  template <bool kOther, bool kFresh>
  __device__ __forceinline__ void own_tile(int i) {
    using namespace sm90;
    const int n = n_begin + i, s = i % kStages;
    const u32 phase = u32(i / kStages) & 1u;
    const bool partial = (n + 1) * kBN > kv.seqlen_k;
    if constexpr (kFullBarriers == 1) {
      mbar_wait(full(s, 0), phase);
      if (partial) clear_rows_past_end(n, s);
      issue_qk(s, phase, true);
    } else {
      if (partial) {  // an fp8 cache's loader wrote the rows past the end as zeros
#pragma unroll 1
        for (int c = 0; c < kPanels; ++c) mbar_wait(full(s, c), phase);
      }
      issue_qk(s, phase, partial);
    }
    if constexpr (kOther) {
      add_other<kFresh>(i - 1);
      wgmma_wait<1>();  // S; P(i - 1) V(i - 1) runs through the softmax below
    } else {
      wgmma_wait<0>();
    }
    fence_operand(s_acc);
    if (n >= n_unmasked_hi || n < n_unmasked_lo)  // the ring's mask, on S in its accumulator order
      this->mask_scores(reinterpret_cast<float(&)[1][kBN / 8][4]>(s_acc), n * kBN);

    // Statistics: the running max moves where the tile's max exceeds it by more than 2^8.
    float factor[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = neg_inf();
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) m = fmaxf(m, fmaxf(s_acc[4 * j + 2 * h], s_acc[4 * j + 2 * h + 1]));
      m = quad_max(m) * p.softmax_scale_log2;
      factor[h] = 1.f;
      if (m > max_scaled[h] + kRescaleLog2) {  // false for a row that still sees no key
        factor[h] = max_scaled[h] == neg_inf() ? 0.f : exp2_approx(max_scaled[h] - m);
        max_scaled[h] = m;
      }
    }
    const float base0 = max_scaled[0] == neg_inf() ? 0.f : max_scaled[0];
    const float base1 = max_scaled[1] == neg_inf() ? 0.f : max_scaled[1];
    float tile_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int r = 0; r < kSRegs; ++r) {
      s_acc[r] = exp2_approx(fmaf(s_acc[r], p.softmax_scale_log2, (r & 2) ? -base1 : -base0));
      tile_sum[(r >> 1) & 1] += s_acc[r];
    }
    u32 pf[kPSteps][4];
    Softmax::template pack_probabilities<ME>(s_acc, pf);

    // Publish P, the max and the factor once the other warpgroup has read this slot's last ones.
    if (i >= 2) mbar_wait(freed(wg), u32((i - 2) / 2) & 1u);
    u32* dst = p_slot(wg);
#pragma unroll
    for (int r = 0; r < kPWords; ++r) dst[r * 128 + wt] = pf[r / 4][r % 4];
    if ((lane & 3) == 0)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        stat(kMax, wg)[tile_row(h)] = max_scaled[h];
        stat(kFactor, wg)[tile_row(h)] = factor[h];
      }
    mbar_arrive(ready(wg));

    if constexpr (kOther) {
      wgmma_wait<0>();  // P(i - 1) V(i - 1): its stage is free of this warpgroup
      fence_operand(o);
      mbar_arrive(empty((i - 1) % kStages));
    }
    rescale(factor);
    row_sum[0] += tile_sum[0];
    row_sum[1] += tile_sum[1];
    issue_pv(pf, s);
    wgmma_wait<0>();
    fence_operand(o);
    mbar_arrive(empty(s));
  }

  __device__ __forceinline__ void consume() {
    const int count = tile_count();
    if (count == 0) return;
    int i = wg;
    if (i < count) {
      if (wg == 0)
        own_tile<false, true>(0);
      else
        own_tile<true, true>(1);
#pragma unroll 1
      for (i += 2; i < count; i += 2) own_tile<true, false>(i);
    }
    // The sequence's last tile, when the other warpgroup owns it.
    if ((count - 1) % 2 != wg) {
      if (count == 1)
        add_other<true>(0);  // this warpgroup had no tile
      else
        add_other<false>(count - 1);
      sm90::wgmma_wait<0>();
      sm90::fence_operand(o);
    }
  }

  // Both warpgroups' O now follows the last tile's max; each row's sum is the two shares'. Each
  // warpgroup writes its own columns of its rows: O and the LSE (one split) or the split's
  // normalised O and LSE to the workspace.
  __device__ __forceinline__ void epilogue() {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_sum[h] = sm90::quad_sum(row_sum[h]);
      if ((lane & 3) == 0) stat(kSum, wg)[tile_row(h)] = row_sum[h];
    }
    sm90::mbar_arrive(sums_ready());  // both warpgroups' shares are written
    sm90::mbar_wait(sums_ready(), 0u);
    const bool bad = *bad_page_flag() != 0;
    const float nan = __int_as_float(0x7fc00000);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = row_sum[h] + stat(kSum, 1 - wg)[tile_row(h)];
      const int packed = m0 + tile_row(h);
      if (packed >= rows) continue;
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const float lse = bad ? nan : sum > 0.f ? (max_scaled[h] + __log2f(sum)) * kLn2 : neg_inf();
      this->template write_o_row<kVCols / 8>(o, h, packed, wg * kVCols + 2 * (lane & 3), inv, lse, bad,
                                             wg == 0 && (lane & 3) == 0);
    }
  }

  __device__ __forceinline__ void run() {
    if (!this->begin()) return;
    if (smem_base % 1024 != 0) __trap();  // 128B-swizzled tiles need 1 KB aligned bases
    wg = warp / 4;
    wt = tid % 128;
    if (tid == 0) {
      *bad_page_flag() = 0;
#pragma unroll 1
      for (int s = 0; s < kStages; ++s) {
        for (int c = 0; c < kFullBarriers; ++c) sm90::mbar_init(full(s, c), kFp8 && c < kKPanels ? 32 : 1);
        sm90::mbar_init(empty(s), kConsumers);
      }
      if constexpr (kFp8)
        for (int s = 0; s < kStages; ++s) sm90::mbar_init(staged(s), 1);
      for (int w = 0; w < 2; ++w) {
        sm90::mbar_init(ready(w), 128);
        sm90::mbar_init(freed(w), 128);
      }
      sm90::mbar_init(sums_ready(), kConsumers);
      sm90::fence_barrier_init();
    }
    __syncthreads();  // the barriers exist, the flag is clear
    if (wg == 2) {
      sm90::regs_decrease<kLoaderRegs>();
      if constexpr (kFp8) load_and_dequantise();
      else if (warp == kLoaderWarp) load_tiles();
      return;
    }
    sm90::regs_increase<kConsumerRegs>();
    // Q by the warpgroups' cp.async, fenced for wgmma's reads through the async proxy.
    this->template load_q_by<kConsumers>();
    sm80::cp_async_commit();
#pragma unroll
    for (int r = 0; r < kORegs; ++r) o[r] = 0.f;
    max_scaled[0] = max_scaled[1] = neg_inf();
    row_sum[0] = row_sum[1] = 0.f;
    sm80::cp_async_wait<0>();
    sm90::fence_proxy_async_shared();
    sm90::named_barrier_sync(kConsumersBarrier, kConsumers);
    consume();
    epilogue();
  }
};

template <class T>
__device__ void latent_seesaw(const AttentionParams& p) {
  LatentSeesaw<T> k(p);
  k.run();
}

}  // namespace flashjit::decode
