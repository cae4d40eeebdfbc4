// DeepSeek chat formats. The V4 format is specified by the model's reference encoder; the strings
// below are that format's fixed text and must not be edited (the model was trained on them).
#include "tokenizer/chat_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "core/status.h"

namespace deepinfer::tokenizer {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kDsml = "｜DSML｜";

constexpr std::string_view kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";

constexpr std::string_view kResponseFormatPrefix =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

// The tools section; @D@ stands for the DSML marker, @S@ / @E@ for <think> / </think>, @T@ for
// the tool schemas (one JSON object per line).
constexpr std::string_view kToolsTemplate =
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can "
    "invoke tools by writing a \"<@D@tool_calls>\" block like the following:\n\n"
    "<@D@tool_calls>\n<@D@invoke name=\"$TOOL_NAME\">\n"
    "<@D@parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</@D@parameter>\n"
    "...\n</@D@invoke>\n<@D@invoke name=\"$TOOL_NAME2\">\n...\n</@D@invoke>\n</@D@tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by @S@), you MUST output your complete reasoning "
    "inside @S@...@E@ BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after @E@ with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n@T@\n\n"
    "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
    "calls.\n";

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

// Python's json.dumps(v, ensure_ascii=False): ", " and ": " separators, raw non-ASCII.
void py_json(const ojson& v, std::string& out) {
  switch (v.type()) {
    case ojson::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        py_json(ojson(it.key()), out);
        out += ": ";
        py_json(it.value(), out);
      }
      out += '}';
      return;
    }
    case ojson::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        py_json(v[i], out);
      }
      out += ']';
      return;
    }
    case ojson::value_t::string: {
      out += '"';
      for (unsigned char c : v.get_ref<const std::string&>()) {
        switch (c) {
          case '"':
            out += "\\\"";
            break;
          case '\\':
            out += "\\\\";
            break;
          case '\n':
            out += "\\n";
            break;
          case '\r':
            out += "\\r";
            break;
          case '\t':
            out += "\\t";
            break;
          case '\b':
            out += "\\b";
            break;
          case '\f':
            out += "\\f";
            break;
          default:
            if (c < 0x20) {
              char buf[8];
              std::snprintf(buf, sizeof(buf), "\\u%04x", c);
              out += buf;
            } else {
              out += static_cast<char>(c);
            }
        }
      }
      out += '"';
      return;
    }
    default:
      out += v.dump();
  }
}

std::string py_json(const ojson& v) {
  std::string s;
  py_json(v, s);
  return s;
}

ojson parse_ordered(const std::string& text, std::string_view what) {
  try {
    return ojson::parse(text);
  } catch (const ojson::exception& e) {
    fail(ErrorCode::kInvalidArgument, "chat: {} is not valid JSON: {}", what, e.what());
  }
}

std::string render_tools(const std::vector<std::string>& tools) {
  std::string schemas;
  for (size_t i = 0; i < tools.size(); ++i) {
    ojson t = parse_ordered(tools[i], "tool definition");
    DI_CHECK(t.is_object() && t.contains("function"), ErrorCode::kInvalidArgument,
             "chat: tool {} has no 'function' object", i);
    if (i) schemas += '\n';
    schemas += py_json(t["function"]);
  }
  std::string s(kToolsTemplate);
  replace_all(s, "@D@", kDsml);
  replace_all(s, "@S@", kThinkStart);
  replace_all(s, "@E@", kThinkEnd);
  replace_all(s, "@T@", schemas);
  return s;
}

std::string render_response_format(const std::string& schema) {
  return std::string(kResponseFormatPrefix) + py_json(parse_ordered(schema, "response_format"));
}

