// What the split passes of a shared K/V (latent) cache share, as a CRTP layer over the key ring
// (key_ring.cuh): the regions (latent_regions.cuh), the loads and the O rows' writer. A key tile is one
// shared-memory tile of 16-bit units per key row, its nope columns (whose first dv are its V
// row) and then its rope part, swizzled like the sm80 tiles (128-byte panels, chunk ^ row % 8: the
// layout wgmma's 128-byte-swizzle descriptors read as well). An fp8 cache keeps its nope columns
// fp8 there (two to a unit) beside its 16-bit rope part. Q is one tile of the CTA's packed rows
// in the same layout (an fp8 cache's Q nope dequantised to fp16, also on the seesaw pass, whose
// stages hold the cache's nope columns dequantised to fp16). The ring's passes copy 16-byte
// chunks with cp.async, every thread.
//   latent_split.cuh: mma.sync warps, every GPU from Ampere on
//   latent_wgmma.cuh: two wgmma warpgroups on every tile, sm_90a
//   latent_seesaw.cuh: two wgmma warpgroups on alternate tiles, loaded by TMA, sm_90a (Q only
//                      through this layer's cp.async)
#pragma once

#include "common/element_traits.cuh"
#include "common/params.cuh"
#include "common/seqinfo.cuh"
#include "common/types.cuh"
#include "decode/key_ring.cuh"
#include "decode/kv_operands.cuh"
#include "decode/latent_regions.cuh"
#include "decode/strided_rows.cuh"
#include "sm80/cp_async.cuh"
#include "sm80/smem_tile.cuh"

namespace flashjit::decode {

template <class Derived, class T>
struct LatentRing : KeyRing<Derived, T> {
  using Base = KeyRing<Derived, T>;
  using Base::b, Base::hk, Base::m0, Base::rows, Base::seq, Base::kv, Base::tid, Base::p,
      Base::smem_base, Base::token_of, Base::head_of, Base::row_slot, Base::scales, Base::kThreads;
  using E = typename T::Element;
  using QE = typename QElementOf<T>::type;  // E, or a 16-bit Q beside an fp8 cache
  static constexpr bool kFp8 = ElementTraits<E>::kBytes == 1;
  static constexpr bool kKeyScales = T::kKScale == ScaleKind::kPerToken;
  static constexpr int kKeyBlocks = Scales<T>::kKeyBlocks;  // per-token K scales of a key row
  static constexpr int kBM = T::kBlockM, kBN = T::kBlockN, kWarps = T::kNumWarps;
  static constexpr int kDQK = T::kHeadDimQK, kDV = T::kHeadDimV, kDR = T::kHeadDimRope;
  static constexpr int kDN = kDQK - kDR, kStages = T::kStages;
  static constexpr int kNopeUnits = kDN * ElementTraits<E>::kBytes / 2;  // 16-bit units of a row's nope part
  static constexpr int kNopeChunks = kNopeUnits / 8, kRopeChunks = kDR / 8;
  // The seesaw pass (TMA loads) keeps its stages 16-bit, an fp8 cache's dequantised.
  static constexpr bool kDequantisedStages = kFp8 && T::kTmaKv;
  using QTile = sm80::SmemTile<kBM, kDQK>;
  using KTile = sm80::SmemTile<kBN, (kDequantisedStages ? kDN : kNopeUnits) + kDR>;
  static constexpr LatentRegions kR = latent_regions({kBM, kBN, kDQK, kWarps, kStages, /*seesaw=*/T::kTmaKv,
                                                      kDR, ElementTraits<E>::kBytes, kKeyScales, kKeyBlocks,
                                                      T::kSwapQk});

  static_assert(T::kThreads == kThreads, "threads");
  static_assert(kR.total == T::kSmemBytes, "host and device disagree on the shared-memory size");
  static_assert((sizeof(E) == 2 || kFp8) && sizeof(typename T::OutElement) == 2 && sizeof(typename T::RopeElement) == 2,
                "16-bit or fp8 latent caches with a 16-bit rope part");
  static_assert(kFp8 || (T::kQScale == ScaleKind::kNone && T::kKScale == ScaleKind::kNone),
                "quantisation scales come with fp8 caches");
  static_assert(T::kVScale == ScaleKind::kNone, "V takes K's scale");
  static_assert(SameType<QE, E>::value || (kFp8 && sizeof(QE) == 2), "a Q type of its own beside an fp8 cache");
  static_assert(kDR % 8 == 0, "rope chunks");
  static_assert(QTile::kBytes == kR.kv_offset && KTile::kBytes == kR.kv_stage_bytes, "tile sizes agree");

