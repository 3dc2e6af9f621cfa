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
#pragma once

#include "common/mask.cuh"
#include "common/params.cuh"
#include "common/types.cuh"
#include "decode/latent_ring.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/smem_tile.cuh"
#include "sm80/softmax.cuh"
#include "sm80/warp_gemm.cuh"

namespace flashjit::decode {

template <class T>
struct LatentSplit : LatentRing<LatentSplit<T>, T> {
  using Base = LatentRing<LatentSplit<T>, T>;
  using Base::b, Base::hk, Base::m0, Base::rows, Base::seq, Base::mask, Base::tid, Base::warp, Base::lane,
      Base::wm, Base::wn, Base::g, Base::t, Base::n_begin, Base::n_end, Base::n_unmasked_lo, Base::n_unmasked_hi,
      Base::p, Base::smem, Base::smem_base, Base::token_of, Base::head_of, Base::bad_page_flag, Base::row_slot,
      Base::kThreads, Base::kBM, Base::kBN, Base::kWarps, Base::kDQK, Base::kDV, Base::kDR, Base::kDN, Base::kR;
  using typename Base::E, typename Base::QTile, typename Base::KTile;
  static constexpr int kGroup = T::kGroup;
  static constexpr int kWarpsM = kBM / 16;
  static constexpr int kWarpsN = kWarps / kWarpsM;     // warps sharing a 16-row block
  static constexpr int kKSteps = kDQK / 16 / kWarpsN;  // Q K^T k-steps of each warp
  static constexpr int kVCols = kDV / kWarpsN;         // O columns of each warp
  static constexpr int kNT = kBN / 8, kPSteps = kBN / 16, kDT = kVCols / 8;
  using VPart = sm80::SmemTile<kBN, kVCols>;  // one warp's V columns: whole panels of the KV tile
  using Softmax = sm80::OnlineSoftmax<1, kThreads, false>;

  static_assert(kBM % 16 == 0 && kWarps % kWarpsM == 0, "warps cover the row blocks evenly");
  // Whole 64-column panels keep every ldmatrix address a lane constant plus an immediate: a
  // warp's k-steps sit at the same place in every panel, and its V columns are whole panels.
  static_assert(kDQK % 64 == 0 && 4 % kWarpsN == 0, "k-steps of the warps at fixed places in each panel");
  static_assert(kVCols % 64 == 0 && kDV <= kDN, "each warp's V columns are whole panels of the nope part");
  static_assert(kBN % 16 == 0, "16-key steps");

  sm80::LanePart lk, lv;
  u32 qa[kKSteps][4];  // this warp's Q fragments
  float acc_o[1][kDT][4];
  Softmax softmax;

  __device__ __forceinline__ explicit LatentSplit(const AttentionParams& params) : Base(params) {}

  __device__ __forceinline__ float4* exchange(int slot, int w) const {
    return reinterpret_cast<float4*>(smem + kR.exchange_offset + slot * kR.exchange_slot_bytes) + w * kNT * 32;
  }

  // After the first tile's barrier, Q has arrived: this warp's Q fragments, kept for the launch.
  __device__ __forceinline__ void tile_arrived(int i) {
    if (i == 0) {
      const sm80::LanePart lq = lane_part(kR.q_offset, 16 * wm + (lane & 15), lane >> 4);
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) sm80::ldmatrix_x4(qa[ks], QTile::ldm(lq, 2 * kWarpsN * ks, 0));
    }
  }

  __device__ __forceinline__ void compute(int n, int stage, int i) {
    // Two accumulator sets (even and odd k-steps) halve the chains of dependent mma.sync.
    float s[1][kNT][4], s_odd[1][kNT][4];
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
    if constexpr (kWarpsN > 1) {  // add the row block's parts, every warp in the same order
      float4* mine = exchange(i & 1, warp);
#pragma unroll
      for (int j = 0; j < kNT; ++j) mine[j * 32 + lane] = make_float4(s[0][j][0], s[0][j][1], s[0][j][2], s[0][j][3]);
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        float4 sum = exchange(i & 1, wm)[j * 32 + lane];
#pragma unroll
        for (int w = 1; w < kWarpsN; ++w) {
          const float4 x = exchange(i & 1, w * kWarpsM + wm)[j * 32 + lane];
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
    u32 pa[1][kPSteps][4];
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) {
      pa[0][kk][0] = pack2<E>(s[0][2 * kk][0], s[0][2 * kk][1]);
      pa[0][kk][1] = pack2<E>(s[0][2 * kk][2], s[0][2 * kk][3]);
      pa[0][kk][2] = pack2<E>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
      pa[0][kk][3] = pack2<E>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
    }
    sm80::gemm_pv<E, VPart, 1, kDT, kPSteps>(acc_o, pa, lv.plus(stage * kR.kv_stage_bytes));
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
      this->template write_o_row<kDT>(reinterpret_cast<const float(&)[4 * kDT]>(acc_o), h, packed, wn * kVCols + 2 * t,
                                      inv, lse, bad, wn == 0 && t == 0);
    }
  }

  __device__ __forceinline__ void run() {
    if (!this->begin()) return;
    if (tid == 0) *bad_page_flag() = 0;
    // K as the B operand of Q K^T at this warp's k-steps; V (.trans) at its own column panels.
    lk = lane_part(kR.kv_offset, (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
    lv = sm80::LanePart::make(smem_base + kR.kv_offset + wn * (kVCols / 64) * kBN * 128, lane & 15, lane >> 4);
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
