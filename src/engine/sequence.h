// A sequence as the scheduler sees it: its tokens, how many of them the model state has
// consumed, and where it is in its life. Sequences are pooled and recycled by the engine.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer {

enum class SeqStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t num_prompt_tokens = 0;
  int64_t num_computed = 0;  // tokens already fed through the model state
  SeqStatus status = SeqStatus::kWaiting;
  uint64_t arrival_order = 0;      // admission order; preemption takes the newest first
  int64_t waiting_since_step = 0;  // step counter when it (re)entered the waiting queue
  int num_preemptions = 0;
  int64_t request_index = -1;  // the engine's request slot
  // The last token is a placeholder for one being sampled (its value reaches the host a step
  // later under zero-overhead scheduling; the next decode reads it on the device).
  bool token_pending = false;
  // That pending token ends the sequence whatever it is (max_tokens, max_model_len): nothing
  // is left to decode.
  bool final_token_pending = false;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_generated() const { return num_tokens() - num_prompt_tokens; }

  void reset() {
    tokens.clear();
    num_prompt_tokens = num_computed = 0;
    status = SeqStatus::kWaiting;
    arrival_order = 0;
    waiting_since_step = 0;
    num_preemptions = 0;
    request_index = -1;
    token_pending = final_token_pending = false;
  }
};

}  // namespace deepinfer
