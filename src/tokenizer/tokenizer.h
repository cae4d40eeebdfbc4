// deepinfer's tokenizer: loads a Hugging Face tokenizer.json (byte-level BPE family) plus the
// optional tokenizer_config.json, and encodes / decodes exactly like HF `tokenizers`.
//
//   auto tok = Tokenizer::from_path("/models/DeepSeek-V4");   // dir or tokenizer.json
//   std::vector<uint32_t> ids = tok.encode("Hello", /*add_special_tokens=*/true);
//   std::string text = tok.decode(ids);
//
// Thread safety: a Tokenizer is immutable after loading; encode/decode may run concurrently.
// Copies share the loaded data.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

struct AddedToken {
  uint32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// The fields of tokenizer_config.json that change encoding or prompting.
struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  std::string chat_template;  // the default jinja template; empty when absent
  std::optional<int64_t> model_max_length;
};

class Tokenizer {
 public:
  // `path` is a directory holding tokenizer.json (and optionally tokenizer_config.json), or the
  // tokenizer.json file itself (tokenizer_config.json is then looked for next to it).
  static Tokenizer from_path(const std::string& path);
  // From file contents; `config_json` may be empty.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {},
                             std::string_view origin = "tokenizer.json");

  // Text must be valid UTF-8 (ErrorCode::kInvalidArgument otherwise). With add_special_tokens the
  // post-processor's tokens are added: BOS/EOS per tokenizer_config's add_bos_token /
  // add_eos_token when it sets them, else tokenizer.json's post_processor.
  std::vector<uint32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  void encode_into(std::string_view text, bool add_special_tokens,
                   std::vector<uint32_t>& out) const;

  // Unknown ids are skipped, as HF does. Invalid UTF-8 from partial byte tokens becomes U+FFFD.
  std::string decode(std::span<const uint32_t> ids, bool skip_special_tokens = false) const;

  std::optional<uint32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(uint32_t id) const;
  size_t vocab_size() const;  // distinct ids, model vocab plus added tokens
  uint32_t id_limit() const;  // largest id + 1
  bool is_special(uint32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;
  const TokenizerConfig& config() const;
  std::optional<uint32_t> bos_id() const;
  std::optional<uint32_t> eos_id() const;
  std::optional<uint32_t> pad_id() const;

  // True when the decoder is ByteLevel: every token then decodes to a fixed byte string and the
  // text is the lossy UTF-8 of their concatenation (what makes cheap streaming exact).
  bool byte_level_decoder() const;
  // Bytes of one token under a ByteLevel decoder (empty for unknown ids).
  std::string_view token_bytes(uint32_t id) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Incremental detokenizer for streaming: push ids one at a time and get the text that became
// final. Never returns a partial UTF-8 character; the concatenation of all push() results and
// finish() equals decode(all ids) exactly.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, bool skip_special_tokens = false);
  std::string push(uint32_t id);
  std::string finish();  // flushes what is still held back (e.g. a truncated character)

 private:
  Tokenizer tok_;
  bool skip_special_;
  std::string pending_;        // byte-level: bytes of a character still incomplete
  std::vector<uint32_t> ids_;  // other decoders: all ids, re-decoded each step
  std::string emitted_;        // other decoders: text already returned
};

}  // namespace deepinfer::tokenizer
