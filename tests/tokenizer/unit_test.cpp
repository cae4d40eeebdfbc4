// Unit tests that need no reference: UTF-8 handling, regex semantics, BPE mechanics on a tiny
// vocabulary, load-time errors naming the component, bad input, thread safety.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <thread>

#include "core/status.h"
#include "test_util.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer::testing {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, LossyMatchesRustFromUtf8Lossy) {
  EXPECT_EQ(utf8_lossy("plain ascii"), "plain ascii");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), kFffd);                  // truncated 4-byte sequence
  EXPECT_EQ(utf8_lossy("\xE0\x80"), kFffd + kFffd);              // E0 needs A0..BF next
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(utf8_lossy("a\xC3"), "a" + kFffd);
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), kFffd + kFffd);  // overlong
  EXPECT_EQ(utf8_lossy("\xFF\xFEx"), kFffd + kFffd + "x");
  EXPECT_EQ(utf8_lossy("\xE2\x82\xAC\xE2\x82"), "€" + kFffd);
}

TEST(Utf8, StablePrefixHoldsBackOnlyIncompleteCharacters) {
  EXPECT_EQ(utf8_stable_prefix("ab"), 2u);
  EXPECT_EQ(utf8_stable_prefix("ab\xE2\x82"), 2u);
  EXPECT_EQ(utf8_stable_prefix("ab\xE2\x82\xAC"), 5u);
  EXPECT_EQ(utf8_stable_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8_stable_prefix("\xE2\x41"), 2u);  // already invalid: nothing to wait for
  EXPECT_EQ(utf8_stable_prefix("\x80"), 1u);
  EXPECT_EQ(utf8_stable_prefix("\xE0\x80"), 2u);  // can never complete
  size_t bad = 0;
  EXPECT_FALSE(utf8_valid("ok\xC3(", &bad));
  EXPECT_EQ(bad, 2u);
}

std::vector<Span> matches(std::string_view pattern, std::string_view text) {
  std::vector<Span> out;
  Pattern::regex(pattern, "test").find_all(text, out);
  return out;
}

TEST(Regex, OnigurumaSemantics) {
  EXPECT_EQ(Pattern::translate("\\s+(?!\\S)"), "[\\s\\x{85}]+(?![^\\s\\x{85}])");
  EXPECT_EQ(Pattern::translate("[]\\s]"), "[]\\s\\x{85}]");
  EXPECT_EQ(Pattern::translate("\\p{Han}"), "\\p{Han}");  // scripts are left to PCRE2
  // General categories gain the characters newer than PCRE2's tables (Kawi, Unicode 15).
  EXPECT_EQ(matches("\\p{L}+", "\xF0\x91\xBC\x84").size(), 1u);
  EXPECT_EQ(matches("[\\w]+", "\xF0\x91\xBC\x84_1").size(), 1u);
  EXPECT_EQ(matches("\\P{L}", "\xF0\x91\xBC\x84").size(), 0u);
  EXPECT_EQ(matches("\\pN", "x1").size(), 1u);
  // U+0085 is whitespace for Oniguruma.
  auto m = matches("\\s+", "a\xC2\x85 b");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].start, 1u);
  EXPECT_EQ(m[0].end, 4u);
  // An empty match right after the previous match is skipped.
  m = matches("a*", "baa");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].end, 0u);
  EXPECT_EQ(m[1].start, 1u);
  EXPECT_EQ(m[1].end, 3u);
  EXPECT_THROW(Pattern::regex("(unclosed", "test"), Error);
}

// A tiny byte-level BPE: bytes a b c and space ("Ġ"), merges a+b -> ab, ab+c -> abc, Ġ+a -> Ġa.
std::string tiny_json(const std::string& extra_model = "") {
  return R"({"version":"1.0","truncation":null,"padding":null,
    "added_tokens":[{"id":7,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,
                     "normalized":false,"special":true}],
    "normalizer":null,
    "pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},
    "post_processor":{"type":"ByteLevel"},
    "decoder":{"type":"ByteLevel"},
    "model":{"type":"BPE",)" +
         extra_model + R"("vocab":{"a":0,"b":1,"c":2,"Ġ":3,"ab":4,"abc":5,"Ġa":6},
      "merges":["a b","ab c",["Ġ","a"]]}})";
}

