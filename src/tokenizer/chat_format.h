// Chat prompt formats of the DeepSeek family, as C++ functions (no template engine at run time).
//
// render_deepseek_v4: the DeepSeek-V4 format: BOS, system prompt (with tool schemas), <｜User｜> /
//   <｜Assistant｜> turns, "chat" (answer after </think>) or "thinking" (model opens with <think>)
//   mode, earlier turns' reasoning dropped, tool calls as DSML blocks, tool results folded into
//   the next user turn as <tool_result> blocks. The generation prompt (<｜Assistant｜> plus
//   <think> or </think>) follows a trailing user turn.
// render_deepseek_v3: the jinja chat_template shipped in DeepSeek-V3's tokenizer_config.json,
//   reproduced exactly (tests render that template with @huggingface/jinja and compare).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

struct ToolCall {
  std::string id;
  std::string type = "function";
  std::string name;
  std::string arguments;  // JSON text, as in OpenAI's function.arguments
};

struct ChatMessage {
  std::string role;                              // system, developer, user, assistant, tool
  std::optional<std::string> content;            // nullopt: JSON null / absent
  std::optional<std::string> reasoning_content;  // assistant's thinking
  std::vector<ToolCall> tool_calls;              // assistant
  std::string tool_call_id;                      // tool
  std::vector<std::string> tools;                // system/developer: OpenAI tool objects (JSON)
  std::string response_format;                   // system/developer: JSON schema text, or ""
};

// OpenAI-style messages: [{"role": ..., "content": ..., "tool_calls": [...], ...}, ...].
// `tools` (OpenAI request-level tools, JSON array text) is attached to the first system message,
// or to a new leading system message. Throws ErrorCode::kInvalidArgument on malformed input.
std::vector<ChatMessage> parse_chat_messages(std::string_view messages_json,
                                             std::string_view tools_json = {});

enum class ThinkingMode { kChat, kThinking };

struct DeepSeekV4Options {
  ThinkingMode thinking = ThinkingMode::kChat;
  bool drop_thinking = true;  // drop reasoning of turns before the last user turn
  bool add_bos = true;
  std::string reasoning_effort;  // "", "high" or "max" (max adds an instruction, thinking only)
  std::string bos_token = "<｜begin▁of▁sentence｜>";
  std::string eos_token = "<｜end▁of▁sentence｜>";
};

std::string render_deepseek_v4(std::span<const ChatMessage> messages,
                               const DeepSeekV4Options& options = {});

std::string render_deepseek_v3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                               std::string_view bos_token = "<｜begin▁of▁sentence｜>");

}  // namespace deepinfer::tokenizer
