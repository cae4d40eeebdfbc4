// RoPE frequencies against values computed with transformers' formulas by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "model/deepseek_v4/rope.h"

using namespace deepinfer;

TEST(Rope, DefaultFrequencies) {
  RopeConfig r;
  r.theta = 10000.0;
  const auto f = deepseek_v4::rope_inv_freq(r, 8);
  ASSERT_EQ(f.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], 1.0 / std::pow(10000.0, 2.0 * i / 8), 1e-7);
}

TEST(Rope, YarnBlendsInterpolatedAndExtrapolated) {
  RopeConfig r;
  r.type = "yarn";
  r.theta = 160000.0;
  r.factor = 16.0;
  r.original_max_position_embeddings = 256;
  r.beta_fast = 32;
  r.beta_slow = 1;
  const int dim = 16;
  const auto f = deepseek_v4::rope_inv_freq(r, dim);
  // low = floor(16*ln(256/(32*2pi))/(2 ln 160000)) = 0, high = ceil(16*ln(256/(2pi))/(2 ln 160000))
  const double high = std::ceil(dim * std::log(256 / (2 * M_PI)) / (2 * std::log(160000.0)));
  for (int i = 0; i < dim / 2; ++i) {
    const double base = std::pow(160000.0, 2.0 * i / dim);
    const double ramp = std::clamp(i / high, 0.0, 1.0);
    const double expect = (1 / (16 * base)) * ramp + (1 / base) * (1 - ramp);
    EXPECT_NEAR(f[i], expect, 1e-6 * expect) << i;
  }
  r.type = "longrope";
  EXPECT_THROW(deepseek_v4::rope_inv_freq(r, dim), Error);
}
