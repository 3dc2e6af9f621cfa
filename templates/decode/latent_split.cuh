// The decode family's split pass for a shared K/V cache (kv_layout.shared_kv): MLA's latent cache,
// one KV head whose rows are [nope | rope] and whose V is the first dv nope columns of the same
// rows. A key tile is loaded once into one shared-memory tile and feeds both GEMMs. mma.sync,
// every GPU from Ampere on; 16-bit caches.
//
// Rows, keys and the ring of key tiles are key_ring.cuh's, the loads latent_ring.cuh's. The O
// row of MLA is wide (dv 512: 256 fp32 per lane for a warp
// owning whole rows), so the kWarpsN warps of a 16-row block split O's columns instead of the
// keys: warp wn owns columns [wn * dv / kWarpsN, ...). For S = Q K^T each of them takes every
// kWarpsN-th 16-column k-step of the head dim (its Q fragments stay in registers for the whole
// launch), writes its partial scores to the exchange slot, and after one barrier adds all the
// parts in the same order, so the warps of a row block hold identical scores, maxima and sums
// and need no merge at the end. Each warp then multiplies P by its own V columns.
//
// fp8 caches (e4m3, e5m2 nope columns beside a 16-bit rope part): the nope columns stay fp8 in
// the tile and are widened to fp16 after ldmatrix (kv_operands.cuh); Q's nope columns are
// dequantised into fp16 in the order of the widened k slots. A warp's nope k-steps are whole
// 16-byte chunks (16 columns), two per ldmatrix, at the same places in every 128-column panel;
// its rope k-steps are 16-bit and accumulate onto the nope scores once those are scaled, since
// K's scale multiplies the nope scores only: S = nope x K's scale (per-token scales ride beside
// the row offsets) + rope. V is
// the same fp8 columns, so P is multiplied by the per-token scales before P V (or K's per-tensor
// scale goes into 1/sum); each warp's V columns are whole 128-column panels. Per-block scales
// (scales.k_block, FlashMLA's fp8 rows: one per 128 columns) scale each block's partial scores,
// and P by the block that holds the warp's V columns.
//
// tuning.swap_qk (sm_90a, 16 or 32 rows, four warps a 16-row block, 64-key tiles): warpgroup wg
// (warps 4 wg to 4 wg + 3) issues S^T = K Q^T for rows [16 wg, 16 wg + 16), the tile's 64 keys
// as the wgmma's rows and the 16 rows as its N, both operands K-major from the ring's 128-byte
// panels (an fp8 cache's Q as it is, k32 steps: no widening for Q K^T, and no partial sums), as
// soon as the tile is visible, so they run while the ring issues the next copies. An fp8 cache's
// rope steps have their own accumulator, since K's scale (per key) and Q's (per row) multiply the
// nope part only. Each warp then writes its 16 keys' scores into the exchange as S[row][key], and
// after the barrier reads its fragments of its row block (whose warps interleave with the other
// block's, so not its warpgroup's rows where BM is 32), as the warps of the unswapped pass hold
// them after adding their parts. The softmax, P V and the epilogue are the same.
#pragma once

#include "common/mask.cuh"
#include "common/params.cuh"
#include "common/types.cuh"
#include "decode/kv_operands.cuh"
#include "decode/latent_ring.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/smem_tile.cuh"
#include "sm80/softmax.cuh"
#include "sm80/warp_gemm.cuh"
#include "sm90/wgmma.cuh"

