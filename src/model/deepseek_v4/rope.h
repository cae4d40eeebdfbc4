// Rotary frequencies for DeepSeek-V4's two rope types ("main" for sliding layers, "compress" for
// CSA/HCA layers, their compressors and indexers), default or YaRN, as transformers computes them.
#pragma once

#include <vector>

#include "io/model_config.h"

namespace deepinfer::deepseek_v4 {

// inv_freq[i] for i in [0, rope_dims / 2). rope_dims = config.qk_rope_head_dim.
std::vector<float> rope_inv_freq(const RopeConfig& rope, int rope_dims);

}  // namespace deepinfer::deepseek_v4
