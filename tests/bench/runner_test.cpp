// Benchmark runner smoke tests: a few steps of each mode on a tiny random checkpoint; the JSON
// carries the fields the sweep and plot scripts read, and the accounting is the roofline of the
// real tokens.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "bench/machine.h"
#include "bench/runner.h"
#include "bench/serve.h"
#include "bench/stats.h"
#include "engine/engine.h"
#include "model/deepseek_v4/model.h"
#include "test_util.h"

namespace deepinfer::bench {
namespace {

using nlohmann::json;

class RunnerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::tiny_checkpoint(CheckpointDtype::kBf16, 2));
    backend_ = make_cpu_backend().release();
    model_ = deepseek_v4::Model::load(*dir_, *backend_).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete backend_;
    delete dir_;
  }
  static BenchSetup setup() {
    BenchSetup s;
    s.peaks = {10e9, 100e9};
    s.dtypes = backend_dtypes(*backend_);
    s.fill_chunk_tokens = 16;
    return s;
  }
  static std::string* dir_;
  static Backend* backend_;
  static deepseek_v4::Model* model_;
};
std::string* RunnerTest::dir_ = nullptr;
Backend* RunnerTest::backend_ = nullptr;
deepseek_v4::Model* RunnerTest::model_ = nullptr;

TEST_F(RunnerTest, DecodeStepsGrowTheContextAndCountRealTokens) {
  BenchRunner runner(*model_, setup());
  const RunResult r = runner.run_decode(3, 40, 2, 4);
  ASSERT_EQ(r.steps.size(), 4u);
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const StepRecord& s = r.steps[i];
    EXPECT_EQ(s.tokens, 3);
    EXPECT_EQ(s.mean_context, 40 + 2 + static_cast<double>(i));  // fill + warm-up + i
    EXPECT_GT(s.seconds, 0);
    // Issuing the forward is part of the step (on the CPU it is all of it).
    EXPECT_GT(s.issue_seconds, 0);
    EXPECT_LE(s.issue_seconds, s.seconds * 1.05 + 1e-4);
    const StepCost want =
        step_cost(model_->config(), 3, 1, static_cast<int64_t>(40 + 2 + i), setup().dtypes);
    EXPECT_DOUBLE_EQ(s.cost.bytes(), want.bytes());
    EXPECT_DOUBLE_EQ(s.cost.flops(), want.flops());
  }
  const json j = run_json(r, setup().peaks);
  for (const char* key : {"mode", "num_seqs", "context_length", "warmup_steps", "summary", "steps"})
    EXPECT_TRUE(j.contains(key)) << key;
  const json& sum = j["summary"];
  for (const char* key :
       {"median_step_s", "median_issue_s", "tokens_per_s", "tokens_per_s_per_user", "achieved_gbs",
        "achieved_tflops", "roofline_step_s", "roofline_fraction", "bound"})
    EXPECT_TRUE(sum.contains(key)) << key;
  EXPECT_NEAR(sum["tokens_per_s_per_user"].get<double>() * 3, sum["tokens_per_s"].get<double>(),
              1e-6 * sum["tokens_per_s"].get<double>());
  const json& step = j["steps"][0];
  for (const char* key : {"time_s", "issue_s", "tokens", "tokens_per_s", "tokens_per_s_per_user",
                          "bytes", "flops", "achieved_gbs", "achieved_tflops", "roofline_fraction"})
    EXPECT_TRUE(step.contains(key)) << key;
  EXPECT_FALSE(summary_table({r}, setup().peaks).empty());
  EXPECT_NE(steps_table(r, setup().peaks).find("tok/s/user"), std::string::npos);
}

TEST_F(RunnerTest, PrefillStepsSplitTokensOverSequences) {
  BenchRunner runner(*model_, setup());
  const RunResult r = runner.run_prefill(33, 2, 8, 1, 2);
  ASSERT_EQ(r.steps.size(), 2u);
  const std::vector<SeqStep> shape = {{8, 17}, {8, 16}};
  const StepCost want = step_cost(model_->config(), shape, setup().dtypes);
  for (const StepRecord& s : r.steps) {
    EXPECT_EQ(s.tokens, 33);
    EXPECT_DOUBLE_EQ(s.cost.flops(), want.flops());
  }
  EXPECT_THROW(runner.run_prefill(0, 1, 0, 0, 1), Error);
}

