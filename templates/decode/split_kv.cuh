// The decode family's split pass: a few query tokens per sequence against a long (paged) KV
// cache, on mma.sync (every GPU from Ampere on). Rows, keys and the ring of key tiles are
// key_ring.cuh's.
//
// Warps: kWarpsM = kBlockM / 16 warps own 16 rows each; the kWarpsN warps of one row block split
// every key tile between them (kKeys keys each), keep their own online softmax, and the CTA
// merges their states at the end (FlashDecoding's split within the CTA), so the tensor cores see
// 16-row tiles however few the rows are.
// fp8 caches (kv_operands.cuh): K and V tiles stay fp8 in shared memory and are widened to fp16
// after ldmatrix; Q is dequantised into an fp16 tile. K and V scales per tensor or head and the
// fp8 widening factor are folded into the score scale and into 1/sum; per-token K scales ride in
// a slot beside each tile's row offsets and scale the scores.
// Output: with one split, O and the LSE directly; with several, each split's normalised O and
// its LSE (fp32) into the workspace for the combine pass (combine.cuh).
// Multi-token steps are causal among themselves (bottom-right aligned, as every mask here).
#pragma once

#include "common/element_traits.cuh"
#include "common/kv_policy.cuh"
#include "common/mask.cuh"
#include "common/params.cuh"
#include "common/scales.cuh"
#include "common/seqinfo.cuh"
#include "common/types.cuh"
#include "decode/key_ring.cuh"
#include "decode/kv_operands.cuh"
#include "decode/smem_regions.cuh"
#include "sm80/warp_gemm.cuh"
#include "sm80/cp_async.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/smem_tile.cuh"
#include "sm80/softmax.cuh"

namespace flashjit::decode {

using sm80::LanePart;
using sm80::SmemTile;

// Copies rows [0, kRows) of a swizzled 16-bit tile from global memory, row r from row_ptr(r)
// (nullptr: zero-filled), all threads of the CTA, 16 bytes per cp.async. One commit group is the
// caller's.
template <class Tile, int kThreads, class E, class RowPtr>
__device__ __forceinline__ void gather_tile(u32 smem, const RowPtr& row_ptr, const E* any, int tid) {
  constexpr int kChunks = Tile::kChunks;
  constexpr int kTotal = Tile::kRowCount * kChunks;
#pragma unroll 4
  for (int i = tid; i < kTotal; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const E* src = row_ptr(r);
    sm80::cp_async_16(smem + Tile::offset(r, c), src ? src + c * 8 : any, src != nullptr);
  }
}

// Everything but the math of a key tile is shared with the wgmma pass (split_kv_wgmma.cuh), which
// derives from this as Derived: loads, masks, the online softmax and the epilogue's merge.
template <class Derived, class T>
struct SplitKvPass : KeyRing<Derived, T> {
  using Base = KeyRing<Derived, T>;
  using Base::b, Base::hk, Base::m0, Base::rows, Base::seq, Base::kv, Base::mask, Base::tid,
      Base::warp, Base::lane, Base::wm, Base::wn, Base::g, Base::t, Base::n_begin, Base::n_end, Base::n_unmasked_lo,
      Base::n_unmasked_hi, Base::p, Base::smem, Base::smem_base, Base::token_of, Base::head_of, Base::bad_page_flag,
      Base::row_slot, Base::scales, Base::kThreads, Base::kRowsPerThread, Base::kBoxRows, Base::kBoxes;
  using E = typename T::Element;
  using OE = typename T::OutElement;
  static constexpr int kBM = T::kBlockM, kBN = T::kBlockN, kWarps = T::kNumWarps;
  static constexpr int kDQK = T::kHeadDimQK, kDV = T::kHeadDimV, kGroup = T::kGroup;
  static constexpr int kStages = T::kStages;
  static constexpr int kWarpsM = kBM / 16;
  static constexpr int kWarpsN = kWarps / kWarpsM;
  static constexpr int kKeys = kBN / kWarpsN;  // keys of a tile each warp takes
  static constexpr int kNT = kKeys / 8, kPSteps = kKeys / 16, kDT = kDV / 8;
  static constexpr bool kFp8 = ElementTraits<E>::kBytes == 1;
  static constexpr bool kKeyScales = T::kKScale == ScaleKind::kPerToken;
  static constexpr bool kValueScales = T::kVScale == ScaleKind::kPerToken;
  using QE = typename QElementOf<T>::type;  // E, or a 16-bit Q beside an fp8 cache
  using QTile = SmemTile<kBM, kDQK>;
  using Ops = KvOperands<E, QTile, kBN, kDQK, kDV>;
  using CE = typename Ops::Operand;  // Q and P
  using KTile = typename Ops::KTile;
  using VTile = typename Ops::VTile;
  static constexpr int kChunkElems = ElementTraits<E>::kChunkElems;  // per 16-byte cp.async
  using Softmax = sm80::OnlineSoftmax<1, kThreads, false>;
  static constexpr SmemRegions kR =
      smem_regions({kBM, kBN, kDQK, kDV, kWarps, kStages, int(sizeof(E)), kKeyScales, T::kTmaKv, kValueScales});

