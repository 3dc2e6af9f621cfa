// How the decode split pass holds and multiplies K and V, by the cache's element type.
//
// 16-bit caches: Q, K and V are mma.sync operands as they are (sm80/warp_gemm.cuh).
//
// fp8 caches (e4m3, e5m2): K and V stay fp8 in shared memory (half the bytes of a tile, still
// copied with cp.async) and are widened to fp16 in registers after ldmatrix, which every GPU from
// sm_80 on runs: fp16 holds every e4m3 and e5m2 value exactly. The widening is bit placement:
// an fp8 byte in the high byte of a 16-bit lane is the fp16 of an e5m2 value, and, with the
// exponent and mantissa shifted right by one, the fp16 of an e4m3 value times 2^-8 (subnormals
// included). The 2^8 goes into the score and output scales (kValueFactor). On sm_89 and sm_90,
// e4m3 pairs widen with cvt.f16x2.e4m3x2 instead (exact values, one instruction a pair, kCvt).
//   K: a 16-byte chunk of a key row holds 16 head-dim values, one k-step of m16n8k16. ldmatrix
//   (b16) gives lane (g, t) the bytes d = 4t .. 4t + 3 of key g; the low pair is the B
//   fragment's first register (k = 2t, 2t + 1), the high pair its second (k = 2t + 8, 2t + 9). So
//   k slot s of a chunk is head-dim column q_column(s) below, and Q is stored (as fp16,
//   dequantised) with its columns in that order, which makes Q K^T the same sum.
//   V: ldmatrix.trans (b16) gives lane (g, t) the bytes of keys 2t, 2t + 1 at d = 2g, 2g + 1; the
//   even columns' pair and the odd columns' pair are two B fragments: one chunk of 16 columns is
//   two n-tiles of 8, the even columns' and the odd ones'. O's n-tile dt = 2c + parity therefore
//   holds columns 16c + 2n + parity (column_of below).
#pragma once

#include "common/element_traits.cuh"
#include "common/types.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/smem_tile.cuh"
#include "sm80/warp_gemm.cuh"

namespace flashjit::decode {

using sm80::LanePart;
using sm80::SmemTile;

// Two fp8 bytes of `x` (selector picks them into the high bytes of two 16-bit lanes) as fp16x2.
template <class E, u32 kSelector>
__device__ __forceinline__ u32 widen2(u32 x) {
  const u32 hi = __byte_perm(x, 0u, kSelector);
  if constexpr (SameType<E, e5m2_t>::value) return hi;
  else return (hi & 0x80008000u) | ((hi >> 1) & 0x3f803f80u);  // e4m3, times 2^-8
}

template <class E, class QTile, int kBN, int kDQK, int kDV, bool kFp8 = ElementTraits<E>::kBytes == 1>
struct KvOperands {
  using Operand = E;  // Q and P in shared memory and registers
  using KTile = SmemTile<kBN, kDQK>;
  using VTile = SmemTile<kBN, kDV>;
  static constexpr float kValueFactor = 1.f;
  static constexpr float kTokenPFactor = 1.f;  // (fp8 only)

  template <int kNT>
  __device__ __forceinline__ static void qk(float (&s)[1][kNT][4], const LanePart& lq, const LanePart& lk) {
    sm80::gemm_qk<E, QTile, KTile, 1, kNT>(s, lq, lk);
  }
  template <int kDT, int kPSteps>
  __device__ __forceinline__ static void pv(float (&o)[1][kDT][4], const u32 (&pa)[1][kPSteps][4], const LanePart& lv) {
    sm80::gemm_pv<E, VTile, 1, kDT, kPSteps>(o, pa, lv);
  }
  // The O column of accumulator element e (0, 1) of n-tile dt in lane quad t.
  __device__ __forceinline__ static constexpr int column_of(int dt, int t, int e) { return 8 * dt + 2 * t + e; }
};

template <class E, class QTile, int kBN, int kDQK, int kDV>
struct KvOperands<E, QTile, kBN, kDQK, kDV, true> {
  static_assert(kDQK % 32 == 0 && kDV % 32 == 0, "fp8 tiles take head dims in multiples of 32");
  using Operand = fp16_t;
  using KTile = SmemTile<kBN, kDQK / 2>;  // 16-bit units of two fp8 values
  using VTile = SmemTile<kBN, kDV / 2>;
  // e4m3 on sm_89 and sm_90: cvt.f16x2.e4m3x2 widens a pair exactly in one instruction, where the
  // bit placement takes three (and leaves the values times 2^-8). e5m2's placement is one byte
  // permute a pair already. sm_100a keeps the placement: its two-warp latent tile of V 256
  // spills 20 bytes with the conversions.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && __CUDA_ARCH__ < 1000
  static constexpr bool kCvt = SameType<E, e4m3_t>::value;
#else
  static constexpr bool kCvt = false;
#endif
  static constexpr float kValueFactor = SameType<E, e4m3_t>::value && !kCvt ? 256.f : 1.f;
  // Per-token V scales multiply P by each key's scale and this power of two before P V, which
  // keeps P in fp16's precise range (an e4m3 scale is about amax / 448, an e5m2 one amax /
  // 57344: P at most 0.57 / 1.14 amax); O then takes kValueFactor / kTokenPFactor.
  static constexpr float kTokenPFactor = SameType<E, e5m2_t>::value ? 65536.f : 256.f;

