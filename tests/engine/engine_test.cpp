// The engine end to end on golden fixtures: batching, chunked prefill, preemption and seeds must
// not change any request's tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/engine.h"

using namespace deepinfer;

namespace {

const std::string kFixture = std::string(DEEPINFER_SOURCE_DIR) + "/tests/data/golden/tiny-a";

// DEEPINFER_TEST_DEVICE=cuda runs the same tests on the GPU (tools/device/cuda_check.sh does).
std::string test_device() {
  const char* d = std::getenv("DEEPINFER_TEST_DEVICE");
  return d ? d : "cpu";
}

nlohmann::json fixture() {
  std::ifstream in(kFixture + "/fixture.json");
  return nlohmann::json::parse(in);
}

std::vector<int32_t> fixture_ids() {
  return fixture()["input_ids"].get<std::vector<int32_t>>();
}

// Greedy decoding of one prompt alone, token by token, straight through the model, through an
// engine on the test device with nothing else in it.
std::vector<int32_t> greedy_alone(const std::vector<int32_t>& prompt, int n);

// Runs every request to completion; returns token ids by request id.
std::map<std::string, std::vector<int32_t>> run_all(Engine& engine) {
  std::map<std::string, std::vector<int32_t>> done;
  while (engine.has_unfinished_requests())
    for (const RequestOutput& o : engine.step())
      if (o.finished) done[o.request_id] = o.outputs[0].token_ids;
  return done;
}

EngineConfig small_config(int64_t max_prefill_tokens, int64_t state_bytes, int64_t page_tokens) {
  EngineConfig c;
  c.model = kFixture;
  c.device = test_device();
  c.max_prefill_tokens = max_prefill_tokens;
  c.max_state_bytes = state_bytes;
  c.state_page_tokens = page_tokens;
  return c;
}

SamplingParams greedy(int n) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

std::vector<int32_t> greedy_alone(const std::vector<int32_t>& prompt, int n) {
  Engine engine(small_config(1, 1 << 28, 0));  // token by token, alone
  EngineRequest r;
  r.prompt_token_ids = prompt;
  r.params = greedy(n);
  const std::string id = engine.add_request(std::move(r));
  return run_all(engine).at(id);
}

}  // namespace

TEST(Engine, BatchedChunkedPreemptedGreedyMatchesAloneAndReference) {
  const auto fx = fixture();
  const std::vector<int32_t> ids = fx["input_ids"].get<std::vector<int32_t>>();
  const int ref_len = fx["greedy_prompt_len"].get<int>();
  const auto ref = fx["greedy_continuation"].get<std::vector<int32_t>>();
  ModelConfig mc = load_model_config(kFixture + "/config.json");
  const StateLayout layout = StateLayout::for_model(mc, 4, 16);
  // Two slots and five pages of 16 tokens: the 48-token prompt grows to 4 pages while the next
  // one is admitted, and its growth past 16 tokens preempts it (the newest); the largest
  // request (61 + 16 tokens = 5 pages) still fits alone.
  EngineConfig cfg = small_config(7, 2 * layout.slot_bytes + 5 * layout.page_bytes, 16);
  // Attempt prefill every 2 decode steps (default 70) so sequences run side by side.
  setenv("DEEPINFER_PREFILL_ATTEMPT_INTERVAL", "2", 1);
  Engine engine(cfg);
  const std::vector<int> lengths = {ref_len, 13, 30, 61, 5, 44};
  std::vector<std::string> rids;
  for (int len : lengths) {
    EngineRequest r;
    r.prompt_token_ids.assign(ids.begin(), ids.begin() + len);
    r.params = greedy(16);
    rids.push_back(engine.add_request(std::move(r)));
  }
  auto got = run_all(engine);
  unsetenv("DEEPINFER_PREFILL_ATTEMPT_INTERVAL");
  EXPECT_GT(engine.num_preemptions(), 0u) << "the budget was meant to force preemption";
  // transformers' greedy continuation (fp32): the CPU backend must match it; bf16 on a GPU can
  // flip near-ties, so there only self-consistency is checked.
  if (test_device() == "cpu") {
    EXPECT_EQ(got[rids[0]], ref) << "transformers' greedy continuation";
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    const std::vector<int32_t> prompt(ids.begin(), ids.begin() + lengths[i]);
    EXPECT_EQ(got[rids[i]], greedy_alone(prompt, 16)) << "prompt length " << lengths[i];
  }
  EXPECT_EQ(engine.state_memory().used_bytes(), 0) << "everything is released at the end";
}

