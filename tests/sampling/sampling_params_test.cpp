#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "core/status.h"
#include "deepinfer/sampling_params.h"

using namespace deepinfer;

namespace {

// Expects validate() to throw `code` with a message containing every piece in `needles`.
void expect_rejected(const std::function<void(SamplingParams&)>& edit,
                     std::initializer_list<std::string> needles, int vocab_size = -1,
                     ErrorCode code = ErrorCode::kInvalidArgument) {
  SamplingParams p;
  edit(p);
  try {
    p.validate(vocab_size);
    ADD_FAILURE() << "no error for: " << *needles.begin();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message '" << e.what() << "' lacks '" << n << "'";
  }
}

}  // namespace

TEST(SamplingParams, DefaultsFollowVllm) {
  SamplingParams p;
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_FALSE(p.seq_seed.has_value());
  EXPECT_EQ(p.presence_penalty, 0.0f);
  EXPECT_EQ(p.frequency_penalty, 0.0f);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_TRUE(p.logit_bias.empty());
  EXPECT_EQ(p.min_tokens, 0);
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_TRUE(p.stop.empty());
  EXPECT_TRUE(p.stop_token_ids.empty());
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_FALSE(p.include_stop_str_in_output);
  EXPECT_FALSE(p.logprobs.has_value());
  EXPECT_TRUE(p.skip_special_tokens);
  EXPECT_FALSE(p.greedy());
  p.temperature = 0.0f;
  EXPECT_TRUE(p.greedy());
  EXPECT_NO_THROW(SamplingParams{}.validate());
  EXPECT_NO_THROW(SamplingParams{}.validate(1000));
}

TEST(SamplingParams, AcceptsBoundaryValues) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.top_k = -1;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.repetition_penalty = 0.01f;
  p.max_tokens = std::nullopt;
  p.min_tokens = 100;
  p.logprobs = -1;
  p.logit_bias = {{0, -100.0f}, {9, 100.0f}};
  p.stop_token_ids = {0, 9};
  p.stop = {"x"};
  EXPECT_NO_THROW(p.validate(10));
}

TEST(SamplingParams, MessagesNameFieldAndValue) {
  expect_rejected([](auto& p) { p.temperature = -0.5f; }, {"temperature", "-0.5"});
  expect_rejected([](auto& p) { p.temperature = NAN; }, {"temperature", "nan"});
  expect_rejected([](auto& p) { p.top_p = 0.0f; }, {"top_p", "0"});
  expect_rejected([](auto& p) { p.top_p = 1.5f; }, {"top_p", "1.5"});
  expect_rejected([](auto& p) { p.top_k = -2; }, {"top_k", "-2"});
  expect_rejected([](auto& p) { p.min_p = -0.25f; }, {"min_p", "-0.25"});
  expect_rejected([](auto& p) { p.min_p = 1.25f; }, {"min_p", "1.25"});
  expect_rejected([](auto& p) { p.max_tokens = -3; }, {"max_tokens", "-3"});
  expect_rejected([](auto& p) { p.max_tokens = 0; }, {"max_tokens", "0"});
  expect_rejected([](auto& p) { p.min_tokens = -1; }, {"min_tokens", "-1"});
  expect_rejected([](auto& p) { p.min_tokens = 20; }, {"min_tokens", "20", "max_tokens", "16"});
  expect_rejected([](auto& p) { p.repetition_penalty = 0.0f; }, {"repetition_penalty", "0"});
  expect_rejected([](auto& p) { p.presence_penalty = 2.5f; }, {"presence_penalty", "2.5"});
  expect_rejected([](auto& p) { p.frequency_penalty = -2.5f; }, {"frequency_penalty", "-2.5"});
  expect_rejected([](auto& p) { p.logprobs = -2; }, {"logprobs", "-2"});
  expect_rejected([](auto& p) { p.stop = {"ok", ""}; }, {"stop[1]", "empty"});
  expect_rejected([](auto& p) { p.n = 2; }, {"n = 2"}, -1, ErrorCode::kUnsupported);
  expect_rejected([](auto& p) { p.logit_bias[-1] = 1.0f; }, {"logit_bias", "-1"});
  expect_rejected([](auto& p) { p.logit_bias[10] = 1.0f; }, {"logit_bias", "10", "[0, 10)"}, 10);
  expect_rejected([](auto& p) { p.logit_bias[3] = NAN; }, {"logit_bias[3]", "NaN"});
  expect_rejected([](auto& p) { p.stop_token_ids = {1, 12}; }, {"stop_token_ids", "12"}, 10);
  expect_rejected([](auto& p) { p.stop_token_ids = {-7}; }, {"stop_token_ids", "-7"});
}

TEST(SamplingParams, TokenIdsUncheckedWithoutVocab) {
  SamplingParams p;
  p.logit_bias[1'000'000] = 1.0f;
  p.stop_token_ids = {2'000'000};
  EXPECT_NO_THROW(p.validate());
  EXPECT_THROW(p.validate(129280), Error);
}
