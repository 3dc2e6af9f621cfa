// The decode family's split pass for a shared K/V (latent) cache on sm_90a: two wgmma
// warpgroups share a 64-row tile of packed query rows (MLA's query heads times a step's tokens).
//
// Rows, keys and the ring of key tiles are key_ring.cuh's, the loads latent_ring.cuh's: Q and
// each key tile sit in shared memory in 128-byte panels swizzled chunk ^ row % 8, which wgmma's
// 128-byte-swizzle descriptors read directly (panel bases are multiples of 1 KB). The O row of
// MLA is wide (dv 512: a 64 x 512 fp32 accumulator is 256 registers a thread for one
// warpgroup), so warpgroup w owns O's columns [w * dv / 2, (w + 1) * dv / 2). For S = Q K^T each
// warpgroup takes every other 16-column k-step of the head dim, writes its partial scores to the
// exchange slot, and after one barrier adds the other's: both hold identical scores (addition
// commutes exactly), hence identical maxima, sums and probabilities, and need no merge at the
// end. Each then multiplies P (registers) by its own V columns (the key tile's first dv columns,
// read MN-major). Thread t of either warpgroup holds the same accumulator elements, so the
// exchange is a plain copy in register order.
//
// Overlap, within the ring's steps: a tile's Q K^T is issued as soon as the tile is visible
// (tile_arrived), before the ring plans and issues the next copies, and waited for in compute;
// its P V is issued at the end of compute and waited for only before the next tile's barrier
// (tile_landed), which is also what lets the ring refill its stage. A row's running max moves
// only when a tile's max exceeds it by more than 2^8 (FA4's lazy rescale): probabilities stay
// at most 256, fine for 16-bit P and fp32 sums, and O is rescaled only on the tiles where some
// row's max moved.
#pragma once

#include "common/mask.cuh"
#include "common/params.cuh"
#include "common/types.cuh"
#include "decode/latent_ring.cuh"
#include "sm80/cp_async.cuh"
#include "sm90/ptx.cuh"
#include "sm90/softmax.cuh"
#include "sm90/wgmma.cuh"

namespace flashjit::decode {

template <class T>
struct LatentWgmma : LatentRing<LatentWgmma<T>, T> {
  using Base = LatentRing<LatentWgmma<T>, T>;
  using Base::m0, Base::rows, Base::mask, Base::tid, Base::warp, Base::lane, Base::wm, Base::wn, Base::n_begin,
      Base::n_end, Base::n_unmasked_lo, Base::n_unmasked_hi, Base::p, Base::smem, Base::smem_base, Base::token_of,
      Base::head_of, Base::bad_page_flag, Base::kBM, Base::kBN, Base::kWarps, Base::kDQK, Base::kDV, Base::kDN,
      Base::kStages, Base::kR;
  using typename Base::E;
  static constexpr int kVCols = kDV / 2;  // O columns of each warpgroup
  static constexpr int kSRegs = kBN / 2, kORegs = kVCols / 2, kPSteps = kBN / 16;
  static constexpr int kHalfSteps = kDQK / 32;  // Q K^T k-steps of each warpgroup
  using Softmax = sm90::OnlineSoftmax<kBN>;  // its layout helpers; the statistics are kept here
  static constexpr float kRescaleLog2 = 8.f;  // a row's max moves when exceeded by more than this

  static_assert(kBM == 64 && kWarps == 8, "two warpgroups share a 64-row tile");
  static_assert(!Base::kFp8, "16-bit latent tiles (fp8 caches take the mma.sync pass)");
  static_assert(kDQK % 64 == 0, "whole 128-byte panels of Q and K");
  static_assert(kVCols % 64 == 0 && kVCols <= 256 && kDV <= kDN,
                "each warpgroup's V columns are whole panels of the nope part, one wgmma wide");
  static_assert(kBN % 16 == 0 && kBN <= 256, "16-key steps of one wgmma width");
  static_assert(kR.q_offset % 1024 == 0 && kR.kv_offset % 1024 == 0 && kR.kv_stage_bytes % 1024 == 0 &&
                    (kBN * 128) % 1024 == 0,
                "128-byte-swizzled panels start on 1 KB");

