// Logits processors: in-place edits of one fp32 logits row from a sequence's history.
//
// Order (vLLM v1 Sampler.forward): min_tokens mask, logit_bias, then penalties (repetition,
// frequency, presence). Temperature, min_p, top_k and top_p come later, in the sampler.
#pragma once

#include <cstdint>
#include <span>

#include "deepinfer/sampling_params.h"

namespace deepinfer::sampling {

// What the processors (and the stop checks) need to know about one sequence.
struct TokenContext {
  std::span<const int32_t> prompt_token_ids;
  std::span<const int32_t> output_token_ids;  // generated so far, before the token being sampled
  std::span<const int32_t> eos_token_ids;     // the model's EOS ids
};

// While output_token_ids.size() < min_tokens: sets the logits of the EOS ids (unless ignore_eos:
// EOS does not stop then) and of stop_token_ids to -inf.
void apply_min_tokens(std::span<float> logits, const SamplingParams& params,
                      const TokenContext& ctx);

// logits[id] += bias for each logit_bias entry.
void apply_logit_bias(std::span<float> logits, const SamplingParams& params);

// vLLM semantics:
//   repetition (tokens in prompt or output, each once):  x > 0 ? x / r : x * r
//   frequency / presence (output tokens only):           x -= f * count + p * (count > 0)
void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     const TokenContext& ctx);

// All of the above, in the documented order. Token ids outside the row throw kInvalidArgument.
void apply_logits_processors(std::span<float> logits, const SamplingParams& params,
                             const TokenContext& ctx);

}  // namespace deepinfer::sampling