  static_assert(T::kThreads == kThreads, "threads");
  static_assert(kR.total == T::kSmemBytes, "host and device disagree on the shared-memory size");
  static_assert(kBM % 16 == 0 && kWarps % kWarpsM == 0, "warps cover the row blocks evenly");
  static_assert(kKeys % 16 == 0 && kKeys * kWarpsN == kBN, "each warp takes whole 16-key steps");
  static_assert(T::kHeadDimRope == 0, "decode tiles take no separate rope part");
  static_assert((sizeof(E) == 2 || kFp8) && sizeof(OE) == 2, "16-bit or fp8 Q/K/V, 16-bit O");
  static_assert(SameType<QE, E>::value || (kFp8 && sizeof(QE) == 2), "a Q type of its own beside an fp8 cache");
  static_assert(kFp8 || (T::kQScale == ScaleKind::kNone && T::kKScale == ScaleKind::kNone &&
                         T::kVScale == ScaleKind::kNone),
                "quantisation scales come with fp8 caches");
  static_assert(QTile::kBytes == kR.k_offset && KTile::kBytes == kR.k_stage_bytes &&
                    VTile::kBytes == kR.v_stage_bytes,
                "tile sizes agree with the region arithmetic");

  LanePart lq, lk, lv;
  float score_scale_log2;  // softmax scale x K's scale and widening factor, log2 units
  float acc_o[1][kDT][4];
  Softmax softmax;

  __device__ __forceinline__ explicit SplitKvPass(const AttentionParams& params) : Base(params) {}

  __device__ __forceinline__ float* key_scale_slot(int n) const {
    return this->token_scale_slot(kR.key_scale_offset, kR.key_scale_slot_bytes, n);
  }
  __device__ __forceinline__ float* value_scale_slot(int n) const {
    return this->token_scale_slot(kR.value_scale_offset, kR.value_scale_slot_bytes, n);
  }

  // The ring's hooks (key_ring.cuh): each key row's second offset is V's; per-token K and V
  // scales go beside the row offsets.
  __device__ __forceinline__ const TensorArg& second_tensor() const { return p.v; }
  __device__ __forceinline__ void row_written(int n, int r, int j) const {
    if constexpr (kKeyScales) key_scale_slot(n)[r] = j < kv.seqlen_k ? scales.key(kv, b, hk, seq.k_start, j) : 0.f;
    if constexpr (kValueScales)
      value_scale_slot(n)[r] = j < kv.seqlen_k ? scales.value(kv, b, hk, seq.k_start, j) : 0.f;
  }
  __device__ __forceinline__ void tile_arrived(int) const {}
  // After the last tile's math was issued (the wgmma pass waits for it here).
  __device__ __forceinline__ void math_done() const {}

  // Every 16-byte chunk of one tile from the row offsets in `rows` (member `kPart`: K's or V's).
  template <class Tile, long long longlong2::*kPart>
  __device__ __forceinline__ void copy_tile(u32 dst, const E* base, const longlong2* rows) const {
    constexpr int kChunks = Tile::kChunks, kTotal = kBN * kChunks;
#pragma unroll 4
    for (int j = 0; j < ceil_div(kTotal, kThreads); ++j) {
      const int i = tid + j * kThreads;
      if (kTotal % kThreads != 0 && i >= kTotal) break;
      const int r = i / kChunks, c = i % kChunks;
      const i64 o = rows[r].*kPart;
      sm80::cp_async_16(dst + Tile::offset(r, c), o >= 0 ? base + o + c * kChunkElems : base, o >= 0);
    }
  }