TEST(Bpe, MergesAndSpecialTokens) {
  Tokenizer t = Tokenizer::from_json(tiny_json(), R"({"bos_token":"<s>","add_bos_token":true})");
  EXPECT_EQ(t.encode("abc"), (std::vector<uint32_t>{5}));
  EXPECT_EQ(t.encode("abcab a"), (std::vector<uint32_t>{5, 4, 6}));
  EXPECT_EQ(t.encode("cba"), (std::vector<uint32_t>{2, 1, 0}));
  EXPECT_EQ(t.encode("ab<s>c", true), (std::vector<uint32_t>{7, 4, 7, 2}));
  EXPECT_EQ(t.encode("dd"), (std::vector<uint32_t>{}));  // no unk: unknown bytes vanish, as in HF
  EXPECT_EQ(t.decode(std::vector<uint32_t>{7, 5, 6, 99}), "<s>abc a");
  EXPECT_EQ(t.decode(std::vector<uint32_t>{7, 5}, true), "abc");
  EXPECT_EQ(t.token_to_id("<s>"), 7u);
  EXPECT_EQ(t.id_to_token(6), "Ġa");
  EXPECT_EQ(t.vocab_size(), 8u);
  EXPECT_EQ(t.id_limit(), 8u);
  EXPECT_TRUE(t.is_special(7));
  // ignore_merges: a whole word in the vocab wins even where merges would not build it.
  Tokenizer im = Tokenizer::from_json(tiny_json(R"("ignore_merges":true,)"));
  EXPECT_EQ(im.encode("abc"), (std::vector<uint32_t>{5}));
}

void expect_error(const std::string& json_text, ErrorCode code, const std::string& needle) {
  try {
    Tokenizer::from_json(json_text);
    ADD_FAILURE() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::string with(const std::string& key, const std::string& value) {
  auto j = nlohmann::json::parse(tiny_json());
  j[key] = nlohmann::json::parse(value);
  return j.dump();
}

TEST(Errors, UnsupportedComponentsAreNamedAtLoad) {
  expect_error(with("pre_tokenizer", R"({"type":"Metaspace","replacement":"▁"})"),
               ErrorCode::kUnsupported, "Metaspace");
  expect_error(with("normalizer", R"({"type":"Precompiled","precompiled_charsmap":""})"),
               ErrorCode::kUnsupported, "Precompiled");
  expect_error(with("decoder", R"({"type":"WordPiece"})"), ErrorCode::kUnsupported, "WordPiece");
  expect_error(with("post_processor", R"({"type":"Mystery"})"), ErrorCode::kUnsupported, "Mystery");
  expect_error(with("model", R"({"type":"Unigram","vocab":[]})"), ErrorCode::kUnsupported,
               "Unigram");
  expect_error(with("truncation", R"({"max_length":5})"), ErrorCode::kUnsupported, "truncation");
  expect_error(
      with("pre_tokenizer",
           R"({"type":"Sequence","pretokenizers":[{"type":"ByteLevel"},{"type":"Digits"}]})"),
      ErrorCode::kUnsupported, "after ByteLevel");
  expect_error(
      with("pre_tokenizer", R"({"type":"Split","pattern":{"Regex":"(x"},"behavior":"Isolated"})"),
      ErrorCode::kUnsupported, "Split");
  expect_error(
      with("pre_tokenizer", R"({"type":"Split","pattern":{"Regex":"x"},"behavior":"Sideways"})"),
      ErrorCode::kUnsupported, "Sideways");
}

TEST(Errors, BadFilesAndInput) {
  expect_error("{not json", ErrorCode::kCorrupt, "not valid JSON");
  auto j = nlohmann::json::parse(tiny_json());
  j["model"]["merges"].push_back("a zz");
  expect_error(j.dump(), ErrorCode::kCorrupt, "zz");
  try {
    Tokenizer::from_path("/nonexistent/tokenizer/dir");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tokenizer/dir"), std::string::npos);
  }
  Tokenizer t = Tokenizer::from_json(tiny_json());
  try {
    t.encode("ab\xC3(");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_THROW(Tokenizer::from_json(tiny_json(), R"({"bos_token":"<nope>"})"), Error);
}

TEST(Threads, ConcurrentEncodeMatchesSequential) {
  REQUIRE_NODE_MODULES();
  Tokenizer t = Tokenizer::from_path(deepseek_dir());
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("thread " + std::to_string(i * 7919) + " 多线程 test ünïcode " +
                    std::string(i % 13, ' ') + "end");
  std::vector<std::vector<uint32_t>> expect;
  for (const auto& s : texts) expect.push_back(t.encode(s));
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      int good = 0;
      for (int rep = 0; rep < 5; ++rep)
        for (size_t i = 0; i < texts.size(); ++i) good += t.encode(texts[i]) == expect[i];
      ok[k] = good;
    });
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(ok[k], 5 * static_cast<int>(texts.size()));
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