namespace flashjit::decode {

template <class T>
struct LatentSplit : LatentRing<LatentSplit<T>, T> {
  using Base = LatentRing<LatentSplit<T>, T>;
  using Base::b, Base::hk, Base::m0, Base::rows, Base::seq, Base::mask, Base::tid, Base::warp, Base::lane,
      Base::wm, Base::wn, Base::g, Base::t, Base::n_begin, Base::n_end, Base::n_unmasked_lo, Base::n_unmasked_hi,
      Base::p, Base::smem, Base::smem_base, Base::token_of, Base::head_of, Base::bad_page_flag, Base::row_slot,
      Base::kThreads, Base::kBM, Base::kBN, Base::kWarps, Base::kDQK, Base::kDV, Base::kDR, Base::kDN, Base::kR,
      Base::kFp8, Base::kKeyScales, Base::kKeyBlocks, Base::kNopeChunks, Base::kStages, Base::scales, Base::key_scale_slot;
  using typename Base::E, typename Base::QTile, typename Base::KTile;
  static constexpr int kGroup = T::kGroup;
  static constexpr int kWarpsM = kBM / 16;
  static constexpr int kWarpsN = kWarps / kWarpsM;     // warps sharing a 16-row block
  static constexpr int kKSteps = kDQK / 16 / kWarpsN;  // Q K^T k-steps of each warp
  static constexpr int kVCols = kDV / kWarpsN;         // O columns of each warp
  static constexpr int kNT = kBN / 8, kPSteps = kBN / 16, kDT = kVCols / 8;
  using VPart = sm80::SmemTile<kBN, kVCols>;  // one warp's V columns: whole panels of the KV tile
  using Softmax = sm80::OnlineSoftmax<1, kThreads, false>;
  // fp8: the widened operands of a warp's V columns, and the warp's k-steps: nope chunks in
  // ldmatrix pairs, then 16-bit rope steps.
  using Fp8Ops = KvOperands<E, QTile, kBN, kDQK, kVCols>;
  static constexpr int kNopeSteps = kFp8 ? kDN / 16 / kWarpsN : 0;
  static constexpr int kRopeSteps = kFp8 ? kDR / 16 / kWarpsN : 0;
  // Per-block K scales (scales.k_block): a warp's chunk pair j covers columns [32 kWarpsN j,
  // 32 kWarpsN (j + 1)), so a block is kBlockPairs whole pairs; a warp's V columns lie in one block.
  static constexpr int kBlockCols = kDN / kKeyBlocks, kBlockPairs = kNopeSteps / 2 / kKeyBlocks;
  // Two accumulator sets for the nope scores (even and odd chunks) halve the chains of dependent
  // mma.sync; where three CTAs share an SM their twelve warps hide the chains and the registers
  // (168 a thread) do not hold the second set.
  static constexpr bool kTwoChains = T::kMinBlocksPerSm < 3;

  static_assert(kBM % 16 == 0 && kWarps % kWarpsM == 0, "warps cover the row blocks evenly");
  // Whole 64-column panels keep every ldmatrix address a lane constant plus an immediate: a
  // warp's k-steps sit at the same place in every panel, and its V columns are whole panels.
  static_assert(kDQK % 64 == 0 && 4 % kWarpsN == 0, "k-steps of the warps at fixed places in each panel");
  static_assert(kVCols % 64 == 0 && kDV <= kDN, "each warp's V columns are whole panels of the nope part");
  static_assert(kBN % 16 == 0, "16-key steps");
  static_assert(!kFp8 || (kDN % (32 * kWarpsN) == 0 && kNopeChunks % 8 == 0 && kDR % (16 * kWarpsN) == 0 &&
                          kVCols % 128 == 0 && kNopeSteps + kRopeSteps == kKSteps),
                "fp8: whole nope chunk pairs and rope steps for every warp, V in whole 128-column panels");
  static constexpr bool kSwap = T::kSwapQk;
  static_assert(!kSwap || ((kBM == 16 || kBM == 32) && kWarps == 4 * kWarpsM && kBN == 64 && kKeyBlocks == 1 &&
                           kDQK % 64 == 0 && kDR % 64 == 0 && SameType<typename Base::QE, E>::value),
                "swap_qk: a warpgroup per 16 rows, 64-key tiles, whole panels, Q in the cache's type");
  static_assert(!kSwap || (kR.q_offset % 1024 == 0 && kR.kv_offset % 1024 == 0 && kR.kv_stage_bytes % 1024 == 0),
                "swap_qk: 128-byte-swizzled panels start on 1 KB");
  static_assert(kKeyBlocks == 1 || (kFp8 && kKeyScales && kBlockPairs * kKeyBlocks * 2 == kNopeSteps &&
                                    kBlockCols % kVCols == 0),
                "per-block K scales: whole chunk pairs of each warp in a block, each warp's V columns in one");