// One DSML invoke block; arguments that are not a JSON object become a single "arguments" string.
std::string render_invoke(const ToolCall& tc) {
  ojson args;
  try {
    args = ojson::parse(tc.arguments);
  } catch (const ojson::exception&) {
  }
  if (!args.is_object()) args = ojson{{"arguments", tc.arguments}};
  std::string params;
  bool first = true;
  for (auto it = args.begin(); it != args.end(); ++it) {
    if (!first) params += '\n';
    first = false;
    bool is_str = it.value().is_string();
    params += "<" + std::string(kDsml) + "parameter name=\"" + it.key() + "\" string=\"" +
              (is_str ? "true" : "false") + "\">" +
              (is_str ? it.value().get<std::string>() : py_json(it.value())) + "</" +
              std::string(kDsml) + "parameter>";
  }
  return "<" + std::string(kDsml) + "invoke name=\"" + tc.name + "\">\n" + params + "\n</" +
         std::string(kDsml) + "invoke>";
}

struct Block {
  bool tool_result;
  std::string text;
  std::string tool_use_id;
};

struct Msg {
  ChatMessage m;
  std::vector<Block> blocks;
  bool has_blocks = false;
};

bool is_user_like(const Msg& m) {
  return m.m.role == "user" || m.m.role == "developer";
}

int64_t last_user_index(const std::vector<Msg>& msgs) {
  for (int64_t i = static_cast<int64_t>(msgs.size()) - 1; i >= 0; --i)
    if (is_user_like(msgs[i])) return i;
  return -1;
}