  // A key row's four fp8 bytes from ldmatrix (b16) as the B fragment's two fp16x2 words: bytes
  // 0, 1 (k slots 2t, 2t + 1) and 2, 3.
  __device__ __forceinline__ static void widen_k(u32 x, u32& lo, u32& hi) {
    if constexpr (kCvt) {
      widen4_f16<E>(x, lo, hi);
    } else {
      lo = widen2<E, 0x1404>(x);
      hi = widen2<E, 0x3424>(x);
    }
  }
  // Two keys' two columns from ldmatrix.trans (b16), bytes (key 2t: c, c + 1; key 2t + 1: c,
  // c + 1), as the even column's and the odd column's B words: bytes 0, 2 and 1, 3.
  __device__ __forceinline__ static void widen_v(u32 x, u32& even, u32& odd) {
    if constexpr (kCvt) {
      widen4_f16<E>(__byte_perm(x, 0u, 0x3120), even, odd);
    } else {
      even = widen2<E, 0x2404>(x);
      odd = widen2<E, 0x3414>(x);
    }
  }

  // Head-dim column (within a 16-column chunk) of Q's k slot s.
  __device__ __forceinline__ static constexpr int q_column(int s) {
    return s < 8 ? 4 * (s / 2) + s % 2 : 4 * ((s - 8) / 2) + 2 + s % 2;
  }

  template <int kNT>
  __device__ __forceinline__ static void qk(float (&s)[1][kNT][4], const LanePart& lq, const LanePart& lk) {
#pragma unroll
    for (int cp = 0; cp < KTile::kChunks / 2; ++cp) {  // chunks 2cp, 2cp + 1: k-steps 2cp, 2cp + 1
      u32 a0[4], a1[4];
      sm80::ldmatrix_x4(a0, QTile::ldm(lq, 4 * cp, 0));
      sm80::ldmatrix_x4(a1, QTile::ldm(lq, 4 * cp + 2, 0));
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        // (keys 0..7, chunk 2cp), (keys 0..7, chunk 2cp + 1), (keys 8..15, 2cp), (keys 8..15, 2cp + 1)
        u32 b[4];
        sm80::ldmatrix_x4(b, KTile::ldm(lk, 2 * cp, 16 * np));
        u32 k00, k01, k10, k11, k20, k21, k30, k31;
        widen_k(b[0], k00, k01);
        widen_k(b[1], k10, k11);
        widen_k(b[2], k20, k21);
        widen_k(b[3], k30, k31);
        if (cp == 0) {
          sm80::mma_16816_zero_c<fp16_t>(s[0][2 * np], a0, k00, k01);
          sm80::mma_16816_zero_c<fp16_t>(s[0][2 * np + 1], a0, k20, k21);
        } else {
          sm80::mma_16816<fp16_t>(s[0][2 * np], a0, k00, k01);
          sm80::mma_16816<fp16_t>(s[0][2 * np + 1], a0, k20, k21);
        }
        sm80::mma_16816<fp16_t>(s[0][2 * np], a1, k10, k11);
        sm80::mma_16816<fp16_t>(s[0][2 * np + 1], a1, k30, k31);
      }
    }
  }

