// Numeric types and conversions for device code. NVRTC is run without CUDA headers (faster, and no
// dependency on a toolkit include directory at run time), so 16-bit types are bit containers and
// conversions are single PTX instructions. element_traits.cuh has the per-type layout facts.
#pragma once

namespace flashjit {

using u8 = unsigned char;
using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;
using i64 = long long;

struct bf16_t { u16 bits; };
struct fp16_t { u16 bits; };
struct e4m3_t { u8 bits; };  // OCP fp8: 4 exponent bits, 3 mantissa bits, max 448
struct e5m2_t { u8 bits; };  // OCP fp8: 5 exponent bits, 2 mantissa bits, max 57344

enum class MaskKind { kNone, kCausal, kSlidingWindow };

// std::is_same without the standard headers (NVRTC compiles with none).
template <class A, class B> struct SameType { static constexpr bool value = false; };
template <class A> struct SameType<A, A> { static constexpr bool value = true; };
enum class ScaleKind { kNone, kPerTensor, kPerHead, kPerToken };

// Two floats -> one register holding two 16-bit values, `lo` in the low half.
template <class T> __device__ __forceinline__ u32 pack2(float lo, float hi);
template <> __device__ __forceinline__ u32 pack2<bf16_t>(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <> __device__ __forceinline__ u32 pack2<fp16_t>(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Four floats -> one register of four fp8 values, `b0` in the lowest byte; rounded to nearest,
// saturating at the type's largest finite value. sm_89 and later (cvt .e4m3x2 / .e5m2x2).
template <class T> __device__ __forceinline__ u32 pack4(float b0, float b1, float b2, float b3);
template <> __device__ __forceinline__ u32 pack4<e4m3_t>(float b0, float b1, float b2, float b3) {
  u32 r;
  asm("{\n.reg .b16 lo, hi;\ncvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\ncvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}" : "=r"(r) : "f"(b0), "f"(b1), "f"(b2), "f"(b3));
  return r;
}
template <> __device__ __forceinline__ u32 pack4<e5m2_t>(float b0, float b1, float b2, float b3) {
  u32 r;
  asm("{\n.reg .b16 lo, hi;\ncvt.rn.satfinite.e5m2x2.f32 lo, %2, %1;\ncvt.rn.satfinite.e5m2x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}" : "=r"(r) : "f"(b0), "f"(b1), "f"(b2), "f"(b3));
  return r;
}

// Four fp8 values of `x` (b0 in the lowest byte) as two fp16x2 words, exactly: lo holds b0, b1,
// hi b2, b3. sm_89 and later (cvt .f16x2.e4m3x2 / .e5m2x2).
template <class T> __device__ __forceinline__ void widen4_f16(u32 x, u32& lo, u32& hi);
template <> __device__ __forceinline__ void widen4_f16<e4m3_t>(u32 x, u32& lo, u32& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi) : "r"(x));
}
template <> __device__ __forceinline__ void widen4_f16<e5m2_t>(u32 x, u32& lo, u32& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e5m2x2 %0, l;\ncvt.rn.f16x2.e5m2x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi) : "r"(x));
}

// Two fp16 products of fp16x2 words, each rounded once.
__device__ __forceinline__ u32 mul_f16x2(u32 a, u32 b) {
  u32 r;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

__device__ __forceinline__ float to_float(bf16_t x) { return __uint_as_float(u32(x.bits) << 16); }
__device__ __forceinline__ float to_float(fp16_t x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}
__device__ __forceinline__ float to_float(float x) { return x; }
// fp8 by bit arithmetic, so every target (sm_80 has no fp8 conversions) decodes it the same way:
// e4m3 has no infinities and S.1111.111 is NaN; e5m2 is IEEE-like (a truncated fp16).
__device__ __forceinline__ float to_float(e4m3_t x) {
  const u32 b = x.bits, e = (b >> 3) & 0xf, m = b & 7, sign = (b & 0x80) << 24;
  if (e == 0xf && m == 7) return __int_as_float(0x7fc00000);
  const float mag = e == 0 ? float(m) * 0.001953125f : __int_as_float(int(((e + 120) << 23) | (m << 20)));
  return __int_as_float(__float_as_int(mag) | int(sign));
}
__device__ __forceinline__ float to_float(e5m2_t x) {
  return to_float(fp16_t{u16(u16(x.bits) << 8)});
}

template <class T> __device__ __forceinline__ T from_float(float f);
template <> __device__ __forceinline__ bf16_t from_float<bf16_t>(float f) {
  u16 b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return bf16_t{b};
}
template <> __device__ __forceinline__ fp16_t from_float<fp16_t>(float f) {
  u16 b;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return fp16_t{b};
}
template <> __device__ __forceinline__ float from_float<float>(float f) { return f; }

// 2^x on the SFU; inputs of -inf give +0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 2^x on the FMA pipe (FA4's exponential emulation), for a share of a softmax's exponentials so
// the SFU (16 a clock per SM) is not the only unit computing them. x = j + f with j = round(x)
// (the 1.5 * 2^23 trick keeps j in t's low mantissa bits) and f in [-0.5, 0.5]; 2^f is a cubic
// with p(0) = 1 exactly (relative error 1.0e-4, below bf16's half ulp), and j is added to its
// exponent field. x is clamped at -127, where j = -127 and f = 0 give the bits of +0: scores of
// -inf still give 0, and x in (-127, -126) gives subnormals.
__device__ __forceinline__ float exp2_fma(float x) {
  x = fmaxf(x, -127.f);
  const float t = __fadd_rn(x, 12582912.f);
  const float f = __fsub_rn(x, __fsub_rn(t, 12582912.f));
  const float p = fmaf(fmaf(fmaf(0.05500891f, f, 0.24221100f), f, 0.69328293f), f, 1.f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

template <class T> __host__ __device__ constexpr T ceil_div(T a, T b) { return (a + b - 1) / b; }
template <class T> __host__ __device__ constexpr T cmin(T a, T b) { return a < b ? a : b; }
template <class T> __host__ __device__ constexpr T cmax(T a, T b) { return a > b ? a : b; }

}  // namespace flashjit
