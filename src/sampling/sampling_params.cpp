#include "deepinfer/sampling_params.h"

#include <cmath>

#include "core/status.h"

namespace deepinfer {

namespace {
constexpr ErrorCode kBad = ErrorCode::kInvalidArgument;

void check_token_id(const char* field, int32_t id, int vocab_size) {
  DI_CHECK(id >= 0, kBad, "{} contains token id {}, which is negative", field, id);
  DI_CHECK(vocab_size < 0 || id < vocab_size, kBad,
           "{} contains token id {}, outside the vocabulary [0, {})", field, id, vocab_size);
}
}  // namespace

void SamplingParams::validate(int vocab_size) const {
  DI_CHECK(n == 1, ErrorCode::kUnsupported, "n = {} is not supported (only n = 1)", n);
  // Written as !(x ok) so NaN fails too.
  DI_CHECK(temperature >= 0.0f && std::isfinite(temperature), kBad,
           "temperature must be a finite value >= 0, got {}", temperature);
  DI_CHECK(top_p > 0.0f && top_p <= 1.0f, kBad, "top_p must be in (0, 1], got {}", top_p);
  DI_CHECK(top_k >= -1, kBad, "top_k must be -1 (disabled), 0 (disabled) or positive, got {}",
           top_k);
  DI_CHECK(min_p >= 0.0f && min_p <= 1.0f, kBad, "min_p must be in [0, 1], got {}", min_p);
  DI_CHECK(presence_penalty >= -2.0f && presence_penalty <= 2.0f, kBad,
           "presence_penalty must be in [-2, 2], got {}", presence_penalty);
  DI_CHECK(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f, kBad,
           "frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  DI_CHECK(repetition_penalty > 0.0f && std::isfinite(repetition_penalty), kBad,
           "repetition_penalty must be a finite value > 0, got {}", repetition_penalty);
  DI_CHECK(min_tokens >= 0, kBad, "min_tokens must be >= 0, got {}", min_tokens);
  if (max_tokens) {
    // vLLM requires at least one token; 0 would still sample one in a decode step.
    DI_CHECK(*max_tokens >= 1, kBad, "max_tokens must be at least 1, got {}", *max_tokens);
    DI_CHECK(min_tokens <= *max_tokens, kBad, "min_tokens ({}) must be <= max_tokens ({})",
             min_tokens, *max_tokens);
  }
  if (logprobs) {
    DI_CHECK(*logprobs >= -1, kBad, "logprobs must be >= -1 (-1 = whole vocabulary), got {}",
             *logprobs);
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    DI_CHECK(!stop[i].empty(), kBad, "stop[{}] is an empty string", i);
  }
  for (int32_t id : stop_token_ids) check_token_id("stop_token_ids", id, vocab_size);
  for (const auto& [id, bias] : logit_bias) {
    check_token_id("logit_bias", id, vocab_size);
    DI_CHECK(!std::isnan(bias), kBad, "logit_bias[{}] is NaN", id);
  }
}

}  // namespace deepinfer
