// Chat formats: DeepSeek-V4 golden prompts, and the DeepSeek-V3 jinja template from
// tokenizer_config.json rendered by @huggingface/jinja vs our C++ rendering.
#include <gtest/gtest.h>

#include <random>

#include "core/status.h"
#include "test_util.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer::testing {
namespace {

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";

ChatMessage msg(std::string role, std::optional<std::string> content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

DeepSeekV4Options thinking() {
  DeepSeekV4Options o;
  o.thinking = ThinkingMode::kThinking;
  return o;
}

TEST(ChatV4, ChatModeSystemAndUser) {
  std::vector<ChatMessage> m{msg("system", "You are helpful."), msg("user", "Hi")};
  EXPECT_EQ(render_deepseek_v4(m), kBos + "You are helpful.<｜User｜>Hi<｜Assistant｜></think>");
  EXPECT_EQ(render_deepseek_v4(m, thinking()),
            kBos + "You are helpful.<｜User｜>Hi<｜Assistant｜><think>");
  DeepSeekV4Options no_bos;
  no_bos.add_bos = false;
  EXPECT_EQ(render_deepseek_v4(m, no_bos), "You are helpful.<｜User｜>Hi<｜Assistant｜></think>");
}

TEST(ChatV4, ThinkingDropsEarlierReasoning) {
  ChatMessage a = msg("assistant", "2");
  a.reasoning_content = "add";
  std::vector<ChatMessage> m{msg("user", "1+1?"), a, msg("user", "times 3?")};
  EXPECT_EQ(render_deepseek_v4(m, thinking()), kBos + "<｜User｜>1+1?<｜Assistant｜></think>2" +
                                                   kEos +
                                                   "<｜User｜>times 3?<｜Assistant｜><think>");
  DeepSeekV4Options keep = thinking();
  keep.drop_thinking = false;
  EXPECT_EQ(render_deepseek_v4(m, keep), kBos + "<｜User｜>1+1?<｜Assistant｜><think>add</think>2" +
                                             kEos + "<｜User｜>times 3?<｜Assistant｜><think>");
  // Chat mode never shows reasoning.
  EXPECT_EQ(render_deepseek_v4(m), kBos + "<｜User｜>1+1?<｜Assistant｜></think>2" + kEos +
                                       "<｜User｜>times 3?<｜Assistant｜></think>");
}

TEST(ChatV4, LastAssistantTurnKeepsReasoning) {
  ChatMessage a = msg("assistant", "4");
  a.reasoning_content = "2+2";
  std::vector<ChatMessage> m{msg("user", "2+2?"), a};
  EXPECT_EQ(render_deepseek_v4(m, thinking()),
            kBos + "<｜User｜>2+2?<｜Assistant｜><think>2+2</think>4" + kEos);
}

TEST(ChatV4, DeveloperTurnsBeforeLastUserAreDroppedWhenThinking) {
  ChatMessage a = msg("assistant", "y");
  a.reasoning_content = "x";
  std::vector<ChatMessage> m{msg("developer", "D"), msg("user", "u1"), a, msg("user", "u2")};
  EXPECT_EQ(render_deepseek_v4(m, thinking()), kBos + "<｜User｜>u1<｜Assistant｜></think>y" +
                                                   kEos + "<｜User｜>u2<｜Assistant｜><think>");
  EXPECT_EQ(render_deepseek_v4(m), kBos + "<｜User｜>D<｜User｜>u1<｜Assistant｜></think>y" + kEos +
                                       "<｜User｜>u2<｜Assistant｜></think>");
}

TEST(ChatV4, ConsecutiveUserTurnsMerge) {
  std::vector<ChatMessage> m{msg("user", "a"), msg("user", "b")};
  EXPECT_EQ(render_deepseek_v4(m), kBos + "<｜User｜>a\n\nb<｜Assistant｜></think>");
}

TEST(ChatV4, ReasoningEffortMax) {
  DeepSeekV4Options o = thinking();
  o.reasoning_effort = "max";
  std::vector<ChatMessage> m{msg("user", "Q")};
  EXPECT_EQ(render_deepseek_v4(m, o),
            kBos +
                "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very "
                "thorough in your thinking and comprehensively decompose the problem to resolve "
                "the root cause, rigorously stress-testing your logic against all potential "
                "paths, edge cases, and adversarial scenarios.\nExplicitly write out your entire "
                "deliberation process, documenting every intermediate step, considered "
                "alternative, and rejected hypothesis to ensure absolutely no assumption is left "
                "unchecked.\n\n<｜User｜>Q<｜Assistant｜><think>");
  o.reasoning_effort = "high";  // accepted, renders nothing extra
  EXPECT_EQ(render_deepseek_v4(m, o), kBos + "<｜User｜>Q<｜Assistant｜><think>");
  o.reasoning_effort = "low";
  EXPECT_THROW(render_deepseek_v4(m, o), Error);
}

TEST(ChatV4, ToolsToolCallsAndResults) {
  ChatMessage sys = msg("system", "S");
  sys.tools.push_back(
      R"({"type":"function","function":{"name":"get_weather","description":"Get weather",)"
      R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}})");
  ChatMessage call = msg("assistant", "");
  call.tool_calls = {{"a", "function", "get_weather", R"({"city": "Paris"})"},
                     {"b", "function", "get_weather", R"({"city":"Rome","days":2})"}};
  ChatMessage r1 = msg("tool", "cloudy");
  r1.tool_call_id = "b";
  ChatMessage r2 = msg("tool", "sunny");
  r2.tool_call_id = "a";
  std::vector<ChatMessage> m{sys, msg("user", "Weather in Paris and Rome?"), call, r1, r2};
  std::string tools =
      "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can "
      "invoke tools by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n"
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"$TOOL_NAME\">\n<｜DSML｜parameter "
      "name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n...\n"
      "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"$TOOL_NAME2\">\n...\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>\n\nString parameters should be specified as is and set "
      "`string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value "
      "in JSON format and set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by "
      "<think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool "
      "calls or final response.\n\nOtherwise, output directly after </think> with tool calls or "
      "final response.\n\n### Available Tool Schemas\n\n{\"name\": \"get_weather\", "
      "\"description\": \"Get weather\", \"parameters\": {\"type\": \"object\", \"properties\": "
      "{\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}\n\nYou MUST strictly follow "
      "the above defined tool name and parameter schemas to invoke tool calls.\n";
  std::string calls =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
      "name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke "
      "name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
      "string=\"true\">Rome</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
      "string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  std::string expect = kBos + "S\n\n" + tools +
                       "<｜User｜>Weather in Paris and Rome?<｜Assistant｜></think>" + calls +
                       kEos +
                       "<｜User｜><tool_result>sunny</tool_result>\n\n<tool_result>cloudy"
                       "</tool_result><｜Assistant｜></think>";
  EXPECT_EQ(render_deepseek_v4(m), expect);
  // With tools, thinking mode keeps every turn's reasoning and opens with <think> each time.
  std::string t = render_deepseek_v4(m, thinking());
  EXPECT_NE(t.find("<｜User｜>Weather in Paris and Rome?<｜Assistant｜><think></think>\n\n<｜DSML"),
            std::string::npos)
      << t;
  EXPECT_TRUE(t.ends_with("</tool_result><｜Assistant｜><think>")) << t;
}