  sm80::LanePart lk, lv;
  u32 qa[kKSteps][4];  // this warp's Q fragments
  float acc_o[1][kDT][4];
  Softmax softmax;
  float nope_factor;  // fp8: the widening factor and K's per-tensor or per-head scale
  float q_factor[2][2];  // swap_qk, fp8: K's per-tensor or per-head scale times Q's of S^T's columns 8 j + 2 t + e
                         // (rows 16 wg + 8 j + 2 t + e of the tile)
  float o_factor;     // fp8: what 1/sum is multiplied by (V's share of them)

  __device__ __forceinline__ explicit LatentSplit(const AttentionParams& params) : Base(params) {}

  __device__ __forceinline__ float4* exchange(int w) const {
    return reinterpret_cast<float4*>(smem + kR.exchange_offset) + w * kNT * 32;
  }

  // swap_qk: this thread's cp.async copies, written through the generic proxy, are fenced for
  // wgmma's reads through the async proxy before the barrier that publishes the tile.
  __device__ __forceinline__ void tile_landed() const {
#if __CUDA_ARCH__ >= 900
    if constexpr (kSwap) sm90::fence_proxy_async_shared();
#endif
  }

  // After the first tile's barrier, Q has arrived: this warp's Q fragments, kept for the launch.
  __device__ __forceinline__ void tile_arrived(int i) {
    if constexpr (kSwap) return issue_qk_swapped(i % kStages);
    if (i != 0) return;
    if constexpr (kFp8) {
      // Nope chunk c (16 columns, fp16 in the Q tile: chunks 2c, 2c + 1), then rope steps.
      const int row = 16 * wm + (lane & 15), lc = lane >> 4;
      const u32 q = smem_base + kR.q_offset;
#pragma unroll
      for (int j = 0; j < kNopeSteps / 2; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int c = fp8_latent_chunk(j, h, wn, kWarpsN);  // as K's ldmatrix reads it
          sm80::ldmatrix_x4(qa[2 * j + h], q + QTile::offset(row, 2 * c + lc));
        }
#pragma unroll
      for (int r = 0; r < kRopeSteps; ++r)
        sm80::ldmatrix_x4(qa[kNopeSteps + r], q + QTile::offset(row, kDN / 8 + fp8_latent_chunk(r, lc, wn, kWarpsN)));
    } else {
      const sm80::LanePart lq = lane_part(kR.q_offset, 16 * wm + (lane & 15), lane >> 4);
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) sm80::ldmatrix_x4(qa[ks], QTile::ldm(lq, 2 * kWarpsN * ks, 0));
    }
  }