  // K and V of a key tile into ring stage `stage`, from the offsets write_rows put in its slot;
  // rows past the cache end are zero-filled.
  __device__ __forceinline__ void load_kv(int stage) const {
    const E* kbase = static_cast<const E*>(p.k.ptr);
    const E* vbase = static_cast<const E*>(p.v.ptr);
    const longlong2* rows = row_slot(stage);
    const u32 ks = smem_base + kR.k_offset + stage * kR.k_stage_bytes;
    const u32 vs = smem_base + kR.v_offset + stage * kR.v_stage_bytes;
    constexpr int kChunks = KTile::kChunks;
    // Thread tid copies chunk tid % kChunks of rows tid / kChunks + j * kRowStep (the mapping of
    // the loop below). With whole 128-byte panels and a row step that is a multiple of 8, that
    // chunk's swizzle is the same in every row the thread copies, so its shared addresses
    // advance by a constant and only each row's global offset is computed per copy. (The
    // latent ring's StridedRows, strided_rows.cuh, also takes row steps of 2 and 4; through it
    // these kernels compiled to another schedule, d256 to a longer one, and read 2-7 % slower
    // at d128 in one H200 call against another's, 2026-12-03, so this pass keeps its form.)
    constexpr int kRowStep = kThreads / kChunks;
    constexpr bool kStrided = KTile::kChunks == VTile::kChunks && kChunks % 8 == 0 && kThreads % kChunks == 0 &&
                              kRowStep % 8 == 0 && kBN % kRowStep == 0;
    if constexpr (kStrided) {
      const int c = tid % kChunks, r0 = tid / kChunks, col = c * kChunkElems;
      const u32 k_at = ks + KTile::offset(r0, c), v_at = vs + VTile::offset(r0, c);
#pragma unroll
      for (int j = 0; j < kBN / kRowStep; ++j) {
        const longlong2 o = rows[r0 + j * kRowStep];
        const u32 step = u32(j * kRowStep * 128);
        // A zero-filled row (offset -1) reads nothing; its address stays the tensor's first row.
        sm80::cp_async_16_or_zero(k_at + step, kbase + (o.x >= 0 ? o.x : 0) + col, o.x >= 0);
        sm80::cp_async_16_or_zero(v_at + step, vbase + (o.y >= 0 ? o.y : 0) + col, o.y >= 0);
      }
    } else if constexpr (KTile::kChunks == VTile::kChunks) {  // one offset read per row serves both copies
      constexpr int kTotal = kBN * kChunks;
#pragma unroll 4
      for (int j = 0; j < ceil_div(kTotal, kThreads); ++j) {
        const int i = tid + j * kThreads;
        if (kTotal % kThreads != 0 && i >= kTotal) break;
        const int r = i / kChunks, c = i % kChunks;
        const longlong2 o = rows[r];
        sm80::cp_async_16(ks + KTile::offset(r, c), o.x >= 0 ? kbase + o.x + c * kChunkElems : kbase, o.x >= 0);
        sm80::cp_async_16(vs + VTile::offset(r, c), o.y >= 0 ? vbase + o.y + c * kChunkElems : vbase, o.y >= 0);
      }
    } else {
      copy_tile<KTile, &longlong2::x>(ks, kbase, rows);
      copy_tile<VTile, &longlong2::y>(vs, vbase, rows);
    }
  }

  // TMA (key_ring.cuh): warp 0 issues key tile n's K and V boxes into ring stage `stage`, lane l
  // the l-th box of each panel with `entry`, its page's table entry. A box of the whole tile
  // (kBoxRows = kBN) takes every panel at once: the descriptors' third axis steps over them.
  __device__ __forceinline__ void issue_tile(int n, int stage, int entry) const {
#if __CUDA_ARCH__ >= 900
    const u32 bar = this->stage_barrier(stage);
    if (lane == 0) sm90::mbar_arrive_expect_tx(bar, u32(kR.k_stage_bytes + kR.v_stage_bytes));
    __syncwarp();
    if (lane >= kBoxes) return;
    int row, outer;
    this->box_place(n, entry, row, outer);
    const u32 ks = smem_base + kR.k_offset + stage * kR.k_stage_bytes + lane * kBoxRows * 128;
    const u32 vs = smem_base + kR.v_offset + stage * kR.v_stage_bytes + lane * kBoxRows * 128;
    const u64 once = sm90::policy_evict_first();  // each byte is read once
    constexpr int kWhole = kBoxRows == kBN;
    constexpr int kKPanels = kWhole ? 1 : KTile::kFullPanels, kVPanels = kWhole ? 1 : VTile::kFullPanels;
#pragma unroll
    for (int c = 0; c < kKPanels; ++c)
      sm90::tma_load_5d(ks + c * kBN * 128, &p.tma_k, bar, 0, row, c, hk, outer, once);
#pragma unroll
    for (int c = 0; c < kVPanels; ++c)
      sm90::tma_load_5d(vs + c * kBN * 128, &p.tma_v, bar, 0, row, c, hk, outer, once);
#endif
  }