  template <int kDT, int kPSteps>
  __device__ __forceinline__ static void pv(float (&o)[1][kDT][4], const u32 (&pa)[1][kPSteps][4], const LanePart& lv) {
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk)
#pragma unroll
      for (int cp = 0; cp < kDT / 4; ++cp) {
        // .trans: (keys 0..7, chunk 2cp), (keys 8..15, 2cp), (keys 0..7, 2cp + 1), (keys 8..15, 2cp + 1)
        u32 b[4];
        sm80::ldmatrix_x4_trans(b, VTile::ldm(lv, 2 * cp, 16 * kk));
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int c = 2 * cp + h;
          u32 even0, odd0, even1, odd1;
          widen_v(b[2 * h], even0, odd0);
          widen_v(b[2 * h + 1], even1, odd1);
          sm80::mma_16816<fp16_t>(o[0][2 * c], pa[0][kk], even0, even1);
          sm80::mma_16816<fp16_t>(o[0][2 * c + 1], pa[0][kk], odd0, odd1);
        }
      }
  }

  __device__ __forceinline__ static constexpr int column_of(int dt, int t, int e) {
    return 16 * (dt / 2) + 4 * t + 2 * e + dt % 2;
  }
};

// Q's columns in their own order (operands that keep K's columns in place).
struct NaturalColumns {
  __device__ __forceinline__ static constexpr int q_column(int s) { return s; }
};

// Q rows of an fp8 cache's step into the fp16 Q tile, dequantised (row scale) and in the k-slot
// order of KvOperands::q_column: one thread per 16-column chunk, synchronous (a few rows, once).
// row_ref(r) gives row r's pointer (null: zero-fill) and scale. The first kCols columns of the
// tile (all of them unless a 16-bit rope part follows). E is Q's stored type: fp8, or a 16-bit Q
// beside an fp8 cache (dtype.q), converted to Out (fp16: bf16 values past fp16's range saturate
// to infinity there) in Ops's column order (NaturalColumns: as stored).
template <class Ops, class QTile, int kThreads, class E, int kCols = QTile::kColCount, class Out = fp16_t,
          class RowRef>
__device__ __forceinline__ void load_q_fp8(u32 smem, const RowRef& row_ref, int tid) {
  static_assert(kCols % 16 == 0 && kCols <= QTile::kColCount, "whole 16-column groups of the tile");
  constexpr int kGroups = kCols / 16, kTotal = QTile::kRowCount * kGroups;
  // A thread's groups four at a time: their loads in flight together, then their conversions.
  constexpr int kBatch = 4, kLoads = int(sizeof(E));  // 16-byte loads of a group
#pragma unroll 1
  for (int i0 = tid; i0 < kTotal; i0 += kBatch * kThreads) {
    uint4 raw[kBatch][kLoads];
    float scale[kBatch];
    bool live[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = i0 + k * kThreads, r = i / kGroups, c = i % kGroups;
      const E* src = i < kTotal ? row_ref(r, scale[k]) : nullptr;
      live[k] = src != nullptr;
#pragma unroll
      for (int h = 0; h < kLoads; ++h)
        raw[k][h] = live[k] ? *reinterpret_cast<const uint4*>(src + 16 * c + 16 / kLoads * h) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = i0 + k * kThreads, r = i / kGroups, c = i % kGroups;
      if (kTotal % (kBatch * kThreads) != 0 && i >= kTotal) break;
      u32 w[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
      if (live[k]) {
        u32 words[4 * kLoads];
#pragma unroll
        for (int h = 0; h < kLoads; ++h) {
          words[4 * h] = raw[k][h].x;
          words[4 * h + 1] = raw[k][h].y;
          words[4 * h + 2] = raw[k][h].z;
          words[4 * h + 3] = raw[k][h].w;
        }
        float f[16];
#pragma unroll
        for (int d = 0; d < 16; ++d) {
          if constexpr (kLoads == 1) f[d] = to_float(E{u8((words[d / 4] >> (8 * (d % 4))) & 0xff)}) * scale[k];
          else f[d] = to_float(E{u16((words[d / 2] >> (16 * (d % 2))) & 0xffff)}) * scale[k];
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) w[j] = pack2<Out>(f[Ops::q_column(2 * j)], f[Ops::q_column(2 * j + 1)]);
      }
#pragma unroll
      for (int half = 0; half < 2; ++half)
        sm80::st_shared_16(smem + QTile::offset(r, 2 * c + half), w[4 * half], w[4 * half + 1], w[4 * half + 2],
                           w[4 * half + 3]);
    }
  }
}

}  // namespace flashjit::decode