  // fp8: this warp's part of a tile's scores, nope (widened, times K's scales) plus rope. With
  // per-block K scales each block's chunk pairs are summed on their own and added into s_nope
  // times their keys' scales of that block.
  __device__ __forceinline__ void scores_fp8(float (&s)[1][kNT][4], int n, int stage) const {
    float s_odd[1][kNT][4];
    float s_nope[1][kNT][4];  // per-block scales only
    const sm80::LanePart lks = lk.plus(stage * kR.kv_stage_bytes);
#pragma unroll
    for (int j = 0; j < kNopeSteps / 2; ++j) {
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        // (keys 0..7, chunk c), (keys 0..7, c + 1), (keys 8..15, c), (keys 8..15, c + 1)
        u32 b[4];
        sm80::ldmatrix_x4(b, KTile::ldm(lks, 2 * kWarpsN * j, 16 * np));
        u32 k00, k01, k10, k11, k20, k21, k30, k31;
        Fp8Ops::widen_k(b[0], k00, k01);
        Fp8Ops::widen_k(b[1], k10, k11);
        Fp8Ops::widen_k(b[2], k20, k21);
        Fp8Ops::widen_k(b[3], k30, k31);
        float(&odd)[1][kNT][4] = kTwoChains ? s_odd : s;
        if (j % kBlockPairs == 0) {  // a block's first pair
          sm80::mma_16816_zero_c<fp16_t>(s[0][2 * np], qa[2 * j], k00, k01);
          sm80::mma_16816_zero_c<fp16_t>(s[0][2 * np + 1], qa[2 * j], k20, k21);
        } else {
          sm80::mma_16816<fp16_t>(s[0][2 * np], qa[2 * j], k00, k01);
          sm80::mma_16816<fp16_t>(s[0][2 * np + 1], qa[2 * j], k20, k21);
        }
        if (kTwoChains && j % kBlockPairs == 0) {
          sm80::mma_16816_zero_c<fp16_t>(odd[0][2 * np], qa[2 * j + 1], k10, k11);
          sm80::mma_16816_zero_c<fp16_t>(odd[0][2 * np + 1], qa[2 * j + 1], k30, k31);
        } else {
          sm80::mma_16816<fp16_t>(odd[0][2 * np], qa[2 * j + 1], k10, k11);
          sm80::mma_16816<fp16_t>(odd[0][2 * np + 1], qa[2 * j + 1], k30, k31);
        }
      }
      if constexpr (kKeyBlocks > 1)
        if (j % kBlockPairs == kBlockPairs - 1) {  // a block's last pair: its keys' scales
          const int block = j / kBlockPairs;
#pragma unroll
          for (int jn = 0; jn < kNT; ++jn) {
            const float2 k = *reinterpret_cast<const float2*>(key_scale_slot(n, block) + 8 * jn + 2 * t);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float part = (s[0][jn][e] + (kTwoChains ? s_odd[0][jn][e] : 0.f)) * (e % 2 ? k.y : k.x);
              s_nope[0][jn][e] = block == 0 ? part : s_nope[0][jn][e] + part;
            }
          }
        }
    }
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      if constexpr (kKeyBlocks > 1) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[0][j][e] = s_nope[0][j][e] * nope_factor;
        continue;
      }
      float f0 = nope_factor, f1 = nope_factor;
      if constexpr (kKeyScales) {
        const float2 k = *reinterpret_cast<const float2*>(key_scale_slot(n) + 8 * j + 2 * t);
        f0 *= k.x;
        f1 *= k.y;
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][j][e] = (s[0][j][e] + (kTwoChains ? s_odd[0][j][e] : 0.f)) * (e % 2 ? f1 : f0);
    }
    // The rope part is not scaled: its steps accumulate onto the scaled nope scores.
    using R = typename T::RopeElement;
