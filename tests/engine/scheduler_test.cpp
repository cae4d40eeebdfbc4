#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "core/status.h"
#include "engine/scheduler.h"

using namespace deepinfer;

namespace {

StateLayout small_layout() {
  StateLayout l;
  l.slot_bytes = 1000;
  l.page_bytes = 100;
  l.page_tokens = 4;
  return l;
}

struct Harness {
  StateMemory memory;
  SingleRankVote single;
  PrefillVote* vote;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;

  Harness(SchedulerConfig cfg, int64_t budget, PrefillVote* v = nullptr)
      : memory(small_layout(), budget), vote(v ? v : &single), sched(cfg, memory, *vote) {}

  Sequence* add(int64_t prompt_len) {
    auto s = std::make_unique<Sequence>();
    s->id = seqs.size() + 1;
    for (int64_t i = 0; i < prompt_len; ++i) s->tokens.push_back(static_cast<int32_t>(i + 2));
    s->num_prompt_tokens = prompt_len;
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }
  // Plans a step and plays the model + sampler: every sampled sequence gets one new token.
  StepPlan step() {
    StepPlan p = sched.schedule();
    for (const auto& s : p.seqs)
      if (s.sample) s.seq->tokens.push_back(42);
    return p;
  }
};

}  // namespace

TEST(Scheduler, ChunksLongPromptsWithinThePrefillBudget) {
  SchedulerConfig cfg;
  cfg.max_prefill_tokens = 10;
  Harness h(cfg, 1 << 20);
  Sequence* a = h.add(25);
  Sequence* b = h.add(5);
  StepPlan p1 = h.step();
  ASSERT_EQ(p1.kind, StepKind::kPrefill);
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.seqs[0].seq, a);
  EXPECT_EQ(p1.seqs[0].begin, 0);
  EXPECT_EQ(p1.seqs[0].count, 10);
  EXPECT_FALSE(p1.seqs[0].sample);
  StepPlan p2 = h.step();
  EXPECT_EQ(p2.seqs[0].begin, 10);
  EXPECT_EQ(p2.num_tokens(), 10);
  StepPlan p3 = h.step();
  ASSERT_EQ(p3.seqs.size(), 2u);
  EXPECT_EQ(p3.seqs[0].seq, a);
  EXPECT_EQ(p3.seqs[0].count, 5);
  EXPECT_TRUE(p3.seqs[0].sample);
  EXPECT_EQ(p3.seqs[1].seq, b);
  EXPECT_EQ(p3.seqs[1].count, 5);
  EXPECT_TRUE(p3.seqs[1].sample);
  EXPECT_LE(p3.num_tokens(), cfg.max_prefill_tokens);
  // Both prompts done: the next step decodes one token of each, never mixed with prefill.
  StepPlan p4 = h.step();
  ASSERT_EQ(p4.kind, StepKind::kDecode);
  ASSERT_EQ(p4.seqs.size(), 2u);
  for (const auto& s : p4.seqs) {
    EXPECT_EQ(s.count, 1);
    EXPECT_TRUE(s.sample);
    EXPECT_EQ(s.begin, s.seq->num_tokens() - 2);  // the token sampled last step
  }
}

TEST(Scheduler, NeverMixesPrefillAndDecode) {
  SchedulerConfig cfg;
  cfg.max_prefill_tokens = 8;
  cfg.prefill_attempt_interval = 3;
  cfg.prefill_any_attempt_interval = 5;
  Harness h(cfg, 1 << 20);
  h.add(4);
  for (int i = 0; i < 40; ++i) {
    if (i % 7 == 0) h.add(3 + i % 5);
    StepPlan p = h.step();
    for (const auto& s : p.seqs) {
      if (p.kind == StepKind::kDecode) {
        EXPECT_EQ(s.count, 1);
      }
      if (p.kind == StepKind::kPrefill) {
        EXPECT_LT(s.begin + s.count - 1, s.seq->num_prompt_tokens + s.seq->num_generated());
      }
    }
    EXPECT_LE(p.num_tokens(), cfg.max_prefill_tokens);
  }
}

TEST(Scheduler, PrefillsImmediatelyWhenNothingDecodes) {
  Harness h(SchedulerConfig{}, 1 << 20);
  h.add(3);
  EXPECT_EQ(h.step().kind, StepKind::kPrefill);
}

// A multi-rank vote where the other ranks never agree to an ALL vote but ANY passes locally.
struct DissentingVote : PrefillVote {
  int all_calls = 0, any_calls = 0;
  bool all(bool) override {
    ++all_calls;
    return false;
  }
  bool any(bool local) override {
    ++any_calls;
    return local;
  }
  bool others_busy() override { return false; }
};

TEST(Scheduler, NoRequestWaitsLongerThanTheAnyInterval) {
  SchedulerConfig cfg;
  cfg.prefill_attempt_interval = 7;
  cfg.prefill_any_attempt_interval = 10;
  DissentingVote vote;
  Harness h(cfg, 1 << 20, &vote);
  h.add(2);
  ASSERT_EQ(h.step().kind, StepKind::kPrefill);
  for (int round = 0; round < 3; ++round) {
    Sequence* late = h.add(2);
    int decode_steps = 0;
    for (;;) {
      StepPlan p = h.step();
      if (p.kind == StepKind::kPrefill) {
        EXPECT_EQ(p.seqs[0].seq, late);
        break;
      }
      ASSERT_EQ(p.kind, StepKind::kDecode);
      ++decode_steps;
      ASSERT_LE(decode_steps, cfg.prefill_any_attempt_interval);
    }
    EXPECT_EQ(decode_steps, cfg.prefill_any_attempt_interval);
  }
  EXPECT_GT(vote.all_calls, 0);  // the ALL voting point was tried (and refused) first
  EXPECT_GT(vote.any_calls, 0);
}

