// DeepSeek-V4 (V4 Flash / Pro layer shapes): the full forward, embeddings to logits, written
// once against the backend op interface.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "backend/backend.h"
#include "io/model_config.h"
#include "model/deepseek_v4/state.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::deepseek_v4 {

class Model {
 public:
  Model(ModelConfig config, ModelWeights weights, Backend& backend);
  // Reads config.json and the safetensors weights of a checkpoint directory.
  static std::unique_ptr<Model> load(const std::string& dir, Backend& backend);

  const ModelConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  SequenceState new_state() const { return SequenceState::create(config_, backend_); }

  // Feeds `ids` (the next tokens of the sequence) through `state` and returns fp32 logits
  // [ids.size(), vocab] on the host. Ids are validated before the state is touched; if the
  // forward itself fails the state is unusable and must be dropped.
  Tensor forward(std::span<const int32_t> ids, SequenceState& state);

 private:
  ModelConfig config_;
  ModelWeights weights_;
  Backend& backend_;
};

}  // namespace deepinfer::deepseek_v4