  float o[kORegs];
  float s_acc[kSRegs];   // this warpgroup's part of the current tile's scores
  float max_scaled[2];   // each row's running max times scale_log2 (-inf: no key yet)
  float row_sum[2];      // this thread's share of each row's sum, relative to max_scaled

  __device__ __forceinline__ explicit LatentWgmma(const AttentionParams& params) : Base(params) {}

  // The ring's hooks. Before the barrier that publishes a tile (and lets the previous tile's
  // stage be refilled): the previous tile's P V has finished, and this thread's copies, written
  // through the generic proxy, are fenced for wgmma's reads through the async proxy.
  __device__ __forceinline__ void tile_landed() {
    sm90::wgmma_wait<0>();
    sm90::fence_operand(o);
    sm90::fence_proxy_async_shared();
  }
  // Tile i is visible: its Q K^T starts now and runs while the ring issues the next copies.
  __device__ __forceinline__ void tile_arrived(int i) { issue_qk(i % kStages); }

  // This warpgroup's k-steps of S = Q K^T: 16 columns (32 bytes) at 32 * wn within each 64-byte
  // half-panel of Q and of the stage's key tile.
  __device__ __forceinline__ void issue_qk(int stage) {
    using namespace sm90;
    const u32 q = smem_base + kR.q_offset + 32 * wn;
    const u32 k = smem_base + kR.kv_offset + stage * kR.kv_stage_bytes + 32 * wn;
    wgmma_fence();
#pragma unroll
    for (int step = 0; step < kHalfSteps; ++step) {
      const u32 at = (step % 2) * 64;
      Wgmma<E, kBN>::ss(s_acc, make_desc(q + (step / 2) * (kBM * 128) + at, 16, 1024),
                        make_desc(k + (step / 2) * (kBN * 128) + at, 16, 1024), step > 0 ? 1 : 0);
    }
    wgmma_commit();
  }

  // Warpgroup wg's partial scores in the exchange slot: [kBN / 8][128 threads] float4.
  __device__ __forceinline__ float4* exchange(int wg) const {
    return reinterpret_cast<float4*>(smem + kR.exchange_offset) + wg * (kBN / 8) * 128;
  }