// Tool results become <tool_result> blocks of a user turn; consecutive user turns merge.
std::vector<Msg> merge_tool_messages(std::span<const ChatMessage> messages) {
  std::vector<Msg> merged;
  for (const ChatMessage& m : messages) {
    bool tool = m.role == "tool";
    if (tool || m.role == "user") {
      Block b{tool, m.content.value_or(""), m.tool_call_id};
      if (!merged.empty() && merged.back().m.role == "user" && merged.back().has_blocks) {
        merged.back().blocks.push_back(std::move(b));
        continue;
      }
      Msg u;
      u.m.role = "user";
      if (!tool) u.m.content = m.content.value_or("");
      u.has_blocks = true;
      u.blocks.push_back(std::move(b));
      merged.push_back(std::move(u));
      continue;
    }
    DI_CHECK(m.role == "system" || m.role == "assistant" || m.role == "developer",
             ErrorCode::kInvalidArgument, "chat: unknown message role '{}'", m.role);
    merged.push_back(Msg{m, {}, false});
  }
  // Tool results follow the order of the calls that produced them.
  std::map<std::string, size_t> order;
  for (Msg& msg : merged) {
    if (msg.m.role == "assistant" && !msg.m.tool_calls.empty()) {
      order.clear();
      for (size_t i = 0; i < msg.m.tool_calls.size(); ++i)
        if (!msg.m.tool_calls[i].id.empty()) order[msg.m.tool_calls[i].id] = i;
    } else if (msg.m.role == "user" && msg.has_blocks) {
      std::vector<Block> results;
      for (const Block& b : msg.blocks)
        if (b.tool_result) results.push_back(b);
      if (results.size() < 2 || order.empty()) continue;
      auto rank = [&](const Block& b) {
        auto it = order.find(b.tool_use_id);
        return it == order.end() ? size_t{0} : it->second;
      };
      std::stable_sort(results.begin(), results.end(),
                       [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
      size_t k = 0;
      for (Block& b : msg.blocks)
        if (b.tool_result) b = results[k++];
    }
  }
  return merged;
}

// Before the last user turn: assistant reasoning is removed and developer turns are dropped.
std::vector<Msg> drop_thinking(const std::vector<Msg>& msgs) {
  int64_t last = last_user_index(msgs);
  std::vector<Msg> out;
  for (int64_t i = 0; i < static_cast<int64_t>(msgs.size()); ++i) {
    const Msg& m = msgs[i];
    if (m.m.role == "user" || m.m.role == "system" || i >= last) {
      out.push_back(m);
    } else if (m.m.role == "assistant") {
      out.push_back(m);
      out.back().m.reasoning_content.reset();
    }
  }
  return out;
}

std::string render_v4_message(size_t index, const std::vector<Msg>& msgs,
                              const DeepSeekV4Options& o, bool drop) {
  const Msg& msg = msgs[index];
  const ChatMessage& m = msg.m;
  bool thinking = o.thinking == ThinkingMode::kThinking;
  int64_t last_user = last_user_index(msgs);
  std::string p;
  if (index == 0 && thinking && o.reasoning_effort == "max") p += kReasoningEffortMax;
  auto extras = [&](std::string& s) {
    if (!m.tools.empty()) s += "\n\n" + render_tools(m.tools);
    if (!m.response_format.empty()) s += "\n\n" + render_response_format(m.response_format);
  };
  if (m.role == "system") {
    p += m.content.value_or("");
    extras(p);
  } else if (m.role == "developer") {
    DI_CHECK(m.content && !m.content->empty(), ErrorCode::kInvalidArgument,
             "chat: developer message without content");
    p += kUser;
    p += *m.content;
    extras(p);
  } else if (m.role == "user") {
    p += kUser;
    if (!msg.blocks.empty()) {
      for (size_t i = 0; i < msg.blocks.size(); ++i) {
        if (i) p += "\n\n";
        const Block& b = msg.blocks[i];
        p += b.tool_result ? "<tool_result>" + b.text + "</tool_result>" : b.text;
      }
    } else {
      p += m.content.value_or("");
    }
  } else {  // assistant
    std::string calls;
    if (!m.tool_calls.empty()) {
      std::string inner;
      for (size_t i = 0; i < m.tool_calls.size(); ++i)
        inner += (i ? "\n" : "") + render_invoke(m.tool_calls[i]);
      calls = "\n\n<" + std::string(kDsml) + "tool_calls>\n" + inner + "\n</" + std::string(kDsml) +
              "tool_calls>";
    }
    if (thinking && (!drop || static_cast<int64_t>(index) > last_user))
      p += m.reasoning_content.value_or("") + std::string(kThinkEnd);
    p += m.content.value_or("") + calls + o.eos_token;
  }
  // The turn change: after a user turn that ends the conversation or precedes the assistant.
  if (index + 1 < msgs.size() && msgs[index + 1].m.role != "assistant") return p;
  if (is_user_like(msg)) {
    p += kAssistant;
    p += thinking && (!drop || static_cast<int64_t>(index) >= last_user) ? kThinkStart : kThinkEnd;
  }
  return p;
}

}  // namespace

std::string render_deepseek_v4(std::span<const ChatMessage> messages, const DeepSeekV4Options& o) {
  DI_CHECK(
      o.reasoning_effort.empty() || o.reasoning_effort == "high" || o.reasoning_effort == "max",
      ErrorCode::kInvalidArgument, "chat: reasoning_effort must be 'high' or 'max', got '{}'",
      o.reasoning_effort);
  std::vector<Msg> msgs = merge_tool_messages(messages);
  bool drop = o.drop_thinking;
  for (const Msg& m : msgs) drop = drop && m.m.tools.empty();  // tool use keeps all reasoning
  if (o.thinking == ThinkingMode::kThinking && drop) msgs = drop_thinking(msgs);
  std::string prompt = o.add_bos ? o.bos_token : std::string();
  for (size_t i = 0; i < msgs.size(); ++i) prompt += render_v4_message(i, msgs, o, drop);
  return prompt;
}

std::string render_deepseek_v3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                               std::string_view bos_token) {
  std::string system;
  bool first_sp = true;
  for (const ChatMessage& m : messages) {
    if (m.role != "system") continue;
    system += (first_sp ? "" : "\n\n") + m.content.value_or("");
    first_sp = false;
  }
  std::string p = std::string(bos_token) + system;
  bool is_first = false, is_tool = false, is_output_first = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      is_tool = false;
      p += "<｜User｜>" + m.content.value_or("");
    }
    if (m.role == "assistant" && !m.content) {
      is_tool = false;
      for (const ToolCall& t : m.tool_calls) {
        std::string call = t.type + "<｜tool▁sep｜>" + t.name + "\n```json\n" + t.arguments +
                           "\n```<｜tool▁call▁end｜>";
        if (!is_first) {
          p += "<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" + call;
          is_first = true;
        } else {
          p += "\n<｜tool▁call▁begin｜>" + call + "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>";
        }
      }
    }
    if (m.role == "assistant" && m.content) {
      if (is_tool) {
        p += "<｜tool▁outputs▁end｜>" + *m.content + "<｜end▁of▁sentence｜>";
        is_tool = false;
      } else {
        p += "<｜Assistant｜>" + *m.content + "<｜end▁of▁sentence｜>";
      }
    }
    if (m.role == "tool") {
      is_tool = true;
      std::string out =
          "<｜tool▁output▁begin｜>" + m.content.value_or("") + "<｜tool▁output▁end｜>";
      p += is_output_first ? "<｜tool▁outputs▁begin｜>" + out : "\n" + out;
      is_output_first = false;
    }
  }
  if (is_tool) p += "<｜tool▁outputs▁end｜>";
  if (add_generation_prompt && !is_tool) p += "<｜Assistant｜>";
  return p;
}