  __device__ __forceinline__ explicit LatentRing(const AttentionParams& params) : Base(params) {}

  // Key tile n's per-token K scales of block `block` (one per key row).
  __device__ __forceinline__ float* key_scale_slot(int n, int block = 0) const {
    return this->token_scale_slot(kR.key_scale_offset, kR.key_scale_slot_bytes, n) + block * kBN;
  }

  // The ring's hooks (key_ring.cuh): each key row's second offset is its rope part's (K's own
  // rows when the rope columns are part of them); per-token K scales go beside the offsets.
  __device__ __forceinline__ const TensorArg& second_tensor() const { return kDR > 0 ? p.k_rope : p.k; }
  __device__ __forceinline__ void row_written(int n, int r, int j) const {
    if constexpr (kKeyScales)
#pragma unroll
      for (int g = 0; g < kKeyBlocks; ++g)
        key_scale_slot(n, g)[r] = j < kv.seqlen_k ? scales.key(kv, b, hk, seq.k_start, j, g) : 0.f;
  }
  // Chunks [first, first + kCount) of every row of a tile from `base` plus each row's offset
  // (elements of Src: a chunk is 16 bytes of them).
  template <class Tile, int kRows, int kFirst, int kCount, long long longlong2::*kPart, class Src>
  __device__ __forceinline__ void copy_chunks(u32 dst, const Src* base, const longlong2* offsets) const {
    using Rows = StridedRows<Tile, kThreads, kCount, kRows>;
    constexpr int kPerChunk = 16 / int(sizeof(Src));
    if constexpr (Rows::kApplies) {  // strided_rows.cuh
      const int col = Rows::chunk(tid) * kPerChunk;
      const u32 at = Rows::first(dst, tid, kFirst);
#pragma unroll
      for (int j = 0; j < Rows::kCopies; ++j) {
        const i64 o = offsets[Rows::row(tid, j)].*kPart;
        sm80::cp_async_16_or_zero(Rows::at(at, j), base + (o >= 0 ? o : 0) + col, o >= 0);
      }
    } else if constexpr (kCount > 0) {
      constexpr int kTotal = kRows * kCount;
#pragma unroll 4
      for (int j = 0; j < ceil_div(kTotal, kThreads); ++j) {
        const int i = tid + j * kThreads;
        if (kTotal % kThreads != 0 && i >= kTotal) break;
        const int r = i / kCount, c = i % kCount;
        const i64 o = offsets[r].*kPart;
        sm80::cp_async_16(dst + Tile::offset(r, kFirst + c), o >= 0 ? base + o + c * kPerChunk : base, o >= 0);
      }
    }
  }

  __device__ __forceinline__ void load_kv(int stage) const {
    const longlong2* rows_of = row_slot(stage);
    const u32 dst = smem_base + kR.kv_offset + stage * kR.kv_stage_bytes;
    copy_chunks<KTile, kBN, 0, kNopeChunks, &longlong2::x>(dst, static_cast<const E*>(p.k.ptr), rows_of);
    copy_chunks<KTile, kBN, kNopeChunks, kRopeChunks, &longlong2::y>(
        dst, static_cast<const typename T::RopeElement*>(p.k_rope.ptr), rows_of);
  }

  // Chunks [kFirst, kFirst + kCount) of the CTA's packed query rows (zero past the valid rows)
  // from tensor `t` into the Q tile, copied by the first kBy threads; they join the first tiles'
  // commit group.
  template <int kFirst, int kCount, class Src, int kBy>
  __device__ __forceinline__ void load_q_chunks(const TensorArg& t) const {
    const Src* base = static_cast<const Src*>(t.ptr);
    const u32 dst = smem_base + kR.q_offset;
#pragma unroll 1
    for (int i = tid; i < kBM * kCount; i += kBy) {
      const int r = i / kCount, c = i % kCount, packed = m0 + r;
      const bool ok = packed < rows;
      const Src* src =
          ok ? base + SeqInfo::offset<T::kVarlen>(t, b, seq.q_start, token_of(packed), head_of(packed)) +
                   c * (16 / int(sizeof(Src)))
             : base;
      sm80::cp_async_16(dst + QTile::offset(r, kFirst + c), src, ok);
    }
  }

