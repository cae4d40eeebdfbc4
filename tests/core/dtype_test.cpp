// Exhaustive checks of the small float formats and round-to-nearest-even conversions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "core/dtype.h"

using namespace deepinfer;

TEST(DType, Bf16AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float f = bf16_to_f32(static_cast<uint16_t>(c));
    EXPECT_EQ(std::bit_cast<uint32_t>(f), c << 16);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
    } else {
      EXPECT_EQ(f32_to_bf16(f), c) << c;
    }
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), f32_to_bf16(1.0f));
  // 1 + 3*2^-8 lies between 1+2^-7 (odd) and 1+2^-6 (even): the tie goes up.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))),
            1.0f + std::ldexp(1.0f, -7));
}

TEST(DType, F16AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float f = f16_to_f32(static_cast<uint16_t>(c));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), c) << c;
  }
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
}

TEST(DType, E4M3AllCodes) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const float f = e4m3_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(f)) {
      ++nans;
      EXPECT_EQ(c & 0x7F, 0x7F);
      continue;
    }
    EXPECT_EQ(f32_to_e4m3(f), c == 0x80 ? 0x80 : c) << c;  // -0 keeps its sign
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(f32_to_e4m3(1e6f), 0x7E);  // saturates
  EXPECT_EQ(f32_to_e4m3(-1e6f), 0xFE);
}

TEST(DType, E4M3RoundsToNearestEvenAtEveryMidpoint) {
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = e4m3_to_f32(static_cast<uint8_t>(c));
    const float hi = e4m3_to_f32(static_cast<uint8_t>(c + 1));
    const float mid = 0.5f * (lo + hi);
    EXPECT_EQ(f32_to_e4m3(mid), (c & 1) ? c + 1 : c) << c;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 1e9f)), c + 1);
  }
}

TEST(DType, E8M0AllCodes) {
  for (int c = 0; c < 255; ++c) {
    const float f = e8m0_to_f32(static_cast<uint8_t>(c));
    EXPECT_EQ(f, std::ldexp(1.0f, c - 127));
    EXPECT_EQ(f32_to_e8m0(f), c);
  }
  EXPECT_TRUE(std::isnan(e8m0_to_f32(0xFF)));
}

TEST(DType, E2M1AllCodes) {
  const float expected[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const float f = e2m1_to_f32(static_cast<uint8_t>(c));
    EXPECT_EQ(f, (c & 8) ? -expected[c & 7] : expected[c & 7]);
    EXPECT_EQ(f32_to_e2m1(f), c);
  }
  // Midpoints round to the even code; overflow saturates.
  EXPECT_EQ(f32_to_e2m1(2.5f), 0x4);
  EXPECT_EQ(f32_to_e2m1(3.5f), 0x6);
  EXPECT_EQ(f32_to_e2m1(5.0f), 0x6);
  EXPECT_EQ(f32_to_e2m1(0.25f), 0x0);
  EXPECT_EQ(f32_to_e2m1(0.75f), 0x2);
  EXPECT_EQ(f32_to_e2m1(100.0f), 0x7);
  EXPECT_EQ(f32_to_e2m1(-100.0f), 0xF);
}

TEST(DType, ConvertPackedFp4) {
  const uint8_t packed[2] = {0x21, 0xF7};  // low nibble first: 0.5, 1, 6, -6
  float out[4];
  convert_to_f32(DType::kFP4E2M1, packed, out, 4);
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], 6.0f);
  EXPECT_EQ(out[3], -6.0f);
  EXPECT_EQ(storage_bytes(DType::kFP4E2M1, 5), 3u);
}

TEST(DType, SafetensorsNames) {
  DType t;
  ASSERT_TRUE(dtype_from_safetensors("BF16", &t));
  EXPECT_EQ(t, DType::kBF16);
  ASSERT_TRUE(dtype_from_safetensors("F8_E4M3", &t));
  EXPECT_EQ(t, DType::kF8E4M3);
  ASSERT_TRUE(dtype_from_safetensors("F8_E8M0", &t));
  EXPECT_EQ(t, DType::kE8M0);
  EXPECT_FALSE(dtype_from_safetensors("F12", &t));
}
