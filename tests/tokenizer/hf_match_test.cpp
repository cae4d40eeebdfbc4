// Exact agreement with Hugging Face `tokenizers` (npm, run under node) on the corpus, round trips,
// decoding of arbitrary id sequences, and streaming == full decoding.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "corpus.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer::testing {
namespace {

const Corpus& corpus() {
  static Corpus c = build_corpus(source_dir());
  return c;
}

const Tokenizer& deepseek() {
  static Tokenizer t = Tokenizer::from_path(deepseek_dir());
  return t;
}

std::string tokenizer_json() {
  return deepseek_dir() + "/tokenizer.json";
}

// Shows where two id sequences first differ, with the decoded neighbourhood.
std::string describe_mismatch(const Tokenizer& tok, const std::string& doc,
                              const std::vector<uint32_t>& ours, const std::vector<uint32_t>& hf) {
  size_t i = 0;
  while (i < ours.size() && i < hf.size() && ours[i] == hf[i]) ++i;
  auto window = [&](const std::vector<uint32_t>& v) {
    std::string s;
    for (size_t k = i >= 3 ? i - 3 : 0; k < std::min(v.size(), i + 4); ++k)
      s += std::to_string(v[k]) + "=" + json(tok.decode(std::vector<uint32_t>{v[k]})).dump() + " ";
    return s;
  };
  return "first difference at token " + std::to_string(i) + "\n  ours: " + window(ours) +
         "\n  hf:   " + window(hf) + "\n  doc starts: " + json(doc.substr(0, 120)).dump();
}

TEST(TokenizerHf, CorpusIsLargeAndVaried) {
  const Corpus& c = corpus();
  EXPECT_GE(c.chars, 200000u) << "corpus sources: " << json(c.sources).dump();
  EXPECT_GE(c.sources.size(), 10u);
  for (const std::string& d : c.docs) ASSERT_TRUE(utf8_valid(d));
}

TEST(TokenizerHf, DeepSeekEncodeMatchesOnCorpus) {
  REQUIRE_NODE_MODULES();
  const Corpus& c = corpus();
  json hf = run_reference("encode", tokenizer_json(), c.docs, "0");
  ASSERT_EQ(hf.size(), c.docs.size());
  size_t mismatches = 0, tokens = 0;
  for (size_t i = 0; i < c.docs.size(); ++i) {
    std::vector<uint32_t> ours = deepseek().encode(c.docs[i]);
    std::vector<uint32_t> ref = hf[i].get<std::vector<uint32_t>>();
    tokens += ref.size();
    if (ours != ref && ++mismatches <= 5)
      ADD_FAILURE() << "doc " << i << ": " << describe_mismatch(deepseek(), c.docs[i], ours, ref);
  }
  EXPECT_EQ(mismatches, 0u) << "of " << c.docs.size() << " docs";
  std::printf("corpus: %zu docs, %zu chars, %zu bytes, %zu tokens, %zu sources\n", c.docs.size(),
              c.chars, c.bytes, tokens, c.sources.size());
}

TEST(TokenizerHf, AddSpecialPrependsBosFromConfig) {
  REQUIRE_NODE_MODULES();
  const Tokenizer& tok = deepseek();
  ASSERT_TRUE(tok.config().add_bos_token.value_or(false));
  ASSERT_EQ(tok.bos_id(), 0u);
  ASSERT_EQ(tok.eos_id(), 1u);
  std::vector<std::string> docs(corpus().docs.begin(), corpus().docs.begin() + 20);
  docs.push_back("");
  // tokenizer.json's own post_processor (ByteLevel) adds nothing; tokenizer_config adds BOS.
  json hf = run_reference("encode", tokenizer_json(), docs, "1");
  for (size_t i = 0; i < docs.size(); ++i) {
    std::vector<uint32_t> expect{0};
    for (uint32_t id : hf[i].get<std::vector<uint32_t>>()) expect.push_back(id);
    EXPECT_EQ(tok.encode(docs[i], true), expect) << "doc " << i;
  }
}

TEST(TokenizerHf, DecodeOfEncodeIsIdentity) {
  REQUIRE_NODE_MODULES();
  const Tokenizer& tok = deepseek();
  size_t bad = 0;
  for (const std::string& d : corpus().docs)
    if (tok.decode(tok.encode(d)) != d && ++bad <= 3)
      ADD_FAILURE() << json(d.substr(0, 200)).dump();
  EXPECT_EQ(bad, 0u);
}

// Random id sequences: partial UTF-8 byte tokens, special tokens, ids past the vocabulary.
std::vector<std::vector<uint32_t>> random_id_sequences(const Tokenizer& tok, size_t n) {
  std::mt19937 rng(7);
  std::vector<uint32_t> byteish;  // tokens whose bytes are not valid UTF-8 alone
  for (uint32_t id = 0; id < tok.id_limit(); ++id)
    if (!tok.token_bytes(id).empty() && !utf8_valid(tok.token_bytes(id))) byteish.push_back(id);
  std::vector<std::vector<uint32_t>> out;
  for (size_t s = 0; s < n; ++s) {
    std::vector<uint32_t> ids;
    size_t len = 1 + rng() % 40;
    for (size_t k = 0; k < len; ++k) {
      switch (rng() % 5) {
        case 0:
          ids.push_back(byteish[rng() % byteish.size()]);
          break;
        case 1:
          ids.push_back(rng() % 4 == 0 ? tok.id_limit() + rng() % 100 : 128000 + rng() % 815);
          break;
        default:
          ids.push_back(rng() % tok.id_limit());
      }
    }
    out.push_back(ids);
  }
  return out;
}

TEST(TokenizerHf, DecodeMatchesOnRandomIds) {
  REQUIRE_NODE_MODULES();
  const Tokenizer& tok = deepseek();
  auto seqs = random_id_sequences(tok, 400);
  ASSERT_GT(tok.id_limit(), 128000u);
  // Add the corpus encodings too: decoding real text must match as well.
  for (size_t i = 0; i < 50; ++i)
    seqs.push_back(tok.encode(corpus().docs[i * 7 % corpus().docs.size()]));
  for (const char* skip : {"0", "1"}) {
    json hf = run_reference("decode", tokenizer_json(), seqs, skip);
    for (size_t i = 0; i < seqs.size(); ++i)
      EXPECT_EQ(tok.decode(seqs[i], skip[0] == '1'), hf[i].get<std::string>())
          << "sequence " << i << " skip_special=" << skip;
  }
}

void expect_streaming_equals_decode(const Tokenizer& tok, const std::vector<uint32_t>& ids,
                                    bool skip) {
  StreamingDetokenizer st(tok, skip);
  std::string text;
  for (uint32_t id : ids) {
    std::string piece = st.push(id);
    ASSERT_TRUE(utf8_valid(piece)) << "partial UTF-8 returned";
    text += piece;
  }
  text += st.finish();
  ASSERT_EQ(text, tok.decode(ids, skip));
}

TEST(TokenizerHf, StreamingEqualsFullDecode) {
  REQUIRE_NODE_MODULES();
  const Tokenizer& tok = deepseek();
  for (const std::string& d : corpus().docs) {
    std::vector<uint32_t> ids = tok.encode(d, true);
    expect_streaming_equals_decode(tok, ids, false);
    expect_streaming_equals_decode(tok, ids, true);
  }
  for (const auto& ids : random_id_sequences(tok, 2000)) {
    expect_streaming_equals_decode(tok, ids, false);
    expect_streaming_equals_decode(tok, ids, true);
  }
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