  // -inf where key n0 + c is not visible from its row's token (or past the cache end); the
  // accumulator layout of sm90/softmax.cuh.
  __device__ __forceinline__ void apply_mask(float (&s)[kSRegs], int n0) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int tok = token_of(m0 + 16 * wm + (lane >> 2) + 8 * h);
      const int lo = mask.col_lo(tok) - n0, hi = mask.col_hi(tok) - n0;
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = 8 * j + 2 * (lane & 3) + e;
          if (c < lo || c >= hi) s[4 * j + 2 * h + e] = neg_inf();
        }
    }
  }

  // Folds a tile's scores into the rows' statistics (lazy rescale, above) and turns them into
  // probabilities in place; O is rescaled where a row's max moved.
  __device__ __forceinline__ void softmax(float (&s)[kSRegs]) {
    float correction[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = neg_inf();
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) m = fmaxf(m, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
      m = sm90::quad_max(m) * p.softmax_scale_log2;
      correction[h] = 1.f;
      if (m > max_scaled[h] + kRescaleLog2) {  // false for a row that still sees no key
        correction[h] = max_scaled[h] == neg_inf() ? 0.f : exp2_approx(max_scaled[h] - m);
        max_scaled[h] = m;
        row_sum[h] *= correction[h];
      }
    }
    if (sm90::rows_moved(correction)) sm90::rescale_rows(o, correction);
    const float m0 = max_scaled[0] == neg_inf() ? 0.f : max_scaled[0];
    const float m1 = max_scaled[1] == neg_inf() ? 0.f : max_scaled[1];
#pragma unroll
    for (int r = 0; r < kSRegs; ++r)
      s[r] = exp2_approx(fmaf(s[r], p.softmax_scale_log2, (r & 2) ? -m1 : -m0));
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      row_sum[0] += s[4 * j] + s[4 * j + 1];
      row_sum[1] += s[4 * j + 2] + s[4 * j + 3];
    }
  }

  __device__ __forceinline__ void compute(int n, int stage, int) {
    using namespace sm90;
    wgmma_wait<0>();  // this tile's Q K^T (the previous P V finished before the barrier)
    fence_operand(s_acc);
    float s[kSRegs];
    {  // add the other warpgroup's part
      float4* mine = exchange(wn);
      const float4* other = exchange(1 - wn);
      const int at = tid & 127;
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j)
        mine[j * 128 + at] = make_float4(s_acc[4 * j], s_acc[4 * j + 1], s_acc[4 * j + 2], s_acc[4 * j + 3]);
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        const float4 x = other[j * 128 + at];
        s[4 * j] = s_acc[4 * j] + x.x;
        s[4 * j + 1] = s_acc[4 * j + 1] + x.y;
        s[4 * j + 2] = s_acc[4 * j + 2] + x.z;
        s[4 * j + 3] = s_acc[4 * j + 3] + x.w;
      }
    }
    if (n >= n_unmasked_hi || n < n_unmasked_lo) apply_mask(s, n * kBN);
    softmax(s);
    u32 pf[kPSteps][4];
    Softmax::template pack_probabilities<E>(s, pf);
    // O += P V: V MN-major, this warpgroup's panels of the key tile, 16 key rows a step; waited
    // for before the next tile's barrier.
    const u32 v = smem_base + kR.kv_offset + stage * kR.kv_stage_bytes + wn * (kVCols / 64) * (kBN * 128);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) Wgmma<E, kVCols>::rs(o, pf[kk], make_desc(v + kk * (16 * 128), kBN * 128, 1024), 1);
    wgmma_commit();
  }

  // Each warpgroup writes its own columns of its rows: O and the LSE (one split) or the split's
  // normalised O and LSE to the workspace.
  __device__ __forceinline__ void epilogue() {
    __syncthreads();
    const bool bad = *bad_page_flag() != 0;
    const float nan = __int_as_float(0x7fc00000);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = sm90::quad_sum(row_sum[h]);
      const int packed = m0 + 16 * wm + (lane >> 2) + 8 * h;
      if (packed >= rows) continue;
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const float lse = bad ? nan : sum > 0.f ? (max_scaled[h] + __log2f(sum)) * kLn2 : neg_inf();
      this->template write_o_row<kVCols / 8>(o, h, packed, wn * kVCols + 2 * (lane & 3), inv, lse, bad,
                                             wn == 0 && (lane & 3) == 0);
    }
  }

  __device__ __forceinline__ void run() {
    if (!this->begin()) return;
    if (smem_base % 1024 != 0) __trap();  // 128B-swizzled tiles need 1 KB aligned bases
    if (tid == 0) *bad_page_flag() = 0;
#pragma unroll
    for (int r = 0; r < kORegs; ++r) o[r] = 0.f;
    max_scaled[0] = max_scaled[1] = neg_inf();
    row_sum[0] = row_sum[1] = 0.f;
    __syncthreads();
    if (n_end > n_begin) {
      this->main_loop();
      sm80::cp_async_wait<0>();  // the ring's last (empty) groups, before the kernel's end
      sm90::wgmma_wait<0>();     // the last tile's P V
      sm90::fence_operand(o);
    }
    epilogue();
  }
};

template <class T>
__device__ void latent_wgmma(const AttentionParams& p) {
  LatentWgmma<T> k(p);
  k.run();
}

}  // namespace flashjit::decode
