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
  const ModelWeights& weights() const { return weights_; }
  SequenceState new_state() const { return SequenceState::create(config_, backend_); }

  // One sequence's part of a batched forward.
  struct BatchItem {
    std::span<const int32_t> ids;  // the next tokens of the sequence
    SequenceState* state = nullptr;
    // Which of its rows come back as logits: none (a prompt chunk that samples nothing), the
    // last fed token, or every fed token.
    enum class Logits { kNone, kLast, kAll } logits = Logits::kLast;
    // When given (I32 [1] on the backend's device), the last id is read from here in stream
    // order and ids.back() is ignored: the token the previous step sampled, which the host does
    // not know yet (zero-overhead scheduling). A sampler writes only valid ids there.
    TensorView last_id = {};
  };

  // Feeds every item's tokens through its state in one batched forward and returns fp32 logits
  // on the host: the requested rows of each item, in item order ([rows, vocab]). Dense work runs
  // over all rows at once; attention and compressors per sequence. Ids and states are validated
  // before any state is touched; if the forward itself fails, the states are unusable and must
  // be dropped.
  Tensor forward_batch(std::span<const BatchItem> items) { return run(items, true); }
  // The same with the logits left on the backend's device ([rows, vocab]), for a sampler that
  // runs there; nothing in the call waits for the device.
  Tensor forward_batch_on_device(std::span<const BatchItem> items) { return run(items, false); }
  // One sequence, logits for every fed token: [ids.size(), vocab].
  Tensor forward(std::span<const int32_t> ids, SequenceState& state);

 private:
  Tensor run(std::span<const BatchItem> items, bool logits_to_host);

  ModelConfig config_;
  ModelWeights weights_;
  Backend& backend_;
};

}  // namespace deepinfer::deepseek_v4