std::vector<ChatMessage> parse_chat_messages(std::string_view messages_json,
                                             std::string_view tools_json) {
  ojson j = parse_ordered(std::string(messages_json), "messages");
  DI_CHECK(j.is_array(), ErrorCode::kInvalidArgument, "chat: messages must be a JSON array");
  auto opt_text = [](const ojson& v, const char* what) -> std::optional<std::string> {
    if (v.is_null()) return std::nullopt;
    if (v.is_string()) return v.get<std::string>();
    DI_CHECK(v.is_array(), ErrorCode::kInvalidArgument, "chat: {} must be a string", what);
    std::string s;  // OpenAI content parts: only text parts are supported
    for (const ojson& part : v) {
      DI_CHECK(part.value("type", "") == "text" && part.contains("text"),
               ErrorCode::kInvalidArgument, "chat: only text content parts are supported");
      s += part["text"].get<std::string>();
    }
    return s;
  };
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const ojson& e = j[i];
    DI_CHECK(e.is_object() && e.contains("role") && e["role"].is_string(),
             ErrorCode::kInvalidArgument, "chat: message {} needs a string 'role'", i);
    ChatMessage m;
    m.role = e["role"].get<std::string>();
    if (e.contains("content")) m.content = opt_text(e["content"], "content");
    if (e.contains("reasoning_content"))
      m.reasoning_content = opt_text(e["reasoning_content"], "reasoning_content");
    if (e.contains("tool_call_id") && e["tool_call_id"].is_string())
      m.tool_call_id = e["tool_call_id"].get<std::string>();
    if (e.contains("tool_calls") && e["tool_calls"].is_array()) {
      for (const ojson& tc : e["tool_calls"]) {
        DI_CHECK(tc.contains("function") && tc["function"].is_object(), ErrorCode::kInvalidArgument,
                 "chat: message {}: tool call without 'function'", i);
        ToolCall c;
        c.id = tc.value("id", "");
        c.type = tc.value("type", "function");
        c.name = tc["function"].value("name", "");
        const ojson& args =
            tc["function"].contains("arguments") ? tc["function"]["arguments"] : ojson("{}");
        c.arguments = args.is_string() ? args.get<std::string>() : args.dump();
        m.tool_calls.push_back(std::move(c));
      }
    }
    if (e.contains("tools") && e["tools"].is_array())
      for (const ojson& t : e["tools"]) m.tools.push_back(t.dump());
    if (e.contains("response_format") && !e["response_format"].is_null())
      m.response_format = e["response_format"].dump();
    out.push_back(std::move(m));
  }
  if (!tools_json.empty()) {
    ojson tools = parse_ordered(std::string(tools_json), "tools");
    DI_CHECK(tools.is_array(), ErrorCode::kInvalidArgument, "chat: tools must be a JSON array");
    auto sys = std::find_if(out.begin(), out.end(), [](auto& m) { return m.role == "system"; });
    if (sys == out.end()) {
      ChatMessage m;
      m.role = "system";
      sys = out.insert(out.begin(), std::move(m));
    }
    for (const ojson& t : tools) sys->tools.push_back(t.dump());
  }
  return out;
}

}  // namespace deepinfer::tokenizer
