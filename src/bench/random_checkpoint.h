// Random DeepSeek-V4 checkpoints at real scale (`deepinfer make-random`): config.json for a preset
// (tiny = the bundled model's shapes, v4-flash, v4-pro), sharded safetensors with the official
// tensor names, model.safetensors.index.json, and the tokenizer when the vocabulary matches.
//
// Values: every element is a pure function of (seed, tensor name, flat index) through a
// counter-based RNG (Philox4x32-10; normals by inverse-CDF sampling from a 2^16-knot quantile
// table, tails cut at +-4.6 sigma), so the output does not depend on the thread count and a bf16
// and an fp8 checkpoint of one seed hold the same values before quantisation. Distributions keep
// activations O(1): matrices N(0, 1/in), the embedding N(0, 1), norms N(1, 0.05^2), mHC scales
// N(0.9, 0.05^2), sinks N(0.25, 0.1^2), ape / biases N(0, 0.1^2), tid2eid k distinct experts per
// row (uniform), so logits come out with a spread ~1.
//
// Storage: embedding, head and router gate in BF16 in every mode; mHC parameters, sinks, ape and
// router bias in F32; norms in BF16; tid2eid I64. Matrices: BF16 (bf16), or F8_E4M3 with an F32
// `.scale` of 128x128 blocks (fp8), or (mxfp4-experts) routed experts as packed e2m1 (I8
// [N, K/2], low nibble = even column) with an F8_E8M0 `.scale` [N, K/32] and the other matrices
// FP8 as in fp8 (the official V4 release's mix).
//
// Writing is streamed: shard headers are computed from the shapes up front, then each tensor is
// generated in chunks of rows by the thread pool and written at its offset; memory stays at a few
// chunks whatever the model size.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/model_config.h"

namespace deepinfer::bench {

enum class CheckpointDtype { kBf16, kFp8, kMxfp4Experts };
CheckpointDtype parse_checkpoint_dtype(const std::string& name);  // bf16 | fp8 | mxfp4-experts
const char* checkpoint_dtype_name(CheckpointDtype dtype);

struct PresetOptions {
  std::string preset = "tiny";  // tiny | v4-flash | v4-pro
  int num_layers = 0;           // 0: the preset's
  int num_experts = 0;          // 0: the preset's (top-k is capped at it)
  // Empty: the preset's schedule for num_layers. Else one per layer: sliding | csa | hca (or the
  // transformers names); sets num_layers when that is 0.
  std::vector<std::string> layer_types;
};

// The config.json of a preset. Throws kInvalidArgument for an unknown preset or bad overrides.
nlohmann::json preset_config(const PresetOptions& options);
// The same, parsed: the ModelConfig a checkpoint written for the preset loads with.
ModelConfig preset_model_config(const PresetOptions& options);

struct RandomCheckpointOptions {
  PresetOptions preset;
  CheckpointDtype dtype = CheckpointDtype::kBf16;
  uint64_t seed = 0;
  std::string out_dir;
  int64_t shard_bytes = int64_t{3} << 30;  // a shard closes before it would pass this
  // A checkpoint directory whose tokenizer files are copied when its config's vocab_size equals
  // the preset's (empty: no tokenizer).
  std::string tokenizer_from;
  int num_threads = 0;                          // 0: DEEPINFER_NUM_THREADS or all cores
  std::function<void(const std::string&)> log;  // progress lines (optional)
};

struct RandomCheckpointResult {
  int64_t bytes = 0;  // tensor bytes over all shards
  int64_t num_tensors = 0;
  double params = 0;
  std::vector<std::string> shards;  // file names
  bool tokenizer_copied = false;
  std::string tokenizer_note;  // why there is no tokenizer, when there is none
  double seconds = 0;
};

// Writes the checkpoint into out_dir (created if needed; existing model files are replaced).
RandomCheckpointResult write_random_checkpoint(const RandomCheckpointOptions& options);

// Elements [begin, begin + n) (row-major flat indices) of the random values of tensor `name`
// with logical shape `shape`, before any storage rounding. Integer tensors (tid2eid) are not
// covered here.
void random_tensor_values(const std::string& name, const std::vector<int64_t>& shape, uint64_t seed,
                          int64_t begin, int64_t n, float* out);

// The normal distribution tensor `name` of `shape` is drawn from (see the note at the top).
struct RandomInit {
  float mean = 0, std = 1;
};
RandomInit random_init(const std::string& name, const std::vector<int64_t>& shape);

// Rows [r0, r0 + nr) of the hash-routing table `name` ([vocab, k]): k distinct experts of
// num_experts per row, row-major into out[nr * k].
void random_tid2eid_rows(const std::string& name, uint64_t seed, int num_experts, int64_t k,
                         int64_t r0, int64_t nr, int64_t* out);

}  // namespace deepinfer::bench
