// Random weights generated straight onto the backend's device (`deepinfer bench
// --random-weights`): a DeepSeek-V4 model of a make-random preset's shapes without writing or
// reading a checkpoint, so full-size layer shapes load in seconds.
//
// Values follow make-random's distributions (random_checkpoint.h). Weight matrices (embedding,
// head, projections, router gate, experts) are created with Backend::empty in the backend's
// weight dtype and filled on the device by Backend::fill_random, uniform with make-random's mean
// and standard deviation (N(0, 1/in) becomes U(-sqrt(3/in), sqrt(3/in))); each matrix (each
// compressor series, each stacked expert tensor) has its own stream keyed by the seed and its
// name. Small parameters (norms, mHC, sinks, ape, router bias) and tid2eid are generated on the
// host and are exactly the values a make-random checkpoint of the same seed holds (norms rounded
// to bf16 as make-random stores them), so hash routing sees valid, distinct expert ids.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bench/random_checkpoint.h"
#include "io/model_config.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::bench {

class RandomWeightSource final : public deepseek_v4::WeightSource {
 public:
  // mxfp4_experts: the routed experts as MXFP4 (mxfp4_experts() below) where the backend takes
  // them; else every matrix in the backend's weight dtype.
  RandomWeightSource(const ModelConfig& config, uint64_t seed, bool mxfp4_experts = false);

  bool has(const std::string& name) const override;
  Tensor param(const std::string& name, const std::vector<int64_t>& shape) const override;
  Tensor ints(const std::string& name, const std::vector<int64_t>& shape) const override;
  std::vector<Tensor> matrix_blocks(Backend& backend, const std::string& name, int64_t rows,
                                    int64_t cols, int parts) const override;
  Tensor experts(Backend& backend, int layer, const std::string& leaf, int64_t E, int64_t rows,
                 int64_t cols) const override;
  // Random e2m1 codes (fill_random, every code equally likely) on the stream experts() uses, and
  // one scale for the whole matrix: the power of two that brings the codes' RMS (sqrt(8.5625))
  // nearest make-random's standard deviation.
  bool mxfp4_experts(Backend& backend, int layer, const std::string& leaf, int64_t E, int64_t rows,
                     int64_t cols, Tensor* data, Tensor* scales) const override;

  // The fill_random seed of a device-filled tensor (a matrix's row block, or a layer's stacked
  // experts `layers.L.ffn.experts.<leaf>`), and its range.
  uint64_t tensor_seed(const std::string& name, int part) const;
  static void uniform_range(const std::string& name, const std::vector<int64_t>& shape, float* lo,
                            float* hi);

 private:
  // Throws kInvalidArgument unless `name` is a tensor of the config with this shape.
  void check(const std::string& name, const std::vector<int64_t>& shape) const;
  // The checks and uniform range of a layer's stacked expert matrix `leaf` (w1, w2 or w3).
  void expert_range(int layer, const std::string& leaf, int64_t E, int64_t rows, int64_t cols,
                    float* lo, float* hi) const;

  int num_experts_ = 0;
  uint64_t seed_ = 0;
  bool mxfp4_experts_ = false;
  std::map<std::string, std::vector<int64_t>> shapes_;  // every tensor of the config
};

// A model of the preset's shapes (preset_model_config) with random weights on the backend;
// returns once the device has written them all.
std::unique_ptr<deepseek_v4::Model> make_random_model(const PresetOptions& preset, uint64_t seed,
                                                      Backend& backend, bool mxfp4_experts = false);

}  // namespace deepinfer::bench
