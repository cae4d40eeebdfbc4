// A random-weight model at V4-Flash layer shapes (hidden 4096, 64 heads of 512) with 16 routed
// experts, on the given backend: the model-level CUDA tests' subject.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/random_weights.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::cudatest {

inline std::unique_ptr<deepseek_v4::Model> random_v4_flash(Backend& backend,
                                                           std::vector<std::string> layer_types,
                                                           uint64_t seed) {
  bench::PresetOptions preset;
  preset.preset = "v4-flash";
  preset.num_experts = 16;
  preset.layer_types = std::move(layer_types);
  return bench::make_random_model(preset, seed, backend);
}

}  // namespace deepinfer::cudatest
