// `deepinfer generate`: offline generation through the engine (the embedded default model when
// --model is not given).
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "api/cli/command.h"
#include "api/cli/parse.h"
#include "core/status.h"
#include "deepinfer/llm.h"

namespace deepinfer::cli {
namespace {

struct GenerateArgs {
  std::string model, tokenizer, prompt, prompt_ids, prompts_file, device = "cpu";
  bool chat = false, thinking = false, json = false, ignore_eos = false;
  int max_tokens = 64, top_k = 0, logprobs = -2;
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  float presence_penalty = 0, frequency_penalty = 0, repetition_penalty = 1.0f;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  int max_num_seqs = 256;
  int64_t max_prefill_tokens = 8192;
};

// Prompts from a file: .jsonl lines hold a JSON string or {"prompt": ...} /
// {"prompt_token_ids": [...]}; any other file holds one text prompt per line.
std::vector<Prompt> read_prompts_file(const std::string& path) {
  std::ifstream in(path);
  DI_CHECK(in.good(), ErrorCode::kNotFound, "--prompts-file: cannot open '{}'", path);
  const bool jsonl = path.size() > 6 && path.substr(path.size() - 6) == ".jsonl";
  std::vector<Prompt> prompts;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    if (!jsonl) {
      prompts.emplace_back(line);
      continue;
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      fail(ErrorCode::kInvalidArgument, "--prompts-file {} line {}: invalid JSON ({})", path, n,
           e.what());
    }
    if (j.is_string()) {
      prompts.emplace_back(j.get<std::string>());
    } else if (j.is_object() && j.contains("prompt") && j["prompt"].is_string()) {
      prompts.emplace_back(j["prompt"].get<std::string>());
    } else if (j.is_object() && j.contains("prompt_token_ids") &&
               j["prompt_token_ids"].is_array()) {
      prompts.emplace_back(j["prompt_token_ids"].get<std::vector<int32_t>>());
    } else {
      fail(ErrorCode::kInvalidArgument,
           "--prompts-file {} line {}: expected a string or an object with \"prompt\" or "
           "\"prompt_token_ids\"",
           path, n);
    }
  }
  DI_CHECK(!prompts.empty(), ErrorCode::kInvalidArgument, "--prompts-file {} holds no prompts",
           path);
  return prompts;
}

nlohmann::json stop_reason_json(const CompletionOutput& c) {
  if (const auto* s = std::get_if<std::string>(&c.stop_reason)) return *s;
  if (const auto* t = std::get_if<int32_t>(&c.stop_reason)) return *t;
  return nullptr;
}

int run_generate(const GenerateArgs& a) {
  const int sources = !a.prompt.empty() + !a.prompt_ids.empty() + !a.prompts_file.empty();
  DI_CHECK(sources == 1, ErrorCode::kInvalidArgument,
           "give exactly one of --prompt, --prompt-ids, --prompts-file");
  EngineConfig cfg;
  cfg.model = a.model;
  cfg.tokenizer = a.tokenizer;
  cfg.device = a.device;
  cfg.max_num_seqs = a.max_num_seqs;
  cfg.max_prefill_tokens = a.max_prefill_tokens;
  LLM llm(cfg);

  SamplingParams p;
  p.max_tokens = a.max_tokens;
  p.temperature = a.temperature;
  p.top_p = a.top_p;
  p.top_k = a.top_k;
  p.min_p = a.min_p;
  p.presence_penalty = a.presence_penalty;
  p.frequency_penalty = a.frequency_penalty;
  p.repetition_penalty = a.repetition_penalty;
  p.seq_seed = a.seed;
  p.ignore_eos = a.ignore_eos;
  p.stop = a.stop;
  if (a.logprobs != -2) p.logprobs = a.logprobs;

  std::vector<RequestOutput> outs;
  if (a.chat) {
    DI_CHECK(!a.prompt.empty(), ErrorCode::kInvalidArgument, "--chat needs --prompt");
    outs = llm.chat({{ChatMessage{"user", a.prompt}}}, p, a.thinking);
  } else {
    std::vector<Prompt> prompts;
    if (!a.prompt.empty()) prompts.emplace_back(a.prompt);
    if (!a.prompt_ids.empty()) prompts.emplace_back(parse_id_list(a.prompt_ids, "--prompt-ids"));
    if (!a.prompts_file.empty()) prompts = read_prompts_file(a.prompts_file);
    outs = llm.generate(prompts, p);
  }
  for (const RequestOutput& o : outs) {
    const CompletionOutput& c = o.outputs.at(0);
    if (a.json) {
      nlohmann::json j = {{"request_id", o.request_id},
                          {"prompt", o.prompt},
                          {"prompt_token_ids", o.prompt_token_ids},
                          {"text", c.text},
                          {"token_ids", c.token_ids},
                          {"finish_reason", c.finish_reason.value_or("")},
                          {"stop_reason", stop_reason_json(c)}};
      if (c.logprobs) j["cumulative_logprob"] = c.cumulative_logprob;
      std::cout << j.dump() << "\n";
    } else {
      std::cout << o.prompt << c.text << "\n";
      std::cerr << "[" << c.token_ids.size() << " tokens, finish_reason "
                << c.finish_reason.value_or("?") << "]\n";
    }
  }
  return 0;
}

CommandRegistrar reg(
    "generate", "Generate text with the engine (the bundled tiny model when --model is unset)",
    [](CLI::App& sub) -> CommandFn {
      auto a = std::make_shared<GenerateArgs>();
      sub.add_option("--model", a->model, "checkpoint directory (default: the bundled model)");
      sub.add_option("--tokenizer", a->tokenizer, "tokenizer.json or its directory");
      sub.add_option("--device", a->device, "cpu, cuda or cuda:N")->capture_default_str();
      sub.add_option("--prompt", a->prompt, "a text prompt");
      sub.add_option("--prompt-ids", a->prompt_ids, "a prompt as comma-separated token ids");
      sub.add_option("--prompts-file", a->prompts_file,
                     "one text prompt per line, or .jsonl of strings / {\"prompt\"} / "
                     "{\"prompt_token_ids\"}");
      sub.add_flag("--chat", a->chat, "apply the chat template to --prompt (one user turn)");
      sub.add_flag("--thinking", a->thinking, "with --chat: thinking mode");
      sub.add_option("--max-tokens", a->max_tokens, "tokens to generate at most")
          ->capture_default_str();
      sub.add_option("--temperature", a->temperature, "0 = greedy")->capture_default_str();
      sub.add_option("--top-p", a->top_p)->capture_default_str();
      sub.add_option("--top-k", a->top_k, "0 = off")->capture_default_str();
      sub.add_option("--min-p", a->min_p)->capture_default_str();
      sub.add_option("--presence-penalty", a->presence_penalty)->capture_default_str();
      sub.add_option("--frequency-penalty", a->frequency_penalty)->capture_default_str();
      sub.add_option("--repetition-penalty", a->repetition_penalty)->capture_default_str();
      sub.add_option("--seed", a->seed, "seq_seed of every request (random when unset)");
      sub.add_option("--stop", a->stop, "stop string (repeatable)");
      sub.add_option("--logprobs", a->logprobs, "top-k logprobs per token (-1 = all)");
      sub.add_flag("--ignore-eos", a->ignore_eos, "keep generating after EOS");
      sub.add_flag("--json", a->json, "one JSON object per request on stdout");
      sub.add_option("--max-num-seqs", a->max_num_seqs, "sequences per decode step")
          ->capture_default_str();
      sub.add_option("--max-prefill-tokens", a->max_prefill_tokens,
                     "prompt tokens per prefill step")
          ->capture_default_str();
      return [a] { return run_generate(*a); };
    });

}  // namespace
}  // namespace deepinfer::cli
