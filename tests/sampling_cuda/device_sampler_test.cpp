// DeviceSampler against the CPU sampler: identical tokens (100%), identical processed logits,
// per-row errors, the CPU fallback for logprobs rows and the Philox stream. Skips without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sampler_cases.h"
#include "sampling/cuda/device_sampler.h"
#include "sampling/rng.h"

using namespace deepinfer;
using namespace deepinfer::sampling;
using namespace deepinfer::sampling::testcases;

namespace {

std::string no_gpu_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return cudaGetErrorString(err);
  }
  return n > 0 ? "" : "no CUDA device found";
}

#define ASSERT_CUDA(x) ASSERT_EQ((x), cudaSuccess) << #x

class DeviceSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = no_gpu_reason();
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
    ASSERT_CUDA(cudaStreamCreate(&stream_));
    sampler_ = std::make_unique<DeviceSampler>(stream_);
  }
  void TearDown() override {
    sampler_.reset();
    if (d_logits_) cudaFree(d_logits_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  // Stages `cases` as one batch: their logits (also left in `logits`) in the fixture's device
  // buffer, whose address it returns, and their rows in `rows`.
  float* upload(const std::vector<Case>& cases, std::vector<float>& logits,
                std::vector<SampleRow>& rows) {
    logits.clear();
    rows.clear();
    for (const Case& c : cases) {
      logits.insert(logits.end(), c.logits.begin(), c.logits.end());
      rows.push_back(c.row());
    }
    const size_t bytes = logits.size() * sizeof(float);
    if (bytes > capacity_) {
      if (d_logits_) cudaFree(d_logits_);
      d_logits_ = nullptr;
      EXPECT_EQ(cudaMalloc(&d_logits_, bytes + 64), cudaSuccess);
      capacity_ = bytes;
    }
    // Offset by one float when asked, so rows are not 16-byte aligned (the scalar load path).
    float* d = d_logits_ + (misalign_ ? 1 : 0);
    EXPECT_EQ(cudaMemcpy(d, logits.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }

  // Runs the device sampler on `cases` as one batch; `logits` receives the rows afterwards.
  std::vector<DeviceSampleResult> run(const std::vector<Case>& cases, int64_t V,
                                      std::vector<float>& logits,
                                      LogprobsMode mode = LogprobsMode::kRaw) {
    std::vector<SampleRow> rows;
    float* d = upload(cases, logits, rows);
    auto out = sampler_->sample(d, static_cast<int64_t>(cases.size()), V, rows, mode);
    EXPECT_EQ(cudaMemcpy(logits.data(), d, logits.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }

  // Every token and every processed row equal to the CPU's; errors where the CPU throws.
  void check(const std::vector<Case>& cases, int64_t V) {
    std::vector<float> logits;
    const auto got = run(cases, V, logits);
    ASSERT_EQ(got.size(), cases.size());
    int64_t mismatches = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const CpuAnswer want = cpu_answer(c);
      if (!want.error.empty()) {
        ASSERT_TRUE(got[i].error.has_value()) << "row " << i << ": the CPU says " << want.error;
        EXPECT_EQ(std::string(got[i].error->what()), want.error);
        EXPECT_EQ(got[i].token, -1);
        continue;
      }
      ASSERT_FALSE(got[i].error.has_value()) << "row " << i << ": " << got[i].error->what();
      if (got[i].token != want.token) {
        ++mismatches;
        ADD_FAILURE() << "row " << i << " V " << V << ": device " << got[i].token << ", cpu "
                      << want.token << " (T " << c.params.temperature << " top_k " << c.params.top_k
                      << " top_p " << c.params.top_p << " min_p " << c.params.min_p << " seed "
                      << c.seed << " position " << c.position << ")";
      }
      const int64_t diff = first_difference(logits.data() + i * V, want.processed.data(), V);
      EXPECT_EQ(diff, -1) << "processed logit " << diff << " of row " << i;
    }
    EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " rows";
  }

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<DeviceSampler> sampler_;
  float* d_logits_ = nullptr;
  size_t capacity_ = 0;
  bool misalign_ = false;
};

}  // namespace

TEST_F(DeviceSamplerTest, EveryParameterCombinationFullVocabulary) {
  SCOPED_TRACE(seed_note());
  constexpr int64_t V = 129280;
  CaseGen gen(11);
  for (int batch = 0; batch < 4; ++batch) {
    std::vector<Case> cases;
    for (const auto& p : parameter_grid()) cases.push_back(gen.make(V, p));
    check(cases, V);
  }
}

TEST_F(DeviceSamplerTest, EveryParameterCombinationSmallVocabularies) {
  SCOPED_TRACE(seed_note());
  CaseGen gen(12);
  for (int64_t V : {1, 2, 5, 37, 1000, 3001, 4096}) {
    std::vector<Case> cases;
    for (int rep = 0; rep < 8; ++rep)
      for (const auto& p : parameter_grid()) cases.push_back(gen.make(V, p));
    check(cases, V);
  }
}

TEST_F(DeviceSamplerTest, UnalignedRowsUseTheScalarPath) {
  SCOPED_TRACE(seed_note());
  misalign_ = true;
  CaseGen gen(13);
  for (int64_t V : {4096, 129280}) {
    std::vector<Case> cases;
    for (const auto& p : parameter_grid()) cases.push_back(gen.make(V, p));
    check(cases, V);
  }
}

// All logits equal: the token is the nth id with n = floor(u * V), u from Philox at
// (seed, position, kSampleStream). Any other seed mapping, counter layout or stream changes it.
TEST_F(DeviceSamplerTest, PhiloxStreamMatchesOneSeedManyPositions) {
  constexpr int64_t V = 4096;
  SamplingParams p;  // T = 1, no truncation
  for (uint64_t seed : std::vector<uint64_t>{0, 42, 0xDEADBEEF00000001ull}) {
    std::vector<Case> cases(2048);
    for (size_t k = 0; k < cases.size(); ++k) {
      cases[k].logits.assign(V, 0.5f);
      cases[k].params = p;
      cases[k].seed = seed;
      cases[k].position =
          k < 1024 ? static_cast<int64_t>(k) : (int64_t{1} << 32) + static_cast<int64_t>(k) * 7919;
    }
    std::vector<float> logits;
    const auto got = run(cases, V, logits);
    for (size_t k = 0; k < cases.size(); ++k) {
      const uint32_t bits24 = uniform_bits24(seed, cases[k].position, kSampleStream);
      const auto want = static_cast<int32_t>((uint64_t{bits24} * V) >> 24);
      ASSERT_EQ(got[k].token, want) << "seed " << seed << " position " << cases[k].position;
      ASSERT_EQ(got[k].token, cpu_answer(cases[k]).token);
    }
  }
}

TEST_F(DeviceSamplerTest, ErrorsStayInTheirRow) {
  constexpr int64_t V = 1000;
  CaseGen gen(14);
  std::vector<Case> cases(8);
  for (Case& c : cases) {
    c = gen.make(V, SamplingParams{});
    c.params = {};  // no processors unless set below
    for (int64_t j = 0; j < V; ++j) c.logits[j] = std::sin(0.37f * j) * 4.0f;
  }
  cases[1].logits.assign(V, -kInf);  // random row, all masked
  cases[2].logits.assign(V, std::numeric_limits<float>::quiet_NaN());
  cases[2].params.temperature = 0.0f;                          // greedy, all NaN
  cases[3].params.logit_bias[static_cast<int32_t>(V)] = 1.0f;  // id outside the vocabulary
  cases[4].params.min_tokens = 3;                              // eos masked, but eos is bad
  cases[4].eos = {-1};
  cases[4].output.clear();
  cases[5].logits.assign(V, -kInf);  // only the masked eos was finite
  cases[5].logits[7] = 1.0f;
  cases[5].eos = {7};
  cases[5].params.min_tokens = 1;
  cases[5].output.clear();
  std::vector<float> logits;
  const auto got = run(cases, V, logits);
  for (int i : {0, 6, 7}) {
    ASSERT_FALSE(got[i].error.has_value()) << i << ": " << got[i].error->what();
    EXPECT_EQ(got[i].token, cpu_answer(cases[i]).token) << i;
  }
  for (int i : {1, 2, 3, 4, 5}) {
    ASSERT_TRUE(got[i].error.has_value()) << i;
    EXPECT_EQ(got[i].error->code(), ErrorCode::kInvalidArgument) << i;
    EXPECT_EQ(std::string(got[i].error->what()), cpu_answer(cases[i]).error) << i;
  }

  // A row without params fails alone too.
  std::vector<SampleRow> rows = {cases[0].row(), SampleRow{}};
  std::vector<float> two(cases[0].logits);
  two.insert(two.end(), cases[0].logits.begin(), cases[0].logits.end());
  float* d = nullptr;
  ASSERT_CUDA(cudaMalloc(&d, two.size() * sizeof(float)));
  ASSERT_CUDA(cudaMemcpy(d, two.data(), two.size() * sizeof(float), cudaMemcpyHostToDevice));
  const auto pair = sampler_->sample(d, 2, V, rows);
  cudaFree(d);
  EXPECT_FALSE(pair[0].error.has_value());
  ASSERT_TRUE(pair[1].error.has_value());
  EXPECT_THROW(sampler_->sample(d_logits_, 3, V, rows), Error);  // 3 rows of logits, 2 rows
}

TEST_F(DeviceSamplerTest, LogprobsRowsFallBackToTheCpu) {
  SCOPED_TRACE(seed_note());
  constexpr int64_t V = 5000;
  CaseGen gen(15);
  for (LogprobsMode mode : {LogprobsMode::kRaw, LogprobsMode::kProcessed}) {
    std::vector<Case> cases;
    for (const auto& p : parameter_grid()) {
      cases.push_back(gen.make(V, p));
      if (cases.size() % 2 == 0) cases.back().params.logprobs = cases.size() % 4 == 0 ? 3 : 0;
    }
    std::vector<float> logits;
    const auto got = run(cases, V, logits, mode);
    for (size_t i = 0; i < cases.size(); ++i) {
      std::vector<float> row = cases[i].logits;
      std::optional<SampleResult> want;
      try {
        want = sample_row(row, cases[i].params, cases[i].seed, cases[i].position,
                          cases[i].row().context, mode);
      } catch (const Error&) {
      }
      if (!want) {
        EXPECT_TRUE(got[i].error.has_value()) << i;
        continue;
      }
      ASSERT_FALSE(got[i].error.has_value()) << i << ": " << got[i].error->what();
      EXPECT_EQ(got[i].token, want->token) << i;
      ASSERT_EQ(got[i].logprobs.has_value(), want->logprobs.has_value()) << i;
      if (!want->logprobs) continue;
      // NaN logits give NaN logprobs on both sides (NaN != NaN).
      const float g = got[i].logprobs->sampled.logprob, w = want->logprobs->sampled.logprob;
      EXPECT_TRUE(g == w || (std::isnan(g) && std::isnan(w))) << i << ": " << g << " vs " << w;
      EXPECT_EQ(got[i].logprobs->sampled.rank, want->logprobs->sampled.rank) << i;
      ASSERT_EQ(got[i].logprobs->top.size(), want->logprobs->top.size()) << i;
      for (size_t j = 0; j < want->logprobs->top.size(); ++j)
        EXPECT_EQ(got[i].logprobs->top[j].token, want->logprobs->top[j].token) << i;
      // The device row of a logprobs row is left as given.
      EXPECT_EQ(first_difference(logits.data() + i * V, cases[i].logits.data(), V), -1) << i;
    }
  }
}

TEST_F(DeviceSamplerTest, TokensDoNotDependOnBatchCompanionsOrOrder) {
  SCOPED_TRACE(seed_note());
  constexpr int64_t V = 129280;
  CaseGen gen(16);
  std::vector<Case> cases;
  const auto grid = parameter_grid();
  for (int k = 0; k < 24; ++k) cases.push_back(gen.make(V, grid[k * 3 % grid.size()]));
  std::vector<float> logits;
  const auto together = run(cases, V, logits);
  std::vector<Case> reversed(cases.rbegin(), cases.rend());
  const auto backwards = run(reversed, V, logits);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto alone = run({cases[i]}, V, logits);
    EXPECT_EQ(alone[0].token, together[i].token) << i;
    EXPECT_EQ(backwards[cases.size() - 1 - i].token, together[i].token) << i;
  }
}

TEST_F(DeviceSamplerTest, ManyRowsOneCall) {
  SCOPED_TRACE(seed_note());
  constexpr int64_t V = 2000;
  CaseGen gen(17);
  std::vector<Case> cases;
  const auto grid = parameter_grid();
  for (int k = 0; k < 700; ++k) cases.push_back(gen.make(V, grid[k % grid.size()]));
  check(cases, V);
}

// launch() + collect() give sample()'s results, and launch() leaves each device row's token in
// next_ids (0 for a row that failed on the device; untouched for rows the device never saw).
TEST_F(DeviceSamplerTest, LaunchLeavesTheTokensInNextIds) {
  constexpr int64_t V = 1000;
  CaseGen gen(15);
  std::vector<Case> cases(7);
  for (Case& c : cases) {
    c = gen.make(V, SamplingParams{});
    c.params = {};
    for (int64_t j = 0; j < V; ++j) c.logits[j] = std::sin(0.41f * j + c.seed % 7) * 4.0f;
  }
  cases[1].logits.assign(V, -kInf);                            // fails in the kernel
  cases[3].params.logit_bias[static_cast<int32_t>(V)] = 1.0f;  // fails while staging
  cases[5].params.logprobs = 2;                                // sampled on the host
  std::vector<float> logits;
  std::vector<SampleRow> rows;
  float* d = upload(cases, logits, rows);
  const int64_t R = static_cast<int64_t>(cases.size());
  int32_t* next = nullptr;
  ASSERT_CUDA(cudaMalloc(&next, R * sizeof(int32_t)));
  const std::vector<int32_t> poison(R, -7);
  ASSERT_CUDA(cudaMemcpy(next, poison.data(), R * sizeof(int32_t), cudaMemcpyHostToDevice));
  const std::vector<bool> in_next = sampler_->launch(d, R, V, rows, next);
  EXPECT_THROW(sampler_->launch(d, R, V, rows, next), Error) << "one launch at a time";
  const auto got = sampler_->collect();
  std::vector<int32_t> ids(R);
  ASSERT_CUDA(cudaMemcpy(ids.data(), next, R * sizeof(int32_t), cudaMemcpyDeviceToHost));
  cudaFree(next);
  ASSERT_EQ(got.size(), cases.size());
  for (int64_t i = 0; i < R; ++i) {
    const CpuAnswer want = cpu_answer(cases[i]);
    EXPECT_EQ(got[i].error.has_value(), !want.error.empty()) << i;
    if (want.error.empty()) {
      EXPECT_EQ(got[i].token, want.token) << i;
    }
    const bool device_row = i != 3 && i != 5;
    EXPECT_EQ(in_next[i], device_row) << i;
    EXPECT_EQ(ids[i], !device_row ? -7 : (i == 1 ? 0 : want.token)) << i;
  }
  EXPECT_THROW(sampler_->collect(), Error) << "collect without a launch";
}

// launch() only queues work, even when it grows its buffers and has logprobs rows to download:
// with the stream held busy by a sleeping host function, it returns while the stream still runs.
TEST_F(DeviceSamplerTest, LaunchDoesNotWaitForTheDevice) {
  constexpr int64_t V = 5000;
  CaseGen gen(16);
  std::vector<Case> cases(300);  // more rows than the buffers start with: they grow
  for (Case& c : cases) c = gen.make(V, SamplingParams{});
  cases[7].params.logprobs = 3;
  std::vector<float> logits;
  std::vector<SampleRow> rows;
  float* d = upload(cases, logits, rows);
  const int64_t R = static_cast<int64_t>(cases.size());
  ASSERT_CUDA(cudaLaunchHostFunc(
      stream_, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); },
      nullptr));
  const auto t0 = std::chrono::steady_clock::now();
  sampler_->launch(d, R, V, rows);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady) << "launch waited for the stream";
  EXPECT_LT(waited, 0.15);
  const auto got = sampler_->collect();
  for (int64_t i = 0; i < R; ++i) {
    const CpuAnswer want = cpu_answer(cases[i]);
    ASSERT_EQ(got[i].error.has_value(), !want.error.empty()) << i;
    if (want.error.empty()) {
      EXPECT_EQ(got[i].token, want.token) << i;
    }
  }
  EXPECT_TRUE(got[7].logprobs.has_value()) << "the logprobs row was sampled on the host";
}
