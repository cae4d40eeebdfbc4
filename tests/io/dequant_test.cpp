#include "io/dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace deepinfer {
namespace {

// e4m3 codes with hand-decoded values: sign | exponent (bias 7) | 3-bit mantissa.
constexpr uint8_t kOne = 0x38;       // 2^0 * 1.0
constexpr uint8_t kOneHalf = 0x3C;   // 2^0 * 1.5
constexpr uint8_t kMinusTwo = 0xC0;  // -(2^1 * 1.0)
constexpr uint8_t kTiny = 0x01;      // subnormal 2^-9
constexpr uint8_t kMax = 0x7E;       // 448

TEST(Dequant, Fp8BlockScalesF32) {
  // 130 x 200: 2 x 2 blocks (128 + 2 rows, 128 + 72 columns).
  const int64_t rows = 130, cols = 200;
  std::vector<uint8_t> w(rows * cols, kOne);
  w[0] = kOneHalf;                // block (0, 0)
  w[5 * cols + 130] = kMinusTwo;  // block (0, 1)
  w[128 * cols + 3] = kTiny;      // block (1, 0)
  w[129 * cols + 199] = kMax;     // block (1, 1)
  const float scale[4] = {0.5f, 4.0f, 2.0f, 0.25f};
  std::vector<float> out(rows * cols);
  dequant_fp8_block(w.data(), rows, cols, 0, scale, DType::kF32, 2, out.data());
  EXPECT_EQ(out[0], 0.75f);
  EXPECT_EQ(out[1], 0.5f);
  EXPECT_EQ(out[5 * cols + 130], -8.0f);
  EXPECT_EQ(out[5 * cols + 127], 0.5f);
  EXPECT_EQ(out[128 * cols + 3], 2.0f / 512);
  EXPECT_EQ(out[128 * cols + 150], 0.25f);
  EXPECT_EQ(out[129 * cols + 199], 112.0f);

  // A row slice starting at row 127 uses block row 0 for its first row, 1 after.
  std::vector<float> part(3 * cols);
  dequant_fp8_block(w.data() + 127 * cols, 3, cols, 127, scale, DType::kF32, 2, part.data());
  EXPECT_EQ(part[0], 0.5f);
  EXPECT_EQ(part[cols + 3], 2.0f / 512);
  EXPECT_EQ(part[2 * cols + 199], 112.0f);
}

TEST(Dequant, Fp8BlockScalesE8M0AndBf16) {
  const int64_t rows = 2, cols = 130;
  std::vector<uint8_t> w(rows * cols, kOneHalf);
  const uint8_t e8m0[2] = {128, 125};  // 2, 1/4
  std::vector<float> out(rows * cols);
  dequant_fp8_block(w.data(), rows, cols, 0, e8m0, DType::kE8M0, 2, out.data());
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[cols + 129], 0.375f);
  const uint16_t bf16[2] = {f32_to_bf16(-0.5f), f32_to_bf16(3.0f)};
  dequant_fp8_block(w.data(), rows, cols, 0, bf16, DType::kBF16, 2, out.data());
  EXPECT_EQ(out[1], -0.75f);
  EXPECT_EQ(out[128], 4.5f);
}

TEST(Dequant, Fp8UnalignedScales) {
  // Scales straight out of a mapped file may sit at any address.
  std::vector<uint8_t> buf(1 + 4);
  const float s = 8.0f;
  std::memcpy(buf.data() + 1, &s, 4);
  const uint8_t w[2] = {kOne, kMinusTwo};
  float out[2];
  dequant_fp8_block(w, 1, 2, 0, buf.data() + 1, DType::kF32, 1, out);
  EXPECT_EQ(out[0], 8.0f);
  EXPECT_EQ(out[1], -16.0f);
}

TEST(Dequant, Mxfp4) {
  // One row of 64 values: two scale blocks. Low nibble = even column.
  // e2m1 codes: 0x1 = 0.5, 0x2 = 1, 0x5 = 3, 0x7 = 6, 0x9 = -0.5, 0xF = -6.
  std::vector<uint8_t> packed(2 * 32, 0x00);
  packed[0] = 0x71;                               // cols 0, 1: 0.5, 6
  packed[15] = 0x9F;                              // cols 30, 31: -6, -0.5
  packed[16] = 0x25;                              // cols 32, 33: 3, 1
  packed[32] = 0x12;                              // row 1, cols 0, 1: 1, 0.5
  const uint8_t scale[4] = {127, 129, 125, 127};  // row 0: 1, 4; row 1: 1/4, 1
  std::vector<float> out(2 * 64);
  dequant_mxfp4(packed.data(), 2, 64, scale, 2, out.data());
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], 6.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[30], -6.0f);
  EXPECT_EQ(out[31], -0.5f);
  EXPECT_EQ(out[32], 12.0f);
  EXPECT_EQ(out[33], 4.0f);
  EXPECT_EQ(out[64], 0.25f);
  EXPECT_EQ(out[65], 0.125f);
}

TEST(Dequant, Mxfp4PartialBlock) {
  // 40 columns: a full block of 32 and a partial one of 8.
  std::vector<uint8_t> packed(20, 0x22);  // all 1.0
  const uint8_t scale[2] = {126, 130};    // 1/2, 8
  std::vector<float> out(40);
  dequant_mxfp4(packed.data(), 1, 40, scale, 2, out.data());
  EXPECT_EQ(out[31], 0.5f);
  EXPECT_EQ(out[32], 8.0f);
  EXPECT_EQ(out[39], 8.0f);
}

}  // namespace
}  // namespace deepinfer