  // TMA: V rows of key tile n from the cache end on are zeroed (P is 0 there, but the cache's
  // bytes past its end need not be finite numbers).
  __device__ __forceinline__ void clear_rows_past_end(int n, int stage) const {
    const int first = kv.seqlen_k - n * kBN;
    const u32 vs = smem_base + kR.v_offset + stage * kR.v_stage_bytes;
    constexpr int kChunks = VTile::kChunks;
    for (int i = tid + first * kChunks; i < kBN * kChunks; i += kThreads)
      sm80::st_shared_16(vs + VTile::offset(i / kChunks, i % kChunks), 0u, 0u, 0u, 0u);
  }

  __device__ __forceinline__ void compute(int n, int stage, int) {
    float s[1][kNT][4];
    Ops::qk(s, lq, lk.plus(stage * kR.k_stage_bytes));
    // Per-token K scales before the mask (a masked score stays -inf).
    if constexpr (kKeyScales) scale_key_columns(s, key_scale_slot(n) + kKeys * wn, t, 1.f);
    if (n >= n_unmasked_hi || n < n_unmasked_lo) this->mask_scores(s, n * kBN + kKeys * wn);
    softmax.update(s, acc_o, score_scale_log2);
    // After the row sums, V's per-token scales go into P.
    if constexpr (kValueScales) scale_key_columns(s, value_scale_slot(n) + kKeys * wn, t, Ops::kTokenPFactor);
    u32 pa[1][kPSteps][4];
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) {
      pa[0][kk][0] = pack2<CE>(s[0][2 * kk][0], s[0][2 * kk][1]);
      pa[0][kk][1] = pack2<CE>(s[0][2 * kk][2], s[0][2 * kk][3]);
      pa[0][kk][2] = pack2<CE>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
      pa[0][kk][3] = pack2<CE>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
    }
    Ops::pv(acc_o, pa, lv.plus(stage * kR.v_stage_bytes));
  }

  // Q rows of this CTA (zero past the valid rows): they join the first tile's commit group, or
  // (fp8, dequantised) are stored synchronously before the barrier that precedes the first math.
  __device__ __forceinline__ void load_q() const {
    const QE* qbase = static_cast<const QE*>(p.q.ptr);
    if constexpr (kFp8)
      load_q_fp8<Ops, QTile, kThreads, QE>(smem_base + kR.q_offset, typename Base::QRows{this}, tid);
    else
      gather_tile<QTile, kThreads>(smem_base + kR.q_offset, typename Base::QRows{this}, qbase, tid);
  }

  // Merges the warps that split the keys of each row block, then writes O and the LSE (one
  // split) or the split's normalised O and LSE to the workspace.
  __device__ __forceinline__ void epilogue() {
    sm80::cp_async_wait<0>();
    __syncthreads();  // every warp is done with Q/K/V: the merge area overlays them
    const bool bad = *bad_page_flag() != 0;
    float* merge_o = reinterpret_cast<float*>(smem + kR.merge_o_offset) + warp * 16 * kDV;
    float* merge_stats = reinterpret_cast<float*>(smem + kR.merge_stats_offset) + warp * 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = g + 8 * h;
#pragma unroll
      for (int d = 0; d < kDT; ++d) {
        merge_o[row * kDV + Ops::column_of(d, t, 0)] = acc_o[0][d][2 * h];
        merge_o[row * kDV + Ops::column_of(d, t, 1)] = acc_o[0][d][2 * h + 1];
      }
      float sum = softmax.row_sum(0, h);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if (t == 0) {
        merge_stats[2 * row] = softmax.row_max(0, h);
        merge_stats[2 * row + 1] = sum;
      }
    }
    __syncthreads();

