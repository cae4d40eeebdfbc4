#include "engine/scheduler.h"

#include <algorithm>

#include "core/status.h"

namespace deepinfer {

const char* step_kind_name(StepKind k) {
  switch (k) {
    case StepKind::kIdle:
      return "idle";
    case StepKind::kPrefill:
      return "prefill";
    case StepKind::kDecode:
      return "decode";
    case StepKind::kPlaceholder:
      return "placeholder";
  }
  return "?";
}

int64_t StepPlan::num_tokens() const {
  int64_t n = 0;
  for (const auto& s : seqs) n += s.count;
  return n;
}

Scheduler::Scheduler(SchedulerConfig config, StateMemory& memory, PrefillVote& vote)
    : config_(config), memory_(memory), vote_(vote) {
  DI_CHECK(config.max_prefill_tokens > 0, ErrorCode::kInvalidArgument,
           "max_prefill_tokens must be positive (got {})", config.max_prefill_tokens);
  DI_CHECK(config.max_decode_seqs > 0, ErrorCode::kInvalidArgument,
           "max_num_seqs must be positive (got {})", config.max_decode_seqs);
}

void Scheduler::add(Sequence* seq) {
  DI_CHECK(memory_.bytes_for(seq->num_tokens()) <= memory_.budget_bytes(),
           ErrorCode::kInvalidArgument,
           "a sequence of {} tokens needs {} bytes of state, more than the whole budget of {}",
           seq->num_tokens(), memory_.bytes_for(seq->num_tokens()), memory_.budget_bytes());
  seq->status = SeqStatus::kWaiting;
  seq->arrival_order = next_arrival_++;
  seq->waiting_since_step = step_;
  waiting_.push_back(seq);
}

void Scheduler::finish(Sequence* seq) {
  if (seq->status == SeqStatus::kFinished) return;
  seq->status = SeqStatus::kFinished;
  finished_.push_back(seq);
}

StepPlan Scheduler::schedule() {
  ++step_;
  StepPlan plan;
  // Release what finished during the last step before planning, so its memory is reusable now.
  for (Sequence* seq : finished_) {
    memory_.free(seq->id);
    std::erase(running_, seq);
    std::erase(waiting_, seq);
    plan.freed.push_back(seq);
  }
  finished_.clear();

  const bool can_decode = config_.engine_type != EngineType::kPrompt && !running_.empty();
  const bool can_prefill = config_.engine_type != EngineType::kCompletion && !waiting_.empty();
  if (can_prefill && (!can_decode || want_prefill()) && plan_prefill(plan)) {
    plan.kind = StepKind::kPrefill;
    decode_steps_since_prefill_ = 0;
    return plan;
  }
  if (can_decode) {
    plan_decode(plan);
    plan.kind = plan.seqs.empty() ? StepKind::kIdle : StepKind::kDecode;
    ++decode_steps_since_prefill_;
    return plan;
  }
  plan.kind = vote_.others_busy() ? StepKind::kPlaceholder : StepKind::kIdle;
  return plan;
}

bool Scheduler::want_prefill() {
  const bool local = !waiting_.empty();
  if (decode_steps_since_prefill_ >= config_.prefill_any_attempt_interval) return vote_.any(local);
  if (decode_steps_since_prefill_ >= config_.prefill_attempt_interval) return vote_.all(local);
  return false;
}

bool Scheduler::plan_prefill(StepPlan& plan) {
  int64_t budget = config_.max_prefill_tokens;
  std::vector<Sequence*> completed;
  for (Sequence* seq : waiting_) {
    // First come, first served: a sequence that does not fit blocks the ones behind it.
    if (!memory_.holds(seq->id) && !memory_.allocate(seq->id, seq->num_tokens())) break;
    const int64_t remaining = seq->num_tokens() - seq->num_computed;
    const int64_t count = std::min(remaining, budget);
    const bool done = count == remaining;
    plan.seqs.push_back({seq, seq->num_computed, count, done});
    seq->num_computed += count;
    budget -= count;
    if (done) completed.push_back(seq);
    if (budget == 0) break;
  }
  for (Sequence* seq : completed) {
    std::erase(waiting_, seq);
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
  }
  return !plan.seqs.empty();
}

void Scheduler::plan_decode(StepPlan& plan) {
  // Round-robin over the running sequences when there are more than a step can take.
  const size_t n = std::min<size_t>(running_.size(), config_.max_decode_seqs);
  std::vector<Sequence*> chosen;
  for (size_t i = 0; i < n; ++i)
    chosen.push_back(running_[(decode_rotation_ + i) % running_.size()]);
  decode_rotation_ = (decode_rotation_ + n) % std::max<size_t>(running_.size(), 1);
  // Oldest first, so that when memory runs out the newest sequences give way.
  std::sort(chosen.begin(), chosen.end(), [](const Sequence* a, const Sequence* b) {
    return a->arrival_order < b->arrival_order;
  });
  for (Sequence* seq : chosen) {
    if (seq->status != SeqStatus::kRunning) continue;  // preempted earlier in this loop
    if (seq->final_token_pending) continue;            // ends with the token being sampled
    bool fits = memory_.grow(seq->id, seq->num_computed + 1);
    while (!fits) {
      Sequence* victim = *std::max_element(
          running_.begin(), running_.end(),
          [](const Sequence* a, const Sequence* b) { return a->arrival_order < b->arrival_order; });
      preempt(victim, plan);
      if (victim == seq) break;
      fits = memory_.grow(seq->id, seq->num_computed + 1);
    }
    if (!fits) continue;
    DI_ASSERT(seq->num_computed < seq->num_tokens());
    plan.seqs.push_back({seq, seq->num_computed, 1, true});
    seq->num_computed += 1;
  }
}

void Scheduler::preempt(Sequence* seq, StepPlan& plan) {
  memory_.free(seq->id);
  std::erase(running_, seq);
  seq->num_computed = 0;  // recompute: the next prefill feeds prompt + generated tokens again
  seq->status = SeqStatus::kWaiting;
  seq->waiting_since_step = step_;
  ++seq->num_preemptions;
  waiting_.push_front(seq);
  plan.preempted.push_back(seq);
}

}  // namespace deepinfer
