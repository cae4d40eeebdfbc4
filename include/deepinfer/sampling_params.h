// Per-request sampling parameters, with vLLM's field names and defaults
// (vllm/sampling_params.py), except that the seed is `seq_seed`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer {

struct SamplingParams {
  // Number of completions per prompt. Only 1 is supported for now.
  int n = 1;

  // Temperature below kGreedyTemperature (vLLM's _SAMPLING_EPS) means greedy: argmax of the
  // processed logits; top_k / top_p / min_p and the seed are then unused.
  float temperature = 1.0f;
  // Nucleus sampling: keep the smallest most-probable set whose mass is >= top_p. In (0, 1].
  float top_p = 1.0f;
  // Keep the top_k most probable tokens; 0 or -1 disables.
  int top_k = 0;
  // Drop tokens whose probability is below min_p * (the top token's probability). In [0, 1].
  float min_p = 0.0f;

  // Key of the counter-based RNG. Unset: the engine draws one at admission, so a preempted and
  // resumed request keeps its draws.
  std::optional<uint64_t> seq_seed;

  // OpenAI penalties on generated tokens, in [-2, 2].
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Multiplicative penalty on tokens seen in the prompt or output; > 0, 1 disables.
  float repetition_penalty = 1.0f;
  // Token id -> value added to its logit.
  std::map<int32_t, float> logit_bias;

  // EOS and stop_token_ids are masked, and stop strings are not matched, until this many tokens
  // have been generated.
  int min_tokens = 0;
  // Unset: generate until EOS / stop or the end of the context.
  std::optional<int> max_tokens = 16;
  // Stop strings: generation ends at the first one; excluded from the text unless
  // include_stop_str_in_output.
  std::vector<std::string> stop;
  // Stop tokens: generation ends when one is sampled; the token stays in the output ids.
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;

  // Log-probabilities of the top `logprobs` tokens plus the sampled one; -1 = whole vocabulary;
  // unset = none (and no cumulative logprob).
  std::optional<int> logprobs;
  bool skip_special_tokens = true;

  static constexpr float kGreedyTemperature = 1e-5f;
  bool greedy() const { return temperature < kGreedyTemperature; }

  // Throws deepinfer::Error (kInvalidArgument, or kUnsupported for n != 1) naming the field and
  // its value. Token ids are range-checked when vocab_size >= 0.
  void validate(int vocab_size = -1) const;
};

}  // namespace deepinfer
