#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/status.h"
#include "sampling/logits_processors.h"

using namespace deepinfer;
using namespace deepinfer::sampling;

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}

TEST(LogitsProcessors, LogitBiasAdds) {
  SamplingParams p;
  p.logit_bias = {{1, 2.5f}, {3, -100.0f}};
  std::vector<float> x = {0.0f, 1.0f, 2.0f, 3.0f};
  apply_logits_processors(x, p, {});
  EXPECT_EQ(x, (std::vector<float>{0.0f, 3.5f, 2.0f, -97.0f}));
}

TEST(LogitsProcessors, MinTokensMasksEosAndStopIds) {
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {4};
  const std::vector<int32_t> eos = {1};
  std::vector<int32_t> out = {7};
  std::vector<float> x(8, 1.0f);
  apply_min_tokens(x, p, {{}, out, eos});
  EXPECT_EQ(x[1], kNegInf);
  EXPECT_EQ(x[4], kNegInf);
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[7], 1.0f);

  // Reached: nothing masked.
  out = {7, 7};
  std::vector<float> y(8, 1.0f);
  apply_min_tokens(y, p, {{}, out, eos});
  EXPECT_EQ(y, std::vector<float>(8, 1.0f));

  // ignore_eos: EOS does not stop, so it is not masked; stop ids still are.
  p.ignore_eos = true;
  out = {};
  std::vector<float> z(8, 1.0f);
  apply_min_tokens(z, p, {{}, out, eos});
  EXPECT_EQ(z[1], 1.0f);
  EXPECT_EQ(z[4], kNegInf);
}

TEST(LogitsProcessors, RepetitionPenaltyVllmSemantics) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {0, 1, 1};
  const std::vector<int32_t> out = {1, 2, 2};
  std::vector<float> x = {4.0f, -3.0f, 0.0f, 5.0f, -1.0f};
  apply_penalties(x, p, {prompt, out, {}});
  // 0: prompt, positive -> /2; 1: prompt+output, negative -> *2 once; 2: output, zero -> *2 = 0;
  // 3, 4 unseen.
  EXPECT_EQ(x, (std::vector<float>{2.0f, -6.0f, 0.0f, 5.0f, -1.0f}));
}

TEST(LogitsProcessors, FrequencyAndPresenceOnOutputOnly) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  const std::vector<int32_t> prompt = {0, 0, 0, 3};
  const std::vector<int32_t> out = {1, 2, 1, 1};
  std::vector<float> x = {1.0f, 1.0f, 1.0f, 1.0f};
  apply_penalties(x, p, {prompt, out, {}});
  EXPECT_FLOAT_EQ(x[0], 1.0f);                     // prompt only
  EXPECT_FLOAT_EQ(x[1], 1.0f - 0.5f * 3 - 0.25f);  // 3 times
  EXPECT_FLOAT_EQ(x[2], 1.0f - 0.5f * 1 - 0.25f);  // once
  EXPECT_FLOAT_EQ(x[3], 1.0f);

  // Negative penalties encourage.
  p.frequency_penalty = -1.0f;
  p.presence_penalty = -2.0f;
  std::vector<float> y = {0.0f, 0.0f, 0.0f, 0.0f};
  apply_penalties(y, p, {prompt, out, {}});
  EXPECT_FLOAT_EQ(y[1], 3.0f + 2.0f);
}

TEST(LogitsProcessors, OrderBiasThenRepetitionThenFrequencyPresence) {
  SamplingParams p;
  p.logit_bias = {{3, 1.0f}};
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.min_tokens = 5;
  p.stop_token_ids = {3};  // masked first, the bias cannot bring it back
  const std::vector<int32_t> out = {2, 2};
  std::vector<float> x = {0.0f, 0.0f, 2.0f, 7.0f};
  apply_logits_processors(x, p, {{}, out, {}});
  EXPECT_EQ(x[3], kNegInf);
  // token 2: repetition 2 / 2 = 1, then 1 - 0.5*2 - 0.25.
  EXPECT_FLOAT_EQ(x[2], -0.25f);

  // Without min_tokens, the biased token in the output gets every step in turn.
  p.min_tokens = 0;
  const std::vector<int32_t> out2 = {3, 3};
  std::vector<float> y = {0.0f, 0.0f, 0.0f, 2.0f};
  apply_logits_processors(y, p, {{}, out2, {}});
  // (2 + 1) / 2 = 1.5; 1.5 - 0.5*2 = 0.5; 0.5 - 0.25 = 0.25.
  EXPECT_FLOAT_EQ(y[3], 0.25f);
}

TEST(LogitsProcessors, OutOfVocabIdsThrowAndScratchStaysClean) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  const std::vector<int32_t> bad = {1, 9};
  std::vector<float> x(4, 1.0f);
  EXPECT_THROW(apply_penalties(x, p, {bad, {}, {}}), Error);
  EXPECT_THROW(apply_penalties(x, p, {{}, bad, {}}), Error);
  SamplingParams b;
  b.logit_bias = {{4, 1.0f}};
  EXPECT_THROW(apply_logit_bias(x, b), Error);

  // A later call sees no leftovers from the failed ones.
  const std::vector<int32_t> out = {2};
  std::vector<float> y(4, 1.0f);
  apply_penalties(y, p, {{}, out, {}});
  EXPECT_EQ(y, (std::vector<float>{1.0f, 1.0f, -0.5f, 1.0f}));
}

TEST(LogitsProcessors, RepeatedCallsIndependent) {
  SamplingParams p;
  p.repetition_penalty = 4.0f;
  p.presence_penalty = 1.0f;
  for (int round = 0; round < 3; ++round) {
    const std::vector<int32_t> out = {static_cast<int32_t>(round)};
    std::vector<float> x(3, 8.0f);
    apply_penalties(x, p, {{}, out, {}});
    for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(x[i], i == round ? 1.0f : 8.0f);
  }
}
