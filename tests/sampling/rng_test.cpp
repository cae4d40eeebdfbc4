#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "sampling/rng.h"

using namespace deepinfer::sampling;

// Random123 tests/kat_vectors, philox4x32 10: counter, key -> output.
static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0}) ==
              PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});

TEST(Philox, KnownAnswerVectors) {
  struct Kat {
    PhiloxCounter ctr;
    PhiloxKey key;
    PhiloxCounter out;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& k : kats) EXPECT_EQ(philox4x32_10(k.ctr, k.key), k.out);
}

TEST(Philox, SeedPositionStreamMapping) {
  const uint64_t seed = 0x299f31d0a4093822ull;
  const int64_t pos = 0x85a308d3243f6a88ll;
  EXPECT_EQ(philox_key(seed), (PhiloxKey{0xa4093822, 0x299f31d0}));
  EXPECT_EQ(philox_counter(pos, 7), (PhiloxCounter{0x243f6a88, 0x85a308d3, 7, 0}));
  EXPECT_EQ(philox_counter(-1, 0), (PhiloxCounter{0xffffffff, 0xffffffff, 0, 0}));
  EXPECT_EQ(random_bits(seed, pos, 7),
            philox4x32_10({0x243f6a88, 0x85a308d3, 7, 0}, {0xa4093822, 0x299f31d0}));
  // seed 0, position 0, stream 0 is the all-zero KAT: word 0 = 0x6627e8d5.
  EXPECT_EQ(uniform(0, 0), static_cast<float>(0x6627e8d5u >> 8) / 16777216.0f);
}

TEST(Philox, UnitFloatMapping) {
  EXPECT_EQ(u32_to_unit_float(0), 0.0f);
  EXPECT_EQ(u32_to_unit_float(0xff), 0.0f);  // low 8 bits ignored
  EXPECT_EQ(u32_to_unit_float(0x100), std::ldexp(1.0f, -24));
  EXPECT_EQ(u32_to_unit_float(0xffffffffu), 1.0f - std::ldexp(1.0f, -24));
  EXPECT_LT(u32_to_unit_float(0xffffffffu), 1.0f);
}

TEST(Philox, DrawsDifferAcrossPositionsSeedsStreams) {
  std::set<float> seen;
  for (int64_t pos = 0; pos < 1000; ++pos) seen.insert(uniform(42, pos));
  EXPECT_GT(seen.size(), 995u);  // 24-bit values: collisions are rare
  EXPECT_NE(uniform(42, 5), uniform(43, 5));
  EXPECT_NE(uniform(42, 5, kSampleStream), uniform(42, 5, kSpecAcceptStream));
  EXPECT_EQ(uniform(42, 5), uniform(42, 5));
  // Seeds differing only in the high word are distinct keys.
  EXPECT_NE(uniform(1, 0), uniform(1ull | (1ull << 32), 0));
}

TEST(Philox, UniformIsRoughlyUniform) {
  constexpr int kBins = 20, kN = 200000;
  std::vector<int> bins(kBins);
  double sum = 0;
  for (int i = 0; i < kN; ++i) {
    const float u = uniform(7, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    ++bins[static_cast<int>(u * kBins)];
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.005);
  double chi2 = 0;
  const double expect = static_cast<double>(kN) / kBins;
  for (int b : bins) chi2 += (b - expect) * (b - expect) / expect;
  EXPECT_LT(chi2, 50.0);  // 19 dof: the 99.99th percentile is about 48
}