TEST(ChatV4, NonJsonArgumentsAndResponseFormat) {
  ChatMessage sys = msg("system", "S");
  sys.response_format = R"({"type":"object","properties":{"n":{"type":"integer"}}})";
  ChatMessage call = msg("assistant", std::nullopt);
  call.tool_calls = {{"", "function", "f", "not json"}};
  std::vector<ChatMessage> m{sys, msg("user", "u"), call};
  EXPECT_EQ(render_deepseek_v4(m),
            kBos +
                "S\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema "
                "to reply:\n{\"type\": \"object\", \"properties\": {\"n\": {\"type\": "
                "\"integer\"}}}<｜User｜>u<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n"
                "<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"arguments\" "
                "string=\"true\">not json</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
                "</｜DSML｜tool_calls>" +
                kEos);
}

TEST(ChatV4, ParseOpenAiMessages) {
  auto m = parse_chat_messages(
      R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
          {"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function",
           "function":{"name":"f","arguments":{"k":1}}}]},
          {"role":"tool","tool_call_id":"x","content":"r"}])",
      R"([{"type":"function","function":{"name":"f"}}])");
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].tools.size(), 1u);
  EXPECT_EQ(m[1].content, "ab");
  EXPECT_FALSE(m[2].content.has_value());
  EXPECT_EQ(m[2].tool_calls[0].arguments, R"({"k":1})");
  EXPECT_EQ(m[3].tool_call_id, "x");
  EXPECT_THROW(parse_chat_messages(R"({"role":"user"})"), Error);
  EXPECT_THROW(parse_chat_messages(R"([{"content":"x"}])"), Error);
  std::vector<ChatMessage> bad{msg("wizard", "x")};
  EXPECT_THROW(render_deepseek_v4(bad), Error);
}

