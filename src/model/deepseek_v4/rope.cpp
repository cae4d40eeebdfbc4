#include "model/deepseek_v4/rope.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"

namespace deepinfer::deepseek_v4 {

std::vector<float> rope_inv_freq(const RopeConfig& rope, int rope_dims) {
  DI_CHECK(rope_dims > 0 && rope_dims % 2 == 0, ErrorCode::kInvalidArgument,
           "rope dimension {} must be positive and even", rope_dims);
  const int half = rope_dims / 2;
  const double base = rope.theta;
  std::vector<float> inv(half);
  // transformers computes base ** (arange(0, dim, 2) / dim) in fp32.
  std::vector<float> pos_freqs(half);
  for (int i = 0; i < half; ++i)
    pos_freqs[i] = std::pow(static_cast<float>(base), static_cast<float>(2 * i) / rope_dims);
  if (rope.type == "default") {
    for (int i = 0; i < half; ++i) inv[i] = 1.0f / pos_freqs[i];
    return inv;
  }
  DI_CHECK(rope.type == "yarn", ErrorCode::kUnsupported,
           "rope_type '{}' is not supported (default and yarn are)", rope.type);
  DI_CHECK(rope.attention_factor == 1.0, ErrorCode::kUnsupported,
           "yarn attention_factor {} != 1.0 is not supported (DeepSeek-V4 uses 1.0)",
           rope.attention_factor);
  // YaRN: blend interpolated and extrapolated frequencies with a linear ramp over the dims whose
  // rotation count at the original context lies between beta_slow and beta_fast.
  const double dim = rope_dims;
  auto correction_dim = [&](double rotations) {
    return dim * std::log(rope.original_max_position_embeddings / (rotations * 2 * M_PI)) /
           (2 * std::log(base));
  };
  double low = std::floor(correction_dim(rope.beta_fast));
  double high = std::ceil(correction_dim(rope.beta_slow));
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float extrapolated = 1.0f / pos_freqs[i];
    const float interpolated = 1.0f / (static_cast<float>(rope.factor) * pos_freqs[i]);
    inv[i] = interpolated * (1.0f - extrapolation_factor) + extrapolated * extrapolation_factor;
  }
  return inv;
}

}  // namespace deepinfer::deepseek_v4