TEST(Engine, SeededSamplingIsIndependentOfBatchOrderAndPreemption) {
  const std::vector<int32_t> ids = fixture_ids();
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  p.max_tokens = 12;
  p.ignore_eos = true;
  p.seq_seed = 1234;
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 21);

  // tight: companion prompts are 25 tokens (2 pages of 16, 3 once they decode past 32) and the
  // budget holds exactly three sequences, so decode growth preempts the newest one.
  auto run = [&](int companions, bool target_first, uint64_t shuffle_seed, bool tight) {
    ModelConfig mc = load_model_config(kFixture + "/config.json");
    const StateLayout layout = StateLayout::for_model(mc, 4, 16);
    Engine engine(
        small_config(256, tight ? 3 * (layout.slot_bytes + 2 * layout.page_bytes) : 1 << 28, 16));
    std::mt19937_64 rng(shuffle_seed);
    std::vector<EngineRequest> reqs;
    for (int i = 0; i < companions; ++i) {
      EngineRequest r;
      const int len = tight ? 25 : 3 + static_cast<int>(rng() % 60);
      for (int k = 0; k < len; ++k) r.prompt_token_ids.push_back(2 + static_cast<int>(rng() % 500));
      r.params.temperature = 0.5f + (rng() % 100) / 100.0f;
      r.params.max_tokens = 4 + static_cast<int>(rng() % 14);
      r.params.ignore_eos = true;
      reqs.push_back(std::move(r));
    }
    EngineRequest target;
    target.request_id = "target";
    target.prompt_token_ids = prompt;
    target.params = p;
    if (target_first)
      reqs.insert(reqs.begin(), std::move(target));
    else
      reqs.insert(reqs.begin() + static_cast<long>(rng() % (reqs.size() + 1)), std::move(target));
    for (auto& r : reqs) engine.add_request(std::move(r));
    auto out = run_all(engine);
    return std::make_pair(out.at("target"), engine.num_preemptions());
  };
  const auto alone = run(0, true, 1, false).first;
  ASSERT_EQ(alone.size(), 12u);
  EXPECT_EQ(run(1, false, 2, false).first, alone);
  EXPECT_EQ(run(7, false, 3, false).first, alone);
  EXPECT_EQ(run(7, true, 4, false).first, alone);
  EXPECT_EQ(run(32, false, 5, false).first, alone);
  const auto [preempted, n_preempt] = run(32, true, 6, true);
  EXPECT_GT(n_preempt, 0u);
  EXPECT_EQ(preempted, alone);
}

