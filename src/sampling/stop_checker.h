// When a sequence stops: token conditions (EOS, stop_token_ids, length) and stop strings matched
// incrementally on the detokenized text, across token boundaries.
//
// Text lengths and offsets are in bytes of UTF-8. A stop string (valid UTF-8) can only match at
// character boundaries of valid UTF-8 text, so truncation and hold-back never split a character.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "deepinfer/sampling_params.h"

namespace deepinfer::sampling {

enum class FinishReason { kStop, kLength };

// "stop" / "length", as in OpenAI and vLLM outputs.
const char* finish_reason_name(FinishReason reason);

// vLLM's stop_reason: none (EOS, length), the stop token id, or the stop string.
using StopReason = std::variant<std::monostate, int32_t, std::string>;

struct Finish {
  FinishReason reason = FinishReason::kStop;
  StopReason stop_reason;
};

// Token conditions after `token` was appended as output number `num_output_tokens` (1-based),
// the sequence now holding `num_tokens` tokens (prompt + output). In order:
//   num_tokens >= max_model_len (when > 0)           -> length (always: the context is full)
//   num_output_tokens < min_tokens                   -> continue
//   token is an EOS id and !ignore_eos               -> stop, no stop_reason
//   token in stop_token_ids                          -> stop, stop_reason = token
//   num_output_tokens >= max_tokens (when set)       -> length
// The token that stops the sequence stays in its output ids (vLLM).
std::optional<Finish> check_token_stop(const SamplingParams& params,
                                       std::span<const int32_t> eos_token_ids, int32_t token,
                                       int64_t num_output_tokens, int64_t num_tokens,
                                       int64_t max_model_len);

struct StopStringMatch {
  size_t stop_index = 0;   // into the stop list
  size_t position = 0;     // where the match starts in the text
  size_t truncate_to = 0;  // text length to keep: position (+ its length if included)
};

// The earliest stop-string occurrence that ends inside the last `new_chars` bytes of `text`
// (earlier ends were checked by previous calls); at equal starts the earlier list entry wins.
std::optional<StopStringMatch> find_stop_string(std::string_view text, size_t new_chars,
                                                std::span<const std::string> stop,
                                                bool include_stop_str_in_output);

// Trailing bytes of `text` that must not be streamed yet: the longest suffix that is a proper
// prefix of some stop string. 0 with include_stop_str_in_output (the text is emitted either way).
size_t stop_hold_back(std::string_view text, std::span<const std::string> stop,
                      bool include_stop_str_in_output);

// Per-sequence incremental stop-string state: feed detokenized deltas, stream what it releases.
class StopStringTracker {
 public:
  explicit StopStringTracker(const SamplingParams& params);

  struct Update {
    std::string released;                    // new text safe to stream
    std::optional<std::string> stop_string;  // set when a stop string completed
  };

  // Appends the text of the latest token(s); num_output_tokens counts outputs including them.
  // As vLLM, stop strings are matched only once num_output_tokens > min_tokens (but a match may
  // start in earlier text). After a match the text is truncated and the tracker is stopped.
  Update append(std::string_view delta, int64_t num_output_tokens);

  // When the sequence finishes for another reason: releases the held-back tail.
  std::string flush();

  const std::string& text() const { return text_; }  // output text (truncated at a stop)
  size_t released() const { return released_; }      // bytes of text() already released
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stop_;
  bool include_ = false;
  int64_t min_tokens_ = 0;
  std::string text_;
  size_t checked_ = 0;  // stop strings ending within text_[0, checked_) were already ruled out
  size_t released_ = 0;
  bool stopped_ = false;
};

}  // namespace deepinfer::sampling