TEST(Scheduler, SingleRankPrefillsAtTheAllInterval) {
  SchedulerConfig cfg;
  cfg.prefill_attempt_interval = 5;
  Harness h(cfg, 1 << 20);
  h.add(2);
  h.step();
  h.add(2);
  int decode_steps = 0;
  while (h.step().kind == StepKind::kDecode) ++decode_steps;
  EXPECT_EQ(decode_steps, 5);
}

TEST(Scheduler, FreesFinishedSequencesInTheSameCall) {
  Harness h(SchedulerConfig{}, 1 << 20);
  Sequence* a = h.add(3);
  Sequence* b = h.add(3);
  h.step();
  EXPECT_TRUE(h.memory.holds(a->id));
  h.sched.finish(a);
  StepPlan p = h.step();
  ASSERT_EQ(p.freed.size(), 1u);
  EXPECT_EQ(p.freed[0], a);
  EXPECT_FALSE(h.memory.holds(a->id));
  ASSERT_EQ(p.kind, StepKind::kDecode);
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].seq, b);
  EXPECT_EQ(h.sched.num_running(), 1u);
}

TEST(Scheduler, PreemptsTheNewestAndResumesItByRecompute) {
  // Budget: two slots and three pages of 4 tokens: two 4-token prompts fit, growth does not.
  Harness h(SchedulerConfig{}, 2 * 1000 + 3 * 100);
  Sequence* a = h.add(4);
  Sequence* b = h.add(4);
  ASSERT_EQ(h.step().kind, StepKind::kPrefill);
  std::vector<Sequence*> preempted;
  for (int i = 0; i < 4 && preempted.empty(); ++i) {
    StepPlan p = h.step();
    preempted = p.preempted;
  }
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_EQ(preempted[0], b);  // the newer one gives way
  EXPECT_EQ(b->status, SeqStatus::kWaiting);
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_EQ(b->num_preemptions, 1);
  EXPECT_FALSE(h.memory.holds(b->id));
  const int64_t b_tokens = b->num_tokens();
  EXPECT_GT(b_tokens, 4);  // it keeps the tokens it generated: nothing is lost
  // Once a finishes, b comes back through a prefill of everything it had, then decodes on.
  h.sched.finish(a);
  StepPlan p = h.step();
  ASSERT_EQ(p.kind, StepKind::kPrefill);
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].seq, b);
  EXPECT_EQ(p.seqs[0].begin, 0);
  EXPECT_EQ(p.seqs[0].count, b_tokens);
  EXPECT_TRUE(p.seqs[0].sample);
  EXPECT_EQ(h.step().kind, StepKind::kDecode);
}

TEST(Scheduler, RoundRobinsWhenMoreSequencesRunThanAStepTakes) {
  SchedulerConfig cfg;
  cfg.max_decode_seqs = 2;
  Harness h(cfg, 1 << 20);
  for (int i = 0; i < 5; ++i) h.add(2);
  h.step();
  std::map<Sequence*, int> turns;
  for (int i = 0; i < 10; ++i) {
    StepPlan p = h.step();
    ASSERT_EQ(p.kind, StepKind::kDecode);
    ASSERT_EQ(p.seqs.size(), 2u);
    for (auto& s : p.seqs) turns[s.seq]++;
  }
  ASSERT_EQ(turns.size(), 5u);
  for (auto& [s, n] : turns) EXPECT_EQ(n, 4);
}

struct BusyPeers : PrefillVote {
  bool all(bool l) override { return l; }
  bool any(bool l) override { return l; }
  bool others_busy() override { return true; }
};

TEST(Scheduler, IdleRankTakesPlaceholderStepsWhileOthersWork) {
  BusyPeers vote;
  Harness h(SchedulerConfig{}, 1 << 20, &vote);
  EXPECT_EQ(h.step().kind, StepKind::kPlaceholder);
  Harness alone(SchedulerConfig{}, 1 << 20);
  EXPECT_EQ(alone.step().kind, StepKind::kIdle);
}

TEST(Scheduler, RejectsASequenceLargerThanTheWholeBudget) {
  Harness h(SchedulerConfig{}, 1000 + 2 * 100);
  EXPECT_THROW(h.add(100), Error);
}

TEST(Scheduler, PromptEnginesOnlyPrefill) {
  SchedulerConfig cfg;
  cfg.engine_type = EngineType::kPrompt;
  Harness h(cfg, 1 << 20);
  h.add(3);
  EXPECT_EQ(h.step().kind, StepKind::kPrefill);
  EXPECT_EQ(h.step().kind, StepKind::kIdle);
}

// Zero-overhead scheduling: a sequence whose token still being sampled ends it (max_tokens,
// max_model_len) has nothing left to decode and is skipped until it finishes; the others go on.
TEST(Scheduler, SkipsSequencesWhosePendingTokenEndsThem) {
  Harness h(SchedulerConfig{}, 1 << 20);
  Sequence* a = h.add(3);
  Sequence* b = h.add(3);
  h.step();  // prefill both
  a->final_token_pending = true;
  StepPlan p = h.step();
  ASSERT_EQ(p.kind, StepKind::kDecode);
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].seq, b);
  b->final_token_pending = true;
  p = h.step();
  EXPECT_EQ(p.kind, StepKind::kIdle) << "nothing left to decode until they finish";
  h.sched.finish(a);
  h.sched.finish(b);
  p = h.step();
  EXPECT_EQ(p.freed.size(), 2u);
  EXPECT_FALSE(h.sched.has_work());
}