TEST(Engine, BadRequestsFailAloneAndNameTheProblem) {
  Engine engine(small_config(64, 1 << 28, 0));
  EngineRequest good;
  good.prompt_token_ids = {5, 6, 7};
  good.params = greedy(4);
  const std::string id = engine.add_request(good);

  auto expect_error = [&](EngineRequest r, const std::string& needle) {
    try {
      engine.add_request(std::move(r));
      FAIL() << "expected an error mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  EngineRequest bad_id = good;
  bad_id.prompt_token_ids = {5, 99999};
  expect_error(bad_id, "99999");
  EngineRequest empty = good;
  empty.prompt_token_ids.clear();
  expect_error(empty, "empty");
  EngineRequest too_long = good;
  too_long.prompt_token_ids.assign(engine.max_model_len(), 3);
  expect_error(too_long, "max_model_len");
  EngineRequest bad_params = good;
  bad_params.params.top_p = 1.5f;
  expect_error(bad_params, "top_p");
  EngineRequest text = good;
  text.prompt = "hello";  // the fixture has no tokenizer
  expect_error(text, "tokenizer");
  EngineRequest dup = good;
  dup.request_id = id;
  expect_error(dup, "already in use");

  auto out = run_all(engine);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[id].size(), 4u);
}

TEST(Engine, AbortFinishesOnlyThatRequest) {
  Engine engine(small_config(64, 1 << 28, 0));
  EngineRequest a, b;
  a.prompt_token_ids = b.prompt_token_ids = {5, 6, 7, 8};
  a.params = b.params = greedy(20);
  a.request_id = "a";
  b.request_id = "b";
  engine.add_request(a);
  engine.add_request(b);
  engine.step();
  engine.abort_request("a");
  std::map<std::string, RequestOutput> final;
  while (engine.has_unfinished_requests())
    for (auto& o : engine.step())
      if (o.finished) final[o.request_id] = o;
  EXPECT_EQ(final.count("a"), 0u);
  ASSERT_EQ(final.count("b"), 1u);
  EXPECT_EQ(final["b"].outputs[0].token_ids.size(), 20u);
  EXPECT_EQ(final["b"].outputs[0].finish_reason, "length");
}

TEST(Engine, PromptEnginesEndRequestsAfterTheirFirstToken) {
  EngineConfig cfg = small_config(64, 1 << 28, 0);
  cfg.engine_type = EngineType::kPrompt;
  Engine engine(cfg);
  EngineRequest r;
  r.prompt_token_ids = {5, 6, 7};
  r.params = greedy(10);
  const std::string id = engine.add_request(r);
  auto out = run_all(engine);
  ASSERT_EQ(out[id].size(), 1u);
  EXPECT_EQ(out[id], greedy_alone({5, 6, 7}, 1));
  cfg.engine_type = EngineType::kCompletion;
  EXPECT_THROW(Engine{cfg}, Error);
}

namespace {

// Every request's final output under one DEEPINFER_ZERO_OVERHEAD_SCHEDULING setting, and the
// number of steps whose outputs were empty while work was queued (the overlap's one-step lag).
struct ZosRun {
  std::map<std::string, RequestOutput> final;
  int steps = 0;
  bool first_step_returned_tokens = false;
};

ZosRun run_mixed_workload(bool zero_overhead, bool with_host_rows) {
  setenv("DEEPINFER_ZERO_OVERHEAD_SCHEDULING", zero_overhead ? "1" : "0", 1);
  setenv("DEEPINFER_PREFILL_ATTEMPT_INTERVAL", "3", 1);
  Engine engine(small_config(40, 1 << 28, 0));
  unsetenv("DEEPINFER_ZERO_OVERHEAD_SCHEDULING");
  unsetenv("DEEPINFER_PREFILL_ATTEMPT_INTERVAL");
  const std::vector<int32_t> ids = fixture_ids();
  const int V = engine.model_config().vocab_size;
  auto add = [&](const std::string& id, int len, SamplingParams p) {
    EngineRequest r;
    r.request_id = id;
    r.prompt_token_ids.assign(ids.begin(), ids.begin() + len);
    r.params = std::move(p);
    engine.add_request(std::move(r));
  };
  add("greedy", 17, greedy(9));
  SamplingParams pen;
  pen.temperature = 0.9f;
  pen.seq_seed = 7;
  pen.max_tokens = 14;
  pen.repetition_penalty = 1.3f;
  pen.frequency_penalty = 0.5f;
  pen.presence_penalty = 0.4f;
  pen.ignore_eos = true;
  add("penalties", 23, pen);  // its next params need the pending token's value
  SamplingParams eos;
  eos.temperature = 1.5f;
  eos.seq_seed = 11;
  eos.max_tokens = 30;
  eos.min_tokens = 3;
  add("eos", 9, eos);  // may stop early (unpredictably), at the earliest after 3 tokens
  SamplingParams stop = greedy(12);
  stop.stop_token_ids = {greedy_alone(std::vector<int32_t>(ids.begin(), ids.begin() + 30), 4)[3]};
  add("stop_token", 30, stop);
  SamplingParams masked = greedy(5);
  for (int t = 0; t < V; ++t) masked.logit_bias[t] = -INFINITY;
  add("fails", 12, masked);    // cannot be sampled: aborted alone
  add("late", 41, greedy(6));  // a second prefill while the others decode
  add("abort_me", 15, greedy(25));
  if (with_host_rows) {
    SamplingParams lp = greedy(7);
    lp.logprobs = 2;  // sampled on the host: its next step cannot overlap
    add("logprobs", 19, lp);
  }
  ZosRun run;
  while (engine.has_unfinished_requests()) {
    const std::vector<RequestOutput> outs = engine.step();
    if (run.steps++ == 0) run.first_step_returned_tokens = !outs.empty();
    if (run.steps == 6) engine.abort_request("abort_me");
    for (const RequestOutput& o : outs)
      if (o.finished) run.final[o.request_id] = o;
  }
  EXPECT_EQ(engine.state_memory().used_bytes(), 0) << "everything is released at the end";
  return run;
}

}  // namespace

TEST(Engine, ZeroOverheadSchedulingChangesNoOutput) {
  for (const bool host_rows : {false, true}) {
    SCOPED_TRACE(host_rows ? "with a logprobs row" : "device-sampled rows only");
    const ZosRun wait = run_mixed_workload(false, host_rows);
    const ZosRun overlap = run_mixed_workload(true, host_rows);
    // Waiting, the first step (one prefill of every prompt that fits) returns its tokens; with
    // the overlap they come back with the next step.
    EXPECT_TRUE(wait.first_step_returned_tokens);
    EXPECT_FALSE(overlap.first_step_returned_tokens);
    ASSERT_EQ(overlap.final.size(), wait.final.size());
    for (const auto& [id, w] : wait.final) {
      SCOPED_TRACE(id);
      ASSERT_TRUE(overlap.final.count(id));
      const CompletionOutput &a = w.outputs[0], &b = overlap.final.at(id).outputs[0];
      EXPECT_EQ(a.token_ids, b.token_ids);
      EXPECT_EQ(a.finish_reason, b.finish_reason);
      EXPECT_EQ(a.stop_reason, b.stop_reason);
      EXPECT_EQ(a.cumulative_logprob, b.cumulative_logprob);
      EXPECT_EQ(a.logprobs.has_value(), b.logprobs.has_value());
      if (a.logprobs && b.logprobs) {
        ASSERT_EQ(a.logprobs->size(), b.logprobs->size());
        for (size_t k = 0; k < a.logprobs->size(); ++k)
          for (const auto& [tok, lp] : (*a.logprobs)[k]) {
            ASSERT_TRUE((*b.logprobs)[k].count(tok));
            EXPECT_EQ(lp.logprob, (*b.logprobs)[k].at(tok).logprob);
          }
      }
    }
    EXPECT_EQ(wait.final.at("fails").outputs[0].finish_reason, "abort");
    EXPECT_TRUE(wait.final.at("fails").outputs[0].token_ids.empty());
    EXPECT_EQ(wait.final.at("stop_token").outputs[0].token_ids.size(), 4u);
    EXPECT_EQ(wait.final.at("greedy").outputs[0].token_ids.size(), 9u);
    EXPECT_EQ(wait.final.count("abort_me"), 0u) << "aborted requests return no final output";
  }
}
