// The offline LLM API on the bundled model: text and id prompts, per-prompt params, chat,
// stop strings and logprobs, and errors that name the argument.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/status.h"
#include "deepinfer/llm.h"
#include "engine/engine.h"

using namespace deepinfer;

namespace {
LLM& shared_llm() {
  static LLM llm([] {
    EngineConfig c;
    c.show_progress = false;
    return c;
  }());
  return llm;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(LLM, TextAndIdPromptsAgree) {
  LLM& llm = shared_llm();
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 8;
  const auto by_text = llm.generate({Prompt{std::string("The jury said that")}}, p);
  const auto by_ids = llm.generate({Prompt{by_text[0].prompt_token_ids}}, p);
  EXPECT_EQ(by_text[0].outputs[0].token_ids, by_ids[0].outputs[0].token_ids);
  EXPECT_EQ(by_text[0].outputs[0].text, by_ids[0].outputs[0].text);
  EXPECT_EQ(by_text[0].prompt, "The jury said that");
  EXPECT_TRUE(by_text[0].finished);
  EXPECT_EQ(by_text[0].outputs[0].finish_reason, "length");
  EXPECT_GE(by_text[0].metrics.finished_time, by_text[0].metrics.first_token_time);
  EXPECT_GE(by_text[0].metrics.first_token_time, by_text[0].metrics.arrival_time);
}

TEST(LLM, OutputsComeBackInPromptOrderWithTheirOwnParams) {
  LLM& llm = shared_llm();
  std::vector<SamplingParams> ps(3);
  for (int i = 0; i < 3; ++i) {
    ps[i].max_tokens = 3 + 4 * i;
    ps[i].seq_seed = 7;
    ps[i].ignore_eos = true;
  }
  const auto outs = llm.generate({Prompt{std::string("In the morning")},
                                  Prompt{std::string("She said")}, Prompt{std::string("It was")}},
                                 ps);
  ASSERT_EQ(outs.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(outs[i].outputs[0].token_ids.size(), 3u + 4 * i);
  EXPECT_EQ(outs[1].prompt, "She said");
}

TEST(LLM, StopStringsAndLogprobs) {
  LLM& llm = shared_llm();
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 32;
  p.ignore_eos = true;
  p.logprobs = 3;
  const auto full = llm.generate({Prompt{std::string("It was a cold night, and")}}, p)[0];
  const std::string text = full.outputs[0].text;
  ASSERT_GT(text.size(), 10u);
  // Stop at a word from the middle of the greedy text: the output ends right before it.
  const std::string stop = text.substr(text.size() / 2, 4);
  p.stop = {stop};
  const auto stopped = llm.generate({Prompt{std::string("It was a cold night, and")}}, p)[0];
  EXPECT_EQ(stopped.outputs[0].finish_reason, "stop");
  EXPECT_EQ(std::get<std::string>(stopped.outputs[0].stop_reason), stop);
  EXPECT_EQ(stopped.outputs[0].text, text.substr(0, text.find(stop)));
  // Logprobs: one entry per token holding the sampled token; greedy tokens rank 1.
  ASSERT_TRUE(full.outputs[0].logprobs.has_value());
  const auto& lps = *full.outputs[0].logprobs;
  ASSERT_EQ(lps.size(), full.outputs[0].token_ids.size());
  double cum = 0;
  for (size_t i = 0; i < lps.size(); ++i) {
    const auto it = lps[i].find(full.outputs[0].token_ids[i]);
    ASSERT_NE(it, lps[i].end());
    EXPECT_EQ(it->second.rank, 1);
    EXPECT_LE(it->second.logprob, 0.0f);
    EXPECT_GE(lps[i].size(), 3u);
    cum += it->second.logprob;
  }
  EXPECT_NEAR(full.outputs[0].cumulative_logprob, cum, 1e-4);
}

TEST(LLM, ChatAppliesTheTemplate) {
  LLM& llm = shared_llm();
  const std::string prompt = llm.apply_chat_template({{"user", "Hello"}});
  EXPECT_NE(prompt.find("<｜User｜>Hello<｜Assistant｜>"), std::string::npos) << prompt;
  EXPECT_EQ(prompt.rfind("<｜begin▁of▁sentence｜>", 0), 0u) << prompt;
  SamplingParams p;
  p.max_tokens = 4;
  p.seq_seed = 1;
  const auto outs = llm.chat({{{"user", "Hello"}}}, p);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].prompt_token_ids.front(), 0);  // BOS once, not twice
  EXPECT_NE(outs[0].prompt_token_ids[1], 0);
  EXPECT_EQ(error_of([&] {
              llm.apply_chat_template({{"wizard", "x"}});
            }).find("role") != std::string::npos,
            true);
}

TEST(LLM, BadArgumentsNameTheArgument) {
  LLM& llm = shared_llm();
  SamplingParams p;
  p.max_tokens = -1;
  EXPECT_NE(error_of([&] { llm.generate({Prompt{std::string("x")}}, p); }).find("max_tokens"),
            std::string::npos);
  p = SamplingParams();
  p.top_p = 0;
  EXPECT_NE(error_of([&] { llm.generate({Prompt{std::string("x")}}, p); }).find("top_p"),
            std::string::npos);
  p = SamplingParams();
  const std::vector<int32_t> huge(100000, 5);
  const std::string e = error_of([&] {
    llm.generate({Prompt{std::string("ok")}, Prompt{huge}}, p);
  });
  EXPECT_NE(e.find("prompt 1"), std::string::npos) << e;
  EXPECT_NE(e.find("max_model_len"), std::string::npos) << e;
  EXPECT_FALSE(llm.engine().has_unfinished_requests());  // the good prompt was withdrawn
  EngineConfig bad;
  bad.model = "/no/such/model";
  EXPECT_NE(error_of([&] { LLM l(bad); }).find("/no/such/model"), std::string::npos);
}
