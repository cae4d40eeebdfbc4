// What generation returns, shaped like vLLM's RequestOutput / CompletionOutput.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace deepinfer {

// One token's log-probabilities: the sampled token and the requested top-k alternatives.
struct Logprob {
  float logprob = 0.0f;
  int rank = 0;  // 1 = most likely
  std::string decoded_token;
};
using TokenLogprobs = std::map<int32_t, Logprob>;

struct CompletionOutput {
  int index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  double cumulative_logprob = 0.0;
  std::optional<std::vector<TokenLogprobs>> logprobs;  // one entry per generated token
  std::optional<std::string> finish_reason;            // "stop", "length", "abort"
  // The stop string or stop token id that ended generation; empty on EOS or length.
  std::variant<std::monostate, std::string, int32_t> stop_reason;
};

struct RequestMetrics {
  double arrival_time = 0.0;  // seconds since the epoch
  double first_scheduled_time = 0.0;
  double first_token_time = 0.0;
  double finished_time = 0.0;
};

struct RequestOutput {
  std::string request_id;
  std::string prompt;
  std::vector<int32_t> prompt_token_ids;
  std::vector<CompletionOutput> outputs;
  bool finished = false;
  RequestMetrics metrics;
};

}  // namespace deepinfer
