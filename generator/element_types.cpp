#include "generator/element_types.hpp"

#include "common/swizzle_panels.cuh"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace flashjit {

namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint32_t encode_bf16(float f) {
  std::uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}
float decode_bf16(std::uint32_t h) { return float_of((h & 0xffffu) << 16); }

std::uint32_t encode_fp16(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::int32_t exp = std::int32_t((u >> 23) & 0xff) - 127 + 15;
  std::uint32_t mant = u & 0x7fffffu;
  if (((u >> 23) & 0xff) == 0xff) return sign | 0x7c00u | (mant ? 0x200u : 0);
  if (exp >= 31) return sign | 0x7c00u;
  if (exp <= 0) {
    if (exp < -10) return sign;
    mant |= 0x800000u;
    const std::uint32_t shift = std::uint32_t(14 - exp);
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | half;
  }
  std::uint32_t half = sign | (std::uint32_t(exp) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return half;
}

float decode_fp16(std::uint32_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  if (exp == 0) {
    const float f = std::ldexp(float(mant), -24);
    return (h & 0x8000u) ? -f : f;
  }
  if (exp == 31) return float_of(sign | 0x7f800000u | (mant << 13));
  return float_of(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

// fp8 as OCP defines it: e4m3 (bias 7, no infinities, S.1111.111 is NaN, max 448) and e5m2
// (bias 15, IEEE-style infinities and NaNs, max 57344).
template <int kExpBits, int kMantBits, bool kIeeeSpecials>
struct Float8 {
  static constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  static constexpr std::uint32_t kExpMax = (1u << kExpBits) - 1;

  static float decode(std::uint32_t b) {
    const bool neg = b & 0x80u;
    const std::uint32_t e = (b >> kMantBits) & kExpMax, m = b & ((1u << kMantBits) - 1);
    float mag;
    if (kIeeeSpecials && e == kExpMax) {
      mag = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    } else if (!kIeeeSpecials && e == kExpMax && m == (1u << kMantBits) - 1) {
      mag = std::numeric_limits<float>::quiet_NaN();
    } else if (e == 0) {
      mag = std::ldexp(float(m), 1 - kBias - kMantBits);
    } else {
      mag = std::ldexp(1.f + float(m) / float(1u << kMantBits), int(e) - kBias);
    }
    return neg ? -mag : mag;
  }

  // The finite non-negative values in code order (codes 0x00 .. largest finite): increasing.
  static const std::array<float, 128>& magnitudes() {
    static const std::array<float, 128> t = [] {
      std::array<float, 128> a{};
      for (std::uint32_t c = 0; c < 128; ++c) a[c] = decode(c);
      return a;
    }();
    return t;
  }
  static constexpr std::uint32_t kMaxCode = kIeeeSpecials ? (kExpMax << kMantBits) - 1 : 0x7eu;

  // Nearest finite value, ties to the even code; beyond the largest, the largest (satfinite).
  static std::uint32_t encode(float f) {
    if (std::isnan(f)) return 0x7fu;
    const std::uint32_t sign = std::signbit(f) ? 0x80u : 0u;
    const float a = std::fabs(f);
    const auto& mag = magnitudes();
    if (a >= mag[kMaxCode]) return sign | kMaxCode;
    const auto hi = std::upper_bound(mag.begin(), mag.begin() + kMaxCode + 1, a);  // first > a
    std::uint32_t up = std::uint32_t(hi - mag.begin()), down = up - 1;
    const float dl = a - mag[down], du = mag[up] - a;
    const std::uint32_t code = dl < du ? down : du < dl ? up : (down % 2 == 0 ? down : up);
    return sign | code;
  }
};
using E4m3 = Float8<4, 3, false>;
using E5m2 = Float8<5, 2, true>;

std::uint32_t encode_fp32(float f) { return bits_of(f); }
float decode_fp32(std::uint32_t u) { return float_of(u); }

// CUtensorMapDataType values (cuda.h; runtime/tensor_map.cpp checks them at compile time).
constexpr int kTmaUint8 = 0, kTmaFloat16 = 6, kTmaFloat32 = 7, kTmaBfloat16 = 9;

const std::array<ElementType, 5> kTypes = {{
    {DType::bf16, "bf16", 2, "flashjit::bf16_t", "bf16", 16, kTmaBfloat16, "<u2", 1e-2, 3.3895313892515355e38,
     encode_bf16, decode_bf16},
    {DType::fp16, "fp16", 2, "flashjit::fp16_t", "f16", 16, kTmaFloat16, "<f2", 3e-3, 65504.0, encode_fp16,
     decode_fp16},
    {DType::e4m3, "e4m3", 1, "flashjit::e4m3_t", "e4m3", 32, kTmaUint8, "|u1", 3e-2, 448.0, E4m3::encode,
     E4m3::decode},
    {DType::e5m2, "e5m2", 1, "flashjit::e5m2_t", "e5m2", 32, kTmaUint8, "|u1", 6e-2, 57344.0, E5m2::encode,
     E5m2::decode},
    {DType::fp32, "fp32", 4, "float", "f32", 8, kTmaFloat32, "<f4", 1e-5, 3.4028234663852886e38, encode_fp32,
     decode_fp32},
}};

}  // namespace

const ElementType& element_type(DType d) {
  for (const auto& t : kTypes)
    if (t.id == d) return t;
  throw std::logic_error("element_type: unknown dtype");
}

bool is_float8(DType d) { return d == DType::e4m3 || d == DType::e5m2; }

int panel_elements(DType d, int columns) {
  const int bytes = element_type(d).bytes;
  return panel_bytes(columns * bytes) / bytes;
}

DType compute_dtype(const DTypes& d, int rope_columns) {
  if (!is_float8(d.qkv)) return d.qkv;
  if (rope_columns > 0 && d.rope && !is_float8(*d.rope)) return *d.rope;
  return DType::bf16;
}

float load_element(const ElementType& t, const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  std::uint32_t bits = 0;
  for (int i = 0; i < t.bytes; ++i) bits |= std::uint32_t(b[i]) << (8 * i);
  return t.decode(bits);
}

void store_element(const ElementType& t, float f, void* p) {
  const std::uint32_t bits = t.encode(f);
  auto* b = static_cast<unsigned char*>(p);
  for (int i = 0; i < t.bytes; ++i) b[i] = static_cast<unsigned char>(bits >> (8 * i));
}

}  // namespace flashjit
