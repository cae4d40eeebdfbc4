#include "sampling/stop_checker.h"

#include <algorithm>
#include <limits>

#include "core/status.h"

namespace deepinfer::sampling {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
  }
  return "unknown";
}

std::optional<Finish> check_token_stop(const SamplingParams& params,
                                       std::span<const int32_t> eos_token_ids, int32_t token,
                                       int64_t num_output_tokens, int64_t num_tokens,
                                       int64_t max_model_len) {
  if (max_model_len > 0 && num_tokens >= max_model_len) return Finish{FinishReason::kLength, {}};
  if (num_output_tokens < params.min_tokens) return std::nullopt;
  if (!params.ignore_eos &&
      std::find(eos_token_ids.begin(), eos_token_ids.end(), token) != eos_token_ids.end()) {
    return Finish{FinishReason::kStop, {}};
  }
  const auto& stops = params.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
    return Finish{FinishReason::kStop, StopReason{token}};
  }
  if (params.max_tokens && num_output_tokens >= *params.max_tokens) {
    return Finish{FinishReason::kLength, {}};
  }
  return std::nullopt;
}

std::optional<StopStringMatch> find_stop_string(std::string_view text, size_t new_chars,
                                                std::span<const std::string> stop,
                                                bool include_stop_str_in_output) {
  new_chars = std::min(new_chars, text.size());
  if (new_chars == 0) return std::nullopt;
  const size_t old_size = text.size() - new_chars;
  std::optional<StopStringMatch> best;
  for (size_t i = 0; i < stop.size(); ++i) {
    const std::string& s = stop[i];
    if (s.empty()) continue;
    // Starting here or later means ending after old_size, i.e. inside the new text.
    const size_t from = old_size + 1 > s.size() ? old_size + 1 - s.size() : 0;
    const size_t pos = text.find(s, from);
    if (pos == std::string_view::npos) continue;
    if (!best || pos < best->position) {
      best = StopStringMatch{i, pos, pos + (include_stop_str_in_output ? s.size() : 0)};
    }
  }
  return best;
}

size_t stop_hold_back(std::string_view text, std::span<const std::string> stop,
                      bool include_stop_str_in_output) {
  if (include_stop_str_in_output) return 0;
  size_t hold = 0;
  for (const std::string& s : stop) {
    // Longest k < |s| with text ending in s[0, k); only k > hold can raise the answer.
    for (size_t k = std::min(s.size() - (s.empty() ? 0 : 1), text.size()); k > hold; --k) {
      if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

StopStringTracker::StopStringTracker(const SamplingParams& params)
    : stop_(params.stop),
      include_(params.include_stop_str_in_output),
      min_tokens_(params.min_tokens) {}

StopStringTracker::Update StopStringTracker::append(std::string_view delta,
                                                    int64_t num_output_tokens) {
  DI_ASSERT(!stopped_);
  text_.append(delta);
  Update up;
  if (num_output_tokens > min_tokens_) {
    if (auto m = find_stop_string(text_, text_.size() - checked_, stop_, include_)) {
      // Held-back text guarantees the match starts at or after what was already released.
      DI_ASSERT(m->truncate_to >= released_);
      text_.resize(m->truncate_to);
      up.released = text_.substr(released_);
      up.stop_string = stop_[m->stop_index];
      released_ = text_.size();
      checked_ = text_.size();
      stopped_ = true;
      return up;
    }
  }
  // Stops ending here are ruled out: either absent or matched too early (min_tokens).
  checked_ = text_.size();
  const size_t safe = text_.size() - stop_hold_back(text_, stop_, include_);
  if (safe > released_) {
    up.released = text_.substr(released_, safe - released_);
    released_ = safe;
  }
  return up;
}

std::string StopStringTracker::flush() {
  std::string rest = text_.substr(released_);
  released_ = text_.size();
  return rest;
}

}  // namespace deepinfer::sampling
