// The offline API, shaped like vLLM's:
//
//   deepinfer::LLM llm(deepinfer::EngineConfig{.model = "/models/DeepSeek-V4-Flash"});
//   deepinfer::SamplingParams p;  p.temperature = 0.7f;  p.max_tokens = 256;  p.seq_seed = 42;
//   for (const auto& out : llm.generate({"Hello, my name is"}, p))
//     std::cout << out.outputs[0].text << "\n";
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "deepinfer/engine_config.h"
#include "deepinfer/request_output.h"
#include "deepinfer/sampling_params.h"

namespace deepinfer {

class Engine;

// A prompt is text (tokenized with the model's tokenizer, special tokens added) or token ids.
using Prompt = std::variant<std::string, std::vector<int32_t>>;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

class LLM {
 public:
  explicit LLM(EngineConfig config);
  ~LLM();
  LLM(LLM&&) noexcept;
  LLM& operator=(LLM&&) noexcept;

  // One output per prompt, in prompt order. `params` has one entry for all prompts or one per
  // prompt. A prompt that fails validation throws before anything runs, naming the prompt index.
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts,
                                      const std::vector<SamplingParams>& params);
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts,
                                      const SamplingParams& params = SamplingParams());

  // Applies the model's chat template (generation prompt appended) to each conversation.
  std::vector<RequestOutput> chat(const std::vector<std::vector<ChatMessage>>& conversations,
                                  const SamplingParams& params = SamplingParams(),
                                  bool enable_thinking = false);
  std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt = true,
                                  bool enable_thinking = false) const;

  // Called after every engine step with (finished requests, total requests) of the current
  // generate(); replaces the default progress bar (shown on a terminal when show_progress).
  void set_progress_callback(std::function<void(size_t, size_t)> callback);

  Engine& engine();

 private:
  std::unique_ptr<Engine> engine_;
  EngineConfig config_;
  std::function<void(size_t, size_t)> progress_;
};

// The bundled default model (models/ in the source tree, or DEEPINFER_DEFAULT_MODEL).
std::string default_model_dir();

}  // namespace deepinfer