#pragma unroll
    for (int r = 0; r < kRopeSteps; ++r)
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        u32 bk[4];
        sm80::ldmatrix_x4(bk, KTile::ldm(lks, kNopeChunks + 2 * kWarpsN * r, 16 * np));
        sm80::mma_16816<R>(s[0][2 * np], qa[kNopeSteps + r], bk[0], bk[1]);
        sm80::mma_16816<R>(s[0][2 * np + 1], qa[kNopeSteps + r], bk[2], bk[3]);
      }
  }

  __device__ __forceinline__ void compute(int n, int stage, int i) {
    float s[1][kNT][4];
    if constexpr (kSwap)
      scores_swapped(s, n);
    else if constexpr (kFp8)
      scores_fp8(s, n, stage);
    else
      scores(s, stage);
    finish_tile(s, n, stage, i);
  }

  // swap_qk: S^T = K Q^T, issued as soon as tile i is visible (tile_arrived), so the wgmmas run
  // while the ring plans and issues the next copies: the nope steps into qk_nope, an fp8 cache's
  // rope steps into qk_rope (K's and Q's scales multiply the nope part only), both K-major from
  // the stage's and Q's 128-byte panels. Warpgroup wg takes the tile's rows [16 wg, 16 wg + 16)
  // (BM 32: two warpgroups, each over every key of the tile); accumulator element 4 j + 2 h + e
  // is key 16 (warp % 4) + g + 8 h, row 16 wg + 8 j + 2 t + e.
  float qk_nope[8], qk_rope[8];
  // swap_qk: the first of this warp's warpgroup's 16 rows (S^T's N) and of its 16 keys of the tile.
  __device__ __forceinline__ int swap_row0() const { return 16 * (warp / 4); }
  __device__ __forceinline__ int swap_key0() const { return 16 * (warp % 4); }
  __device__ __forceinline__ void issue_qk_swapped(int stage) {
    using namespace sm90;
    using R = typename T::RopeElement;
    constexpr int kStepBytes = 32;  // a wgmma k-step: 16 columns of a 16-bit type, 32 of fp8
    constexpr int kNopeK = kFp8 ? kDN / 32 : kDN / 16, kRopeK = kDR / 16;
    constexpr int kQPanel = kBM * 128, kKPanel = kBN * 128;
    constexpr int kNopePanels = kNopeK / 4;  // four k-steps a 128-byte panel
    // Each k-step's descriptors are the tiles' first ones plus its byte offset / 16 (the address
    // field's low bits: shared addresses stay below 2^18, so nothing carries out of it).
    const u64 qd = make_desc(smem_base + kR.q_offset + swap_row0() * 128, 16, 1024);
    const u64 kd = make_desc(smem_base + kR.kv_offset + stage * kR.kv_stage_bytes, 16, 1024);
    auto step = [](u64 d, int bytes) { return (d & ~u64(0xffffffffu)) | u32(u32(d) + u32(bytes >> 4)); };
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kNopeK; ++ks) {
      const int at = (ks % 4) * kStepBytes;
      Wgmma<E, 16>::ss(qk_nope, step(kd, (ks / 4) * kKPanel + at), step(qd, (ks / 4) * kQPanel + at), ks > 0 ? 1 : 0);
    }
    float(&rope)[8] = kFp8 ? qk_rope : qk_nope;
#pragma unroll
    for (int r = 0; r < kRopeK; ++r) {
      const int at = (r % 4) * kStepBytes;
      Wgmma<R, 16>::ss(rope, step(kd, (kNopePanels + r / 4) * kKPanel + at),
                        step(qd, (kNopePanels + r / 4) * kQPanel + at), kFp8 && r == 0 ? 0 : 1);
    }
    wgmma_commit();
  }

  // swap_qk: the issued S^T (scaled where the cache is fp8), then S through the exchange in this
  // warp's fragments (its row block's, which another warpgroup computed where BM is 32).
  __device__ __forceinline__ void scores_swapped(float (&s)[1][kNT][4], int n) {
    using namespace sm90;
    wgmma_wait<0>();
    fence_operand(qk_nope);
    if constexpr (kFp8) {
      fence_operand(qk_rope);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float kscale = kKeyScales ? key_scale_slot(n)[swap_key0() + g + 8 * h] : 1.f;
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = qk_nope[4 * j + 2 * h + e];
            x = x * (kscale * q_factor[j][e]) + (kDR > 0 ? qk_rope[4 * j + 2 * h + e] : 0.f);
          }
      }
    }
    // S[row][key] in rows of kBN + kSwapExchangePad floats.
    constexpr int kRow = kBN + kSwapExchangePad;
    float* x = reinterpret_cast<float*>(smem + kR.exchange_offset);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          x[(swap_row0() + 8 * j + 2 * t + e) * kRow + swap_key0() + g + 8 * h] = qk_nope[4 * j + 2 * h + e];
    __syncthreads();