    const float scale_log2 = score_scale_log2;
    const float score_scale = score_scale_log2 * 0.6931471805599453f;  // natural-log units
    const float v_factor = Ops::kValueFactor * (kValueScales ? 1.f / Ops::kTokenPFactor : scales.v.at(b, hk, 0, 0));
    const float* all_o = reinterpret_cast<const float*>(smem + kR.merge_o_offset);
    const float* all_stats = reinterpret_cast<const float*>(smem + kR.merge_stats_offset);
    constexpr int kChunks = kDV / 8;
#pragma unroll 1
    for (int i = tid; i < kBM * kChunks; i += kThreads) {
      const int r = i / kChunks, c = i % kChunks;
      const int packed = m0 + r;
      if (packed >= rows) continue;
      const int rm = r / 16, rr = r % 16;
      float mx = neg_inf();
#pragma unroll
      for (int n = 0; n < kWarpsN; ++n) mx = fmaxf(mx, all_stats[(n * kWarpsM + rm) * 32 + 2 * rr]);
      const float mx_safe = mx == neg_inf() ? 0.f : mx;
      float l = 0.f, o[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int n = 0; n < kWarpsN; ++n) {
        const int w = n * kWarpsM + rm;
        const float f = exp2_approx((all_stats[w * 32 + 2 * rr] - mx_safe) * scale_log2);
        l += f * all_stats[w * 32 + 2 * rr + 1];
        const float* src = all_o + (w * 16 + rr) * kDV + 8 * c;
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] += f * src[e];
      }
      const float nan = __int_as_float(0x7fc00000);
      const float inv = l > 0.f ? v_factor / l : 0.f;
      const float lse = bad ? nan : l > 0.f ? mx * score_scale + logf(l) : neg_inf();
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = bad ? nan : o[e] * inv;
      const int tok = token_of(packed), head = head_of(packed);
      if (p.num_splits == 1) {
        OE* dst = this->o_row(tok, head) + 8 * c;
        *reinterpret_cast<uint4*>(dst) = make_uint4(pack2<OE>(o[0], o[1]), pack2<OE>(o[2], o[3]),
                                                    pack2<OE>(o[4], o[5]), pack2<OE>(o[6], o[7]));
        if (c == 0) this->write_lse(tok, head, lse);
      } else {
        const i64 slot = this->partial_slot(tok, head);
        float4* dst = reinterpret_cast<float4*>(p.partial_o + slot * kDV + 8 * c);
        dst[0] = make_float4(o[0], o[1], o[2], o[3]);
        dst[1] = make_float4(o[4], o[5], o[6], o[7]);
        if (c == 0) p.partial_lse[slot] = lse;
      }
    }
  }

  __device__ __forceinline__ void run() {
    if (!this->begin()) return;
    // Per-tensor / per-head K scales and fp8's widening factor are one number for the CTA.
    score_scale_log2 = p.softmax_scale_log2 * Ops::kValueFactor * (kKeyScales ? 1.f : scales.k.at(b, hk, 0, 0));
    if (tid == 0) *bad_page_flag() = 0;
    // ldmatrix lanes (sm80/attention_fwd.cuh): Q and V as A / .trans B, K as B; this warp's rows
    // and keys. Row offsets are multiples of 8, which keep the swizzle.
    lq = LanePart::make(smem_base + kR.q_offset, 16 * wm + (lane & 15), lane >> 4);
    lk = LanePart::make(smem_base + kR.k_offset, kKeys * wn + (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
    lv = LanePart::make(smem_base + kR.v_offset, kKeys * wn + (lane & 15), lane >> 4);
#pragma unroll
    for (int d = 0; d < kDT; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[0][d][e] = 0.f;
    softmax.init(nullptr, tid);
    __syncthreads();  // the flag is cleared before any load can set it

    if (n_end > n_begin) {
      this->main_loop();
      this->self().math_done();
    }
    this->self().epilogue();
  }
};

template <class T>
struct SplitKv final : SplitKvPass<SplitKv<T>, T> {
  __device__ __forceinline__ explicit SplitKv(const AttentionParams& params) : SplitKvPass<SplitKv<T>, T>(params) {}
};

template <class T>
__device__ void split_kv(const AttentionParams& p) {
  SplitKv<T> k(p);
  k.run();
}

}  // namespace flashjit::decode
