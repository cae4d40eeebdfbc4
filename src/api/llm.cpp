#include "deepinfer/llm.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/env.h"
#include "core/status.h"
#include "engine/engine.h"
#include "tokenizer/chat_format.h"

namespace deepinfer {

namespace {

// A tqdm-like bar on stderr: "Processed prompts: 37/100 [00:04, 9.1 it/s]".
class ProgressBar {
 public:
  explicit ProgressBar(size_t total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  void update(size_t done) {
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const int width = 30;
    const int filled = total_ ? static_cast<int>(width * done / total_) : width;
    std::fprintf(stderr, "\rProcessed prompts: %3zu%% |%s%s| %zu/%zu [%.1fs, %.2f it/s]",
                 total_ ? 100 * done / total_ : 100, std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), done, total_, secs,
                 secs > 0 ? done / secs : 0.0);
    if (done == total_) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  size_t total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::string default_model_dir() {
  const std::string from_env = env::get_string("DEEPINFER_DEFAULT_MODEL");
  if (!from_env.empty()) return from_env;
  // Next to the binary's source tree (build/ lives in the checkout), else the compiled-in path.
  const std::filesystem::path compiled =
      std::filesystem::path(DEEPINFER_SOURCE_DIR) / "models" / "deepseek-v4-tiny-en";
  return compiled.string();
}

LLM::LLM(EngineConfig config) : config_(std::move(config)) {
  if (config_.model.empty()) config_.model = default_model_dir();
  engine_ = std::make_unique<Engine>(config_);
}

LLM::~LLM() = default;
LLM::LLM(LLM&&) noexcept = default;
LLM& LLM::operator=(LLM&&) noexcept = default;

Engine& LLM::engine() {
  return *engine_;
}

void LLM::set_progress_callback(std::function<void(size_t, size_t)> callback) {
  progress_ = std::move(callback);
}

std::vector<RequestOutput> LLM::generate(const std::vector<Prompt>& prompts,
                                         const SamplingParams& params) {
  return generate(prompts, std::vector<SamplingParams>{params});
}

std::vector<RequestOutput> LLM::generate(const std::vector<Prompt>& prompts,
                                         const std::vector<SamplingParams>& params) {
  DI_CHECK(params.size() == 1 || params.size() == prompts.size(), ErrorCode::kInvalidArgument,
           "sampling_params: {} given for {} prompts (give one, or one per prompt)", params.size(),
           prompts.size());
  // Validate everything first, so a bad prompt fails before any work runs.
  const int vocab = engine_->model_config().vocab_size;
  for (size_t i = 0; i < prompts.size(); ++i) {
    try {
      params[params.size() == 1 ? 0 : i].validate(vocab);
    } catch (const Error& e) {
      fail(e.code(), "prompt {}: {}", i, e.what());
    }
  }
  std::vector<std::string> ids;
  std::vector<RequestOutput> results(prompts.size());
  std::unordered_map<std::string, size_t> index;
  try {
    for (size_t i = 0; i < prompts.size(); ++i) {
      EngineRequest req;
      req.params = params[params.size() == 1 ? 0 : i];
      if (const auto* text = std::get_if<std::string>(&prompts[i]))
        req.prompt = *text;
      else
        req.prompt_token_ids = std::get<std::vector<int32_t>>(prompts[i]);
      try {
        ids.push_back(engine_->add_request(std::move(req)));
      } catch (const Error& e) {
        fail(e.code(), "prompt {}: {}", i, e.what());
      }
      index[ids.back()] = i;
    }
  } catch (...) {
    for (const auto& id : ids) engine_->abort_request(id);
    while (engine_->has_unfinished_requests()) engine_->step();  // release what was queued
    throw;
  }

  std::optional<ProgressBar> bar;
  if (!progress_ && config_.show_progress && isatty(STDERR_FILENO) && prompts.size() > 1)
    bar.emplace(prompts.size());
  size_t done = 0;
  while (engine_->has_unfinished_requests()) {
    for (RequestOutput& out : engine_->step()) {
      if (!out.finished) continue;
      auto it = index.find(out.request_id);
      if (it == index.end()) continue;
      results[it->second] = std::move(out);
      ++done;
      if (progress_) progress_(done, prompts.size());
      if (bar) bar->update(done);
    }
  }
  return results;
}

std::string LLM::apply_chat_template(const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt, bool enable_thinking) const {
  const tokenizer::Tokenizer* tok = engine_->tokenizer();
  DI_CHECK(tok != nullptr, ErrorCode::kInvalidArgument,
           "chat needs a tokenizer, and the model directory '{}' has none", config_.model);
  std::vector<tokenizer::ChatMessage> msgs;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    DI_CHECK(
        m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "developer",
        ErrorCode::kInvalidArgument,
        "messages[{}].role '{}' is not one of system, "
        "developer, user, assistant",
        i, m.role);
    tokenizer::ChatMessage cm;
    cm.role = m.role;
    cm.content = m.content;
    msgs.push_back(std::move(cm));
  }
  tokenizer::DeepSeekV4Options opts;
  opts.thinking =
      enable_thinking ? tokenizer::ThinkingMode::kThinking : tokenizer::ThinkingMode::kChat;
  if (tok->config().bos_token) opts.bos_token = *tok->config().bos_token;
  if (tok->config().eos_token) opts.eos_token = *tok->config().eos_token;
  std::string text = tokenizer::render_deepseek_v4(msgs, opts);
  (void)add_generation_prompt;  // the V4 format appends it after a trailing user turn
  return text;
}

std::vector<RequestOutput> LLM::chat(const std::vector<std::vector<ChatMessage>>& conversations,
                                     const SamplingParams& params, bool enable_thinking) {
  const tokenizer::Tokenizer* tok = engine_->tokenizer();
  std::vector<Prompt> prompts;
  for (const auto& conv : conversations) {
    // The rendered text already holds BOS: tokenize it without adding special tokens again.
    const std::string text = apply_chat_template(conv, true, enable_thinking);
    std::vector<int32_t> ids;
    for (uint32_t id : tok->encode(text, /*add_special_tokens=*/false))
      ids.push_back(static_cast<int32_t>(id));
    prompts.emplace_back(std::move(ids));
  }
  return generate(prompts, params);
}

}  // namespace deepinfer
