// The decode family's split pass on sm_90a for steps whose packed rows fill a 64-row wgmma tile
// (query heads of a KV head times a step's tokens: group 4 x 16 tokens, group 8 x 8, ...).
//
// Everything but a key tile's math is split_kv.cuh's (SplitKvPass): the ring of cp.async
// gathers or TMA boxes (any page size), masks, the online softmax and the epilogue, which merges
// the warpgroups' states. Two tile shapes:
//   BM 64:  kWarpgroups = kNumWarps / 4 warpgroups each take kKeys = BN / kWarpgroups keys of
//           every tile for all 64 rows, and keep their own softmax state and O (64 x dv fp32);
//   BM 128: two warpgroups take 64 rows each and all BN keys of every tile, so a step of 128
//           packed rows (8 query heads x 16 tokens) reads each K/V byte once, not once per
//           64-row CTA.
// Warp w of a warpgroup holds rows 16 w .. 16 w + 15 of its 64 rows of the wgmma accumulators,
// in the mma.sync fragment order (row g and g + 8, columns 8 j + 2 t + e): the same registers,
// and the same rows 16 wm .. 16 wm + 15 of the CTA's tile, that SplitKvPass's softmax, masks and
// merge read, so they serve both passes unchanged.
//
// The tiles are the sm80 tiles (128-byte panels, chunk ^ row % 8), which wgmma's
// 128-byte-swizzle descriptors read directly: S = Q K^T with both K-major (SS), P from registers
// times V read MN-major (RS). A tile's Q K^T is issued as soon as the tile is visible
// (tile_arrived), so it runs while the ring issues the next copies; its P V is waited for only
// before the next tile's barrier (tile_landed), which is also what lets the ring refill its stage.
#pragma once

#include "decode/split_kv.cuh"
#include "sm90/ptx.cuh"
#include "sm90/softmax.cuh"
#include "sm90/wgmma.cuh"

namespace flashjit::decode {

template <class T>
struct SplitKvWgmma : SplitKvPass<SplitKvWgmma<T>, T> {
  using Base = SplitKvPass<SplitKvWgmma<T>, T>;
  using Base::wm, Base::wn, Base::n_unmasked_lo, Base::n_unmasked_hi, Base::smem_base, Base::acc_o, Base::softmax,
      Base::score_scale_log2, Base::kBM, Base::kBN, Base::kWarps, Base::kDQK, Base::kDV, Base::kStages,
      Base::kKeys, Base::kNT, Base::kPSteps, Base::kDT, Base::kR, Base::kFp8;
  using E = typename Base::E;
  static constexpr int kWarpgroups = kWarps / 4;
  static constexpr int kRowGroups = kBM / 64;  // warpgroups of 64 rows each on every key

  static_assert(kBM % 64 == 0 && kWarps % 4 == 0 && kWarpgroups == kRowGroups * Base::kWarpsN,
                "warpgroups take 64-row blocks of the tile, or split the keys of one");
  static_assert(!kFp8, "16-bit caches (fp8 ones widen in registers on mma.sync)");
  static_assert(kDQK % 64 == 0 && kDV % 64 == 0 && kDV <= 256, "whole 128-byte panels, P V one wgmma wide");
  static_assert(kKeys % 16 == 0 && kKeys <= 256, "16-key steps of one wgmma width");
  static_assert(kR.q_offset % 1024 == 0 && kR.k_offset % 1024 == 0 && kR.k_stage_bytes % 1024 == 0 &&
                    kR.v_offset % 1024 == 0 && kR.v_stage_bytes % 1024 == 0,
                "128-byte-swizzled panels start on 1 KB");

  float s_acc[kKeys / 2];  // this warpgroup's scores of the current tile

  __device__ __forceinline__ explicit SplitKvWgmma(const AttentionParams& params) : Base(params) {}

  __device__ __forceinline__ float (&o())[kDV / 2] { return reinterpret_cast<float(&)[kDV / 2]>(acc_o); }
  __device__ __forceinline__ float (&scores())[1][kNT][4] { return reinterpret_cast<float(&)[1][kNT][4]>(s_acc); }

  // The ring's hooks. Before the barrier that publishes a tile (and lets the previous tile's
  // stage be refilled): the previous tile's P V has finished, and this thread's copies, written
  // through the generic proxy, are fenced for wgmma's reads through the async proxy.
  __device__ __forceinline__ void tile_landed() {
    sm90::wgmma_wait<0>();
    sm90::fence_operand(o());
    sm90::fence_proxy_async_shared();
  }

  // Tile i is visible: its Q K^T starts now. S = Q K^T over 16-column k-steps: step s reads 32
  // bytes at 32 (s % 4) within panel s / 4 of this warpgroup's 64 Q rows and kKeys key rows.
  __device__ __forceinline__ void tile_arrived(int i) {
    using namespace sm90;
    if (i == 0 && smem_base % 1024 != 0) __trap();  // 128B-swizzled tiles need 1 KB aligned bases
    const int stage = i % kStages;
    const u32 q = smem_base + kR.q_offset + (wm / 4) * (64 * 128);
    const u32 k = smem_base + kR.k_offset + stage * kR.k_stage_bytes + wn * kKeys * 128;
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kDQK / 16; ++s) {
      const u32 at = (s % 4) * 32;
      Wgmma<E, kKeys>::ss(s_acc, make_desc(q + (s / 4) * (kBM * 128) + at, 16, 1024),
                          make_desc(k + (s / 4) * (kBN * 128) + at, 16, 1024), s > 0 ? 1 : 0);
    }
    wgmma_commit();
  }

  __device__ __forceinline__ void compute(int n, int stage, int) {
    using namespace sm90;
    wgmma_wait<0>();  // this tile's Q K^T (the previous P V finished before the barrier)
    fence_operand(s_acc);
    auto& s = scores();
    if (n >= n_unmasked_hi || n < n_unmasked_lo) this->mask_scores(s, n * kBN + kKeys * wn);
    softmax.update(s, acc_o, score_scale_log2);
    u32 pa[kPSteps][4];
    sm90::OnlineSoftmax<kKeys>::template pack_probabilities<E>(s_acc, pa);
    // O += P V: V MN-major (64-column panels kBN rows apart), this warpgroup's key rows, 16 a
    // step; waited for before the next tile's barrier.
    const u32 v = smem_base + kR.v_offset + stage * kR.v_stage_bytes + wn * kKeys * 128;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) Wgmma<E, kDV>::rs(o(), pa[kk], make_desc(v + kk * (16 * 128), kBN * 128, 1024), 1);
    wgmma_commit();
  }

  // The last tile's P V, before the epilogue reads O and overwrites the tiles with its merge.
  __device__ __forceinline__ void math_done() {
    sm90::wgmma_wait<0>();
    sm90::fence_operand(o());
  }
};

template <class T>
__device__ void split_kv_wgmma(const AttentionParams& p) {
  SplitKvWgmma<T> k(p);
  k.run();
}

}  // namespace flashjit::decode
