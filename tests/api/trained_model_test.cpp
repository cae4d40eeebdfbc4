// The bundled trained model (models/deepseek-v4-tiny-en) against the numbers transformers
// recorded in its reference.json: held-out perplexity and greedy continuations.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "api/perplexity.h"
#include "deepinfer/llm.h"
#include "tokenizer/tokenizer.h"

using namespace deepinfer;

namespace {
const std::string kModel = std::string(DEEPINFER_SOURCE_DIR) + "/models/deepseek-v4-tiny-en";

nlohmann::json reference() {
  std::ifstream in(kModel + "/reference.json");
  return nlohmann::json::parse(in);
}
}  // namespace

TEST(TrainedModel, HeldOutPerplexityMatchesTransformers) {
  const auto ref = reference()["perplexity"];
  std::ifstream in(kModel + "/" + ref["text_file"].get<std::string>(), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto tok = tokenizer::Tokenizer::from_path(kModel);
  std::vector<int32_t> ids;
  for (uint32_t id : tok.encode(ss.str(), false)) ids.push_back(static_cast<int32_t>(id));
  ASSERT_EQ(static_cast<int64_t>(ids.size()), ref["tokens"].get<int64_t>());
  auto backend = make_cpu_backend();
  auto model = deepseek_v4::Model::load(kModel, *backend);
  const PerplexityResult r = perplexity(*model, ids, 0, ref["ctx"].get<int64_t>(), 8);
  const double want = ref["ppl"].get<double>();
  std::printf("[trained] held-out ppl %.4f (transformers %.4f)\n", r.ppl(), want);
  EXPECT_EQ(r.chunks, ref["chunks"].get<int64_t>());
  EXPECT_NEAR(r.ppl(), want, 0.01 * want);  // the bar: 1%
  EXPECT_NEAR(r.ppl(), want, 1e-4 * want);  // what fp32 on both sides actually gives
}

TEST(TrainedModel, GreedyContinuationsMatchTransformers) {
  const auto ref = reference()["greedy"];
  EngineConfig cfg;  // model unset: the bundled default
  cfg.show_progress = false;
  LLM llm(cfg);
  auto tok = tokenizer::Tokenizer::from_path(kModel);
  std::vector<Prompt> prompts;
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : ref["prompts"]) {
    const auto ids = p["input_ids"].get<std::vector<int32_t>>();
    // Our tokenizer gives the same ids (BOS added per tokenizer_config's add_bos_token).
    std::vector<int32_t> ours;
    for (uint32_t id : tok.encode(p["prompt"].get<std::string>(), true)) ours.push_back(id);
    EXPECT_EQ(ours, ids) << p["prompt"];
    prompts.emplace_back(p["prompt"].get<std::string>());
    want.push_back(p["greedy_ids"].get<std::vector<int32_t>>());
  }
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = ref["max_new_tokens"].get<int>();
  sp.ignore_eos = true;
  const auto outs = llm.generate(prompts, sp);
  ASSERT_EQ(outs.size(), want.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i].outputs[0].token_ids, want[i]) << outs[i].prompt;
    std::printf("[trained] %s|%s\n", outs[i].prompt.c_str(), outs[i].outputs[0].text.c_str());
  }
}
