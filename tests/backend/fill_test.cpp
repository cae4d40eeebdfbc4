// fill_random on the CPU: the values are exactly the formula of backend.h (restated here from
// the spec), do not depend on the thread split, and cover [lo, hi] uniformly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/status.h"

namespace deepinfer {
namespace {

// The spec of Backend::fill_random, written out independently of the backend's code.
uint64_t spec_bits(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float spec_value(uint64_t seed, uint64_t i, float lo, float hi) {
  const float u = static_cast<float>(spec_bits(seed, i) >> 40) / 16777216.0f;
  return std::fma(hi - lo, u, lo);
}

uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

TEST(FillRandom, IsTheSplitMix64Stream) {
  // SplitMix64 from state 0: its first outputs are the published test vector.
  EXPECT_EQ(spec_bits(0, 0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(spec_bits(0, 1), 0x6E789E6AA1B965F4ull);
  auto b = make_cpu_backend();
  Tensor t = b->empty({2});
  b->fill_random(t, 0, 0.0f, 1.0f);
  EXPECT_EQ(t.data_as<float>()[0], static_cast<float>(0xE220A8u) / 16777216.0f);
  EXPECT_EQ(t.data_as<float>()[1], static_cast<float>(0x6E789Eu) / 16777216.0f);
}

TEST(FillRandom, F32MatchesTheFormulaBitForBit) {
  auto b = make_cpu_backend();
  for (const uint64_t seed :
       {uint64_t{0}, uint64_t{1}, uint64_t{0xDEADBEEFCAFEull}, ~uint64_t{0}}) {
    for (const auto& [lo, hi] : {std::pair{-1.0f, 1.0f}, std::pair{-0.0270633f, 0.0270633f},
                                 std::pair{0.9f, 1.1f}, std::pair{3.0f, 3.0f}}) {
      Tensor t = b->empty({37, 29});
      b->fill_random(t, seed, lo, hi);
      for (int64_t i = 0; i < t.numel(); ++i)
        ASSERT_EQ(bits_of(t.data_as<float>()[i]), bits_of(spec_value(seed, i, lo, hi)))
            << "seed " << seed << " i " << i;
    }
  }
}

TEST(FillRandom, Bf16IsTheRoundedF32) {
  auto b = make_cpu_backend();
  Tensor t = b->empty({5, 1001}, DType::kBF16);
  b->fill_random(t, 42, -0.5f, 0.25f);
  for (int64_t i = 0; i < t.numel(); ++i)
    ASSERT_EQ(t.data_as<uint16_t>()[i], f32_to_bf16(spec_value(42, i, -0.5f, 0.25f))) << i;
}

TEST(FillRandom, Fp4BytesAreTheHashesTopBytes) {
  auto b = make_cpu_backend();
  Tensor t = b->empty({3, 70002}, DType::kFP4E2M1);  // 105,003 bytes: several parallel chunks
  b->fill_random(t, 7, -6.f, 6.f);
  int64_t count[16] = {};
  for (int64_t j = 0; j < t.numel() / 2; ++j) {
    const uint8_t v = t.data_as<uint8_t>()[j];
    ASSERT_EQ(v, static_cast<uint8_t>(spec_bits(7, j) >> 56)) << j;
    ++count[v & 15];
    ++count[v >> 4];
  }
  for (int64_t c : count) EXPECT_NEAR(static_cast<double>(c) / t.numel(), 1.0 / 16, 0.005);
  // Every code or nothing; whole bytes.
  EXPECT_THROW(b->fill_random(t, 7, -1.f, 1.f), Error);
  EXPECT_THROW(b->fill_random(b->empty({3}, DType::kFP4E2M1), 7, -6.f, 6.f), Error);
}

TEST(FillRandom, IndicesAreRelativeToTheView) {
  auto b = make_cpu_backend();
  Tensor t = b->empty({10, 8});
  b->fill_random(t.view().slice_rows(3, 7), 9, -1.0f, 1.0f);
  for (int64_t i = 0; i < 32; ++i)
    ASSERT_EQ(t.data_as<float>()[24 + i], spec_value(9, i, -1.0f, 1.0f)) << i;
}

TEST(FillRandom, DeterministicAndIndependentOfTheThreadSplit) {
  auto b = make_cpu_backend();
  const int64_t n = (int64_t{1} << 20) + 3;  // many parallel chunks, with a ragged end
  Tensor a = b->empty({n}), c = b->empty({n}), d = b->empty({n});
  b->fill_random(a, 5, -2.0f, 2.0f);
  b->fill_random(c, 5, -2.0f, 2.0f);
  b->fill_random(d, 6, -2.0f, 2.0f);
  EXPECT_EQ(std::memcmp(a.data_as<float>(), c.data_as<float>(), n * 4), 0);
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) same += a.data_as<float>()[i] == d.data_as<float>()[i];
  EXPECT_LT(same, n / 1000);
  for (int64_t i : {int64_t{0}, int64_t{65535}, int64_t{65536}, n - 1})
    EXPECT_EQ(a.data_as<float>()[i], spec_value(5, i, -2.0f, 2.0f)) << i;
}

TEST(FillRandom, IsUniformOverTheRange) {
  auto b = make_cpu_backend();
  const int64_t n = 1 << 20;
  Tensor t = b->empty({n});
  const float lo = -3.0f, hi = 5.0f;
  b->fill_random(t, 123, lo, hi);
  double sum = 0, sq = 0;
  float mn = hi, mx = lo;
  std::vector<int64_t> hist(16, 0);
  for (int64_t i = 0; i < n; ++i) {
    const float v = t.data_as<float>()[i];
    sum += v;
    sq += double(v) * v;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    ++hist[std::min<int64_t>(15, static_cast<int64_t>((v - lo) / (hi - lo) * 16))];
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 1.0, 0.01);
  EXPECT_NEAR(var, 64.0 / 12.0, 0.02);
  EXPECT_GE(mn, lo);
  EXPECT_LE(mx, hi);
  for (int64_t h : hist) EXPECT_NEAR(static_cast<double>(h), n / 16.0, 0.02 * n / 16.0);
}

TEST(FillRandom, RejectsBadArguments) {
  auto b = make_cpu_backend();
  Tensor i32 = b->empty({4}, DType::kI32);
  EXPECT_THROW(b->fill_random(i32, 0, 0.0f, 1.0f), Error);
  Tensor f = b->empty({4});
  EXPECT_THROW(b->fill_random(f, 0, 1.0f, 0.0f), Error);
  EXPECT_THROW(b->fill_random(f, 0, 0.0f, INFINITY), Error);
  EXPECT_THROW(b->fill_random(f, 0, NAN, 1.0f), Error);
  Tensor empty = b->empty({0, 4});
  EXPECT_NO_THROW(b->fill_random(empty, 0, 0.0f, 1.0f));
}

}  // namespace
}  // namespace deepinfer