// Random conversations in the shapes the V3 template handles (system prompts, turns, tool-call
// rounds), rendered by the jinja template in tokenizer_config.json and by render_deepseek_v3.
TEST(ChatV3, MatchesJinjaTemplateFromTokenizerConfig) {
  REQUIRE_NODE_MODULES();
  auto tok = Tokenizer::from_path(deepseek_dir());
  ASSERT_FALSE(tok.config().chat_template.empty());
  std::mt19937 rng(11);
  const std::vector<std::string> texts{"Hello!",
                                       "What is 2+2?",
                                       "多语言 テキスト 한국어",
                                       "line1\nline2\n\n",
                                       "  spaces  ",
                                       "{\"json\": [1, 2]}",
                                       "emoji 👩‍💻 and <｜User｜> inside",
                                       "",
                                       "Tab\there",
                                       "Ω≈ç√"};
  auto text = [&] { return texts[rng() % texts.size()]; };
  json cases = json::array();
  std::vector<std::vector<ChatMessage>> convs;
  std::vector<bool> gen;
  for (int c = 0; c < 120; ++c) {
    std::vector<ChatMessage> conv;
    int systems = rng() % 3;
    for (int s = 0; s < systems; ++s) conv.push_back(msg("system", text()));
    int turns = 1 + rng() % 4;
    for (int t = 0; t < turns; ++t) {
      conv.push_back(msg("user", text()));
      if (rng() % 3 == 0) {
        ChatMessage call = msg("assistant", std::nullopt);
        int n = 1 + rng() % 3;
        for (int k = 0; k < n; ++k)
          call.tool_calls.push_back({"id" + std::to_string(k), "function",
                                     "tool_" + std::to_string(rng() % 5),
                                     "{\"q\": \"" + std::to_string(rng() % 100) + "\"}"});
        conv.push_back(call);
        for (int k = 0; k < n; ++k) conv.push_back(msg("tool", text()));
      }
      if (t + 1 < turns || rng() % 2) conv.push_back(msg("assistant", text()));
    }
    if (rng() % 4 == 0) conv.push_back(msg("system", text()));  // a late system prompt
    bool g = rng() % 2;
    json jm = json::array();
    for (const ChatMessage& m : conv) {
      json e = {{"role", m.role}, {"content", m.content ? json(*m.content) : json(nullptr)}};
      if (!m.tool_calls.empty()) {
        e["tool_calls"] = json::array();
        for (const ToolCall& t : m.tool_calls)
          e["tool_calls"].push_back({{"id", t.id},
                                     {"type", t.type},
                                     {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
      }
      jm.push_back(e);
    }
    cases.push_back({{"messages", jm}, {"add_generation_prompt", g}});
    convs.push_back(conv);
    gen.push_back(g);
  }
  json ref = run_reference("jinja", deepseek_dir() + "/tokenizer_config.json", cases);
  ASSERT_EQ(ref.size(), convs.size());
  for (size_t i = 0; i < convs.size(); ++i)
    EXPECT_EQ(render_deepseek_v3(convs[i], gen[i], *tok.config().bos_token),
              ref[i].get<std::string>())
        << "conversation " << i << ": " << cases[i].dump();
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
