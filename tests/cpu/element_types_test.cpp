// The host table of element types: sizes, names and conversions against values worked out by
// hand from each format's definition (bf16/fp16: IEEE; e4m3/e5m2: OCP fp8).
#include "generator/element_types.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace flashjit {
namespace {

std::uint32_t enc(DType d, float f) { return element_type(d).encode(f); }
float dec(DType d, std::uint32_t b) { return element_type(d).decode(b); }

TEST(ElementTypes, SizesNamesAndPanels) {
  EXPECT_EQ(element_type(DType::bf16).bytes, 2);
  EXPECT_EQ(element_type(DType::e4m3).bytes, 1);
  EXPECT_EQ(element_type(DType::fp32).bytes, 4);
  EXPECT_STREQ(element_type(DType::e5m2).name, "e5m2");
  EXPECT_STREQ(element_type(DType::fp16).ptx, "f16");
  // Swizzled panels: 128 bytes where a row fills them, else 64 (fp8 rows of 64 or 192 columns).
  EXPECT_EQ(panel_elements(DType::bf16, 64), 64);
  EXPECT_EQ(panel_elements(DType::bf16, 192), 64);
  EXPECT_EQ(panel_elements(DType::e4m3, 256), 128);
  EXPECT_EQ(panel_elements(DType::e4m3, 64), 64);
  EXPECT_EQ(panel_elements(DType::e5m2, 192), 64);
  // One tensor-core step covers 32 bytes of K whatever the type.
  for (DType d : {DType::bf16, DType::fp16, DType::e4m3, DType::e5m2})
    EXPECT_EQ(element_type(d).mma_k * element_type(d).bytes, 32) << to_string(d);
  EXPECT_TRUE(is_float8(DType::e5m2));
  EXPECT_FALSE(is_float8(DType::bf16));
}

TEST(ElementTypes, SixteenBitConversionsRoundToNearestEven) {
  EXPECT_EQ(enc(DType::bf16, 1.0f), 0x3f80u);
  EXPECT_EQ(enc(DType::fp16, 1.0f), 0x3c00u);
  EXPECT_EQ(enc(DType::fp16, 65520.f), 0x7c00u);  // halfway above 65504: rounds to inf
  EXPECT_EQ(dec(DType::fp16, 0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(enc(DType::bf16, 1.0f + std::ldexp(1.0f, -8)), 0x3f80u);  // tie to even
  EXPECT_EQ(enc(DType::bf16, 1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82u);  // tie to even (up)
  EXPECT_TRUE(std::isnan(dec(DType::bf16, enc(DType::bf16, std::nanf("")))));
}

TEST(ElementTypes, E4m3) {
  EXPECT_EQ(enc(DType::e4m3, 1.0f), 0x38u);
  EXPECT_EQ(enc(DType::e4m3, -0.5f), 0xb0u);
  EXPECT_EQ(enc(DType::e4m3, 448.f), 0x7eu);
  EXPECT_EQ(enc(DType::e4m3, 1e6f), 0x7eu);    // saturates
  EXPECT_EQ(enc(DType::e4m3, -1e6f), 0xfeu);
  EXPECT_EQ(enc(DType::e4m3, std::numeric_limits<float>::infinity()), 0x7eu);
  EXPECT_EQ(enc(DType::e4m3, std::ldexp(1.0f, -9)), 0x01u);  // smallest subnormal
  EXPECT_EQ(enc(DType::e4m3, std::ldexp(1.0f, -11)), 0x00u); // a quarter of it: rounds to 0
  EXPECT_EQ(enc(DType::e4m3, 1.0625f), 0x38u);  // halfway 1.0 .. 1.125: even code
  EXPECT_EQ(enc(DType::e4m3, 1.1875f), 0x3au);  // halfway 1.125 .. 1.25: even code
  EXPECT_EQ(enc(DType::e4m3, 1.07f), 0x39u);
  EXPECT_TRUE(std::isnan(dec(DType::e4m3, 0x7f)));
  EXPECT_TRUE(std::isnan(dec(DType::e4m3, 0xff)));
  EXPECT_EQ(dec(DType::e4m3, 0x7e), 448.f);
  EXPECT_EQ(dec(DType::e4m3, 0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(dec(DType::e4m3, 0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(dec(DType::e4m3, 0xb0), -0.5f);
}

TEST(ElementTypes, E5m2) {
  EXPECT_EQ(enc(DType::e5m2, 1.0f), 0x3cu);
  EXPECT_EQ(enc(DType::e5m2, 57344.f), 0x7bu);
  EXPECT_EQ(enc(DType::e5m2, 1e9f), 0x7bu);  // saturates
  EXPECT_EQ(enc(DType::e5m2, std::ldexp(1.0f, -16)), 0x01u);
  EXPECT_EQ(dec(DType::e5m2, 0x7c), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(dec(DType::e5m2, 0x7d)));
  EXPECT_EQ(dec(DType::e5m2, 0x3d), 1.25f);
  EXPECT_EQ(dec(DType::e5m2, 0xc0), -2.f);
}

TEST(ElementTypes, Fp8RoundTripsEveryFiniteCode) {
  for (DType d : {DType::e4m3, DType::e5m2})
    for (std::uint32_t code = 0; code < 256; ++code) {
      const float f = dec(d, code);
      if (!std::isfinite(f)) continue;
      const std::uint32_t back = enc(d, f);
      if (code == 0x80) EXPECT_EQ(back, 0x80u) << "negative zero keeps its sign";
      else EXPECT_EQ(back, code) << to_string(d) << " code " << code;
    }
}

TEST(ElementTypes, Fp8ComputesInTheRopeTypeElseBf16) {
  DTypes d;
  d.qkv = DType::fp16;
  EXPECT_EQ(compute_dtype(d, 0), DType::fp16);
  d.qkv = DType::e4m3;
  EXPECT_EQ(compute_dtype(d, 0), DType::bf16);
  d.rope = DType::fp16;
  EXPECT_EQ(compute_dtype(d, 64), DType::fp16);
  d.rope = DType::e4m3;
  EXPECT_EQ(compute_dtype(d, 64), DType::bf16);
}

TEST(ElementTypes, LoadAndStoreAreLittleEndian) {
  unsigned char b[2] = {0, 0};
  store_element(element_type(DType::bf16), 1.0f, b);
  EXPECT_EQ(b[0], 0x80);
  EXPECT_EQ(b[1], 0x3f);
  EXPECT_EQ(load_element(element_type(DType::bf16), b), 1.0f);
}

}  // namespace
}  // namespace flashjit