  // Q's nope columns, then its rope part, by the first kBy threads (an fp8 cache's nope columns
  // synchronously, dequantised to fp16 in the order of the fp8 K operand's k slots, or in column
  // order for the seesaw pass's dequantised stages; with tuning.swap_qk as they are, laid out as
  // a key tile's, Q's scale applying to S).
  static constexpr bool kRawFp8Q = kFp8 && T::kSwapQk;
  static constexpr int kQRopeChunk = kRawFp8Q ? kNopeChunks : kDN / 8;
  template <int kBy>
  __device__ __forceinline__ void load_q_by() const {
    if constexpr (!kFp8 || kRawFp8Q)
      load_q_chunks<0, kNopeChunks, E, kBy>(p.q);  // as stored
    else if constexpr (kDequantisedStages)
      load_q_fp8<NaturalColumns, QTile, kBy, QE, kDN, fp16_t>(smem_base + kR.q_offset, typename Base::QRows{this}, tid);
    else
      load_q_fp8<KvOperands<E, QTile, kBN, kDQK, kDV>, QTile, kBy, QE, kDN>(smem_base + kR.q_offset, typename Base::QRows{this}, tid);
    if constexpr (kRopeChunks > 0) load_q_chunks<kQRopeChunk, kRopeChunks, typename T::RopeElement, kBy>(p.q_rope);
  }
  __device__ __forceinline__ void load_q() const { load_q_by<kThreads>(); }

  // Packed row `packed` (row g + 8 h of a thread's 16-row block) of the O columns a thread holds
  // in accumulator order (o[4 j + 2 h + e]: column col0 + 8 j + e), times `inv` (NaN where a page
  // was bad): into the row of O (one split) or the split's workspace slot; its LSE too where
  // `lse_writer`.
  template <int kPairs, int kRegs>
  __device__ __forceinline__ void write_o_row(const float (&o)[kRegs], int h, int packed, int col0, float inv,
                                              float lse, bool bad, bool lse_writer) const {
    write_o_pairs<kPairs>(
        [&](int j, float& o0, float& o1) {
          o0 = o[4 * j + 2 * h];
          o1 = o[4 * j + 2 * h + 1];
          return 8 * j;
        },
        packed, col0, inv, lse, bad, lse_writer);
  }

  // The same for any order of columns: pair(j, o0, o1) gives the values of pair j and returns
  // the column of o0 (o1's is the next) past col0, a constant once unrolled.
  template <int kPairs, class Pair>
  __device__ __forceinline__ void write_o_pairs(const Pair& pair, int packed, int col0, float inv, float lse, bool bad,
                                                bool lse_writer) const {
    using OE = typename T::OutElement;
    const float nan = __int_as_float(0x7fc00000);
    const int tok = token_of(packed), head = head_of(packed);
    if (p.num_splits == 1) {
      OE* dst = this->o_row(tok, head) + col0;
#pragma unroll
      for (int j = 0; j < kPairs; ++j) {
        float o0, o1;
        const int col = pair(j, o0, o1);
        *reinterpret_cast<u32*>(dst + col) = pack2<OE>(bad ? nan : o0 * inv, bad ? nan : o1 * inv);
      }
      if (lse_writer) this->write_lse(tok, head, lse);
    } else {
      const i64 slot = this->partial_slot(tok, head);
      float* dst = p.partial_o + slot * kDV + col0;
#pragma unroll
      for (int j = 0; j < kPairs; ++j) {
        float o0, o1;
        const int col = pair(j, o0, o1);
        *reinterpret_cast<float2*>(dst + col) = make_float2(bad ? nan : o0 * inv, bad ? nan : o1 * inv);
      }
      if (lse_writer) p.partial_lse[slot] = lse;
    }
  }
};

}  // namespace flashjit::decode