#pragma unroll
    for (int jn = 0; jn < kNT; ++jn)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 v = *reinterpret_cast<const float2*>(x + (16 * wm + g + 8 * h) * kRow + 8 * jn + 2 * t);
        s[0][jn][2 * h] = v.x;
        s[0][jn][2 * h + 1] = v.y;
      }
  }

  __device__ __forceinline__ void scores(float (&s)[1][kNT][4], int stage) const {
    // Two accumulator sets (even and odd k-steps) halve the chains of dependent mma.sync.
    float s_odd[1][kNT][4];
    const sm80::LanePart lks = lk.plus(stage * kR.kv_stage_bytes);
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks)
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        u32 bk[4];
        sm80::ldmatrix_x4(bk, KTile::ldm(lks, 2 * kWarpsN * ks, 16 * np));
        float(&acc)[1][kNT][4] = ks % 2 ? s_odd : s;
        if (ks < 2) {
          sm80::mma_16816_zero_c<E>(acc[0][2 * np], qa[ks], bk[0], bk[1]);
          sm80::mma_16816_zero_c<E>(acc[0][2 * np + 1], qa[ks], bk[2], bk[3]);
        } else {
          sm80::mma_16816<E>(acc[0][2 * np], qa[ks], bk[0], bk[1]);
          sm80::mma_16816<E>(acc[0][2 * np + 1], qa[ks], bk[2], bk[3]);
        }
      }
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][j][e] += kKSteps > 1 ? s_odd[0][j][e] : 0.f;
  }

  // The row block's scores from the warps' parts, the mask, the softmax, and P V.
  __device__ __forceinline__ void finish_tile(float (&s)[1][kNT][4], int n, int stage, int i) {
    if constexpr (kWarpsN > 1 && !kSwap) {  // add the row block's parts, every warp in the same order
      float4* mine = exchange(warp);
#pragma unroll
      for (int j = 0; j < kNT; ++j) mine[j * 32 + lane] = make_float4(s[0][j][0], s[0][j][1], s[0][j][2], s[0][j][3]);
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        float4 sum = exchange(wm)[j * 32 + lane];
#pragma unroll
        for (int w = 1; w < kWarpsN; ++w) {
          const float4 x = exchange(w * kWarpsM + wm)[j * 32 + lane];
          sum.x += x.x;
          sum.y += x.y;
          sum.z += x.z;
          sum.w += x.w;
        }
        s[0][j][0] = sum.x;
        s[0][j][1] = sum.y;
        s[0][j][2] = sum.z;
        s[0][j][3] = sum.w;
      }
    }
    if (n >= n_unmasked_hi || n < n_unmasked_lo) this->mask_scores(s, n * kBN);
    softmax.update(s, acc_o, p.softmax_scale_log2);
    if constexpr (kFp8) {
      // V (K's columns) takes K's per-token scales into P (per-block: its V columns' block's).
      if constexpr (kKeyScales)
        scale_key_columns(s, key_scale_slot(n, wn * kVCols / kBlockCols), t, Fp8Ops::kTokenPFactor);
      u32 pa[1][kPSteps][4];
      pack_p<fp16_t>(s, pa);
      Fp8Ops::template pv<kDT, kPSteps>(acc_o, pa, lv.plus(stage * kR.kv_stage_bytes));
    } else {
      u32 pa[1][kPSteps][4];
      pack_p<E>(s, pa);
      sm80::gemm_pv<E, VPart, 1, kDT, kPSteps>(acc_o, pa, lv.plus(stage * kR.kv_stage_bytes));
    }
  }

  template <class PE>
  __device__ __forceinline__ static void pack_p(const float (&s)[1][kNT][4], u32 (&pa)[1][kPSteps][4]) {
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) {
      pa[0][kk][0] = pack2<PE>(s[0][2 * kk][0], s[0][2 * kk][1]);
      pa[0][kk][1] = pack2<PE>(s[0][2 * kk][2], s[0][2 * kk][3]);
      pa[0][kk][2] = pack2<PE>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
      pa[0][kk][3] = pack2<PE>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
    }
  }

  // ldmatrix lane addresses for a tile at `offset`, shifted to this warp's k-step within each
  // panel: the warp's chunk pair 2 wn (+ lc) is an XOR on the chunk bits of the swizzled address.
  __device__ __forceinline__ sm80::LanePart lane_part(int offset, int row, int lc) const {
    sm80::LanePart l = sm80::LanePart::make(smem_base + offset, row, lc);
    l.w8 ^= u32(2 * wn) << 4;
    return l;
  }

  // Each warp writes its own columns of its rows: O and the LSE (one split) or the split's
  // normalised O and LSE to the workspace.
  __device__ __forceinline__ void epilogue() {
    __syncthreads();
    const bool bad = *bad_page_flag() != 0;
    const float nan = __int_as_float(0x7fc00000);
    const float score_scale = p.softmax_scale_log2 * 0.6931471805599453f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = softmax.row_sum(0, h);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int packed = m0 + 16 * wm + g + 8 * h;
      if (packed >= rows) continue;
      const float mx = softmax.row_max(0, h);
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const float lse = bad ? nan : sum > 0.f ? mx * score_scale + logf(sum) : neg_inf();
      if constexpr (kFp8) {
        // Columns 16 c + 4 t + 2 e (+1) are n-tiles 2 c and 2 c + 1's element e (kv_operands.cuh).
        this->template write_o_pairs<kDT>(
            [&](int j, float& o0, float& o1) {
              const int c = j / 2, e = j % 2;
              o0 = acc_o[0][2 * c][2 * h + e];
              o1 = acc_o[0][2 * c + 1][2 * h + e];
              return Fp8Ops::column_of(2 * c, 0, e);
            },
            packed, wn * kVCols + 4 * t, inv * o_factor, lse, bad, wn == 0 && t == 0);
      } else {
        this->template write_o_row<kDT>(reinterpret_cast<const float(&)[4 * kDT]>(acc_o), h, packed,
                                        wn * kVCols + 2 * t, inv, lse, bad, wn == 0 && t == 0);
      }
    }
  }

  __device__ __forceinline__ void run() {
    if (!this->begin()) return;
    if (tid == 0) *bad_page_flag() = 0;
    if constexpr (kFp8) {
      // Per-token K scales multiply the nope scores and P; a per-tensor or per-head one (a
      // latent head's) the nope scores and 1/sum.
      const float k_scale = kKeyScales ? 1.f : scales.k.at(b, hk, 0, 0);
      nope_factor = Fp8Ops::kValueFactor * k_scale;
      o_factor = Fp8Ops::kValueFactor * (kKeyScales ? 1.f / Fp8Ops::kTokenPFactor : k_scale);
      if constexpr (kSwap) {
        // Q K^T multiplies the cache's values as they are: no widening factor, Q's scale per row.
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int packed = m0 + swap_row0() + 8 * j + 2 * t + e;
            q_factor[j][e] = packed < rows ? k_scale * scales.q.at(b, head_of(packed), seq.q_start, token_of(packed)) : 0.f;
          }
      }
    }
    // K as the B operand of Q K^T at this warp's k-steps; V (.trans) at its own column panels.
    lk = lane_part(kR.kv_offset, (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
    lv = sm80::LanePart::make(smem_base + kR.kv_offset + wn * (kVCols / (kFp8 ? 128 : 64)) * kBN * 128, lane & 15,
                              lane >> 4);
#pragma unroll
    for (int d = 0; d < kDT; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[0][d][e] = 0.f;
    softmax.init(nullptr, tid);
    __syncthreads();

    if (n_end > n_begin) {
      this->main_loop();
      sm80::cp_async_wait<0>();  // the ring's last (empty) groups, before the kernel's end
    }
    epilogue();
  }
};

template <class T>
__device__ void latent_split(const AttentionParams& p) {
  LatentSplit<T> k(p);
  k.run();
}

}  // namespace flashjit::decode