TEST_F(RunnerTest, SyntheticContextSkipsTheFillAndKeepsTheAccounting) {
  BenchSetup s = setup();
  s.synthetic_context = true;
  BenchRunner runner(*model_, s);
  const RunResult r = runner.run_decode(3, 40, 2, 4);
  EXPECT_TRUE(r.synthetic_context);
  ASSERT_EQ(r.steps.size(), 4u);
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const StepRecord& st = r.steps[i];
    EXPECT_EQ(st.mean_context, 40 + 2 + static_cast<double>(i));
    const StepCost want =
        step_cost(model_->config(), 3, 1, static_cast<int64_t>(40 + 2 + i), s.dtypes);
    EXPECT_DOUBLE_EQ(st.cost.bytes(), want.bytes());
    EXPECT_DOUBLE_EQ(st.cost.flops(), want.flops());
  }
  const json j = run_json(r, s.peaks);
  EXPECT_TRUE(j["synthetic_context"].get<bool>());
  EXPECT_NE(summary_table({r}, s.peaks).find("synth"), std::string::npos);

  const RunResult p = runner.run_prefill(33, 2, 8, 1, 2);
  EXPECT_TRUE(p.synthetic_context);
  const std::vector<SeqStep> shape = {{8, 17}, {8, 16}};
  for (const StepRecord& st : p.steps)
    EXPECT_DOUBLE_EQ(st.cost.flops(), step_cost(model_->config(), shape, s.dtypes).flops());

  // Without context there is nothing synthetic about a run.
  EXPECT_FALSE(runner.run_decode(1, 0, 0, 1).synthetic_context);
  const RunResult prefilled = BenchRunner(*model_, setup()).run_decode(1, 8, 0, 1);
  EXPECT_FALSE(prefilled.synthetic_context);
  EXPECT_NE(summary_table({prefilled}, s.peaks).find("real"), std::string::npos);
}

TEST_F(RunnerTest, ServeReportsVllmMetrics) {
  EngineConfig cfg;
  cfg.model = *dir_;
  cfg.show_progress = false;
  Engine engine(cfg);
  ServeOptions o;
  o.num_prompts = 4;
  o.request_rate = 200;
  o.input_len = 12;
  o.output_len = 5;
  o.seed = 3;
  const ServeResult r = run_serve(engine, o);
  const json j = serve_json(r);
  EXPECT_EQ(j["completed"], 4);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["total_output_tokens"], 20);
  EXPECT_EQ(j["total_input_tokens"], 48);
  for (const RequestTiming& q : r.requests) {
    ASSERT_EQ(q.token_times.size(), 5u);
    EXPECT_GE(q.token_times.front(), q.arrival);
    for (size_t i = 1; i < q.token_times.size(); ++i)
      EXPECT_GE(q.token_times[i], q.token_times[i - 1]);
  }
  for (const char* k : {"ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    for (const char* s : {"mean", "median", "p99"}) EXPECT_GE(j[k][s].get<double>(), 0) << k;
  }
  // TPOT = (E2EL - TTFT) / (n - 1) per request, so the means relate exactly.
  EXPECT_NEAR(j["tpot_ms"]["mean"].get<double>(),
              (j["e2el_ms"]["mean"].get<double>() - j["ttft_ms"]["mean"].get<double>()) / 4, 1e-6);
  EXPECT_NE(serve_report(r).find("Mean TTFT (ms):"), std::string::npos);
}

TEST(Stats, PercentileMatchesNumpy) {
  // numpy.percentile([1, 2, 3, 4], q) = 1 + 3q/100 (linear interpolation).
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile({5}, 99), 5);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(Machine, ProbedPeaksArePositive) {
  auto backend = make_cpu_backend();
  const ProbedPeaks p = machine_peaks(*backend, 0, 0);
  EXPECT_GT(p.peaks.bytes_per_s, 1e8);
  EXPECT_GT(p.peaks.flops_per_s, 1e8);
  const ProbedPeaks given = machine_peaks(*backend, 12.5, 0.25);
  EXPECT_DOUBLE_EQ(given.peaks.bytes_per_s, 12.5e9);
  EXPECT_DOUBLE_EQ(given.peaks.flops_per_s, 0.25e12);
}

}  // namespace
}  // namespace deepinfer::bench
