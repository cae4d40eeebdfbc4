// The C++ scheduler. One call per engine step plans the step and releases finished sequences.
// Prefill and decode are separate step kinds, never mixed: a prefill step feeds prompt chunks
// (long prompts are split across steps within the prefill token budget), a decode step feeds one
// token for each running sequence. While sequences are decoding, prefill is attempted at
// DeepInfer's two voting points: every DEEPINFER_PREFILL_ATTEMPT_INTERVAL decode steps all ranks
// must agree, every DEEPINFER_PREFILL_ANY_ATTEMPT_INTERVAL one rank suffices. With nothing
// decoding, prefill runs at once. When state memory runs out during decode, the newest running
// sequence is preempted (its state dropped, recomputed on its next prefill); nothing is lost.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "deepinfer/engine_config.h"
#include "engine/prefill_vote.h"
#include "engine/sequence.h"
#include "kv/state_memory.h"

namespace deepinfer {

enum class StepKind { kIdle, kPrefill, kDecode, kPlaceholder };
const char* step_kind_name(StepKind k);

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int64_t begin = 0;    // first token fed this step
  int64_t count = 0;    // tokens fed this step
  bool sample = false;  // the last fed token's logits produce the next token
};

struct StepPlan {
  StepKind kind = StepKind::kIdle;
  std::vector<ScheduledSeq> seqs;
  std::vector<Sequence*> freed;      // finished sequences released by this call (recycle them)
  std::vector<Sequence*> preempted;  // running sequences sent back to waiting (drop their state)
  int64_t num_tokens() const;
};

struct SchedulerConfig {
  int64_t max_prefill_tokens = 8192;
  int max_decode_seqs = 256;
  int prefill_attempt_interval = 70;
  int prefill_any_attempt_interval = 100;
  EngineType engine_type = EngineType::kNormal;
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, StateMemory& memory, PrefillVote& vote);

  // Queues a new sequence (status kWaiting). Its total length must fit the state budget alone.
  void add(Sequence* seq);
  // Marks a sequence finished; its memory is released by the next schedule() call.
  void finish(Sequence* seq);
  // Plans the next step. Advances num_computed of the scheduled sequences, moves sequences whose
  // prompt completes to running, and releases finished ones.
  StepPlan schedule();

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  bool has_work() const { return !waiting_.empty() || !running_.empty() || !finished_.empty(); }
  int64_t step_count() const { return step_; }
  const StateMemory& memory() const { return memory_; }

 private:
  bool plan_prefill(StepPlan& plan);
  void plan_decode(StepPlan& plan);
  bool want_prefill();
  void preempt(Sequence* seq, StepPlan& plan);

  SchedulerConfig config_;
  StateMemory& memory_;
  PrefillVote& vote_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  std::vector<Sequence*> finished_;
  int64_t step_ = 0;
  int64_t decode_steps_since_prefill_ = 0;
  size_t decode_rotation_ = 0;
  uint64_t next_arrival_ = 0;
};

}  // namespace deepinfer
