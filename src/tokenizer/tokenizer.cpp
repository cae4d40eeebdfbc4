// Tokenizer loading and the encode / decode pipelines (HF order: added tokens that skip
// normalization, normalizer, added tokens matched on normalized text, pre-tokenizer, model,
// post-processor).
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/status.h"
#include "tokenizer/components.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

namespace fs = std::filesystem;

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  PreTokenizerChain pre;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Decoder> decoder;
  bool pure_byte_level = false;
  PostProcessor post;
  std::vector<AddedToken> added;
  std::unordered_map<std::string, uint32_t> added_by_content;
  std::unordered_map<uint32_t, size_t> added_by_id;  // -> index in `added`
  // What a normalized added token decodes to: HF keeps its normalized form (e.g. with a Prepend
  // normalizer "<tok>" decodes as "▁<tok>").
  std::unordered_map<uint32_t, std::string> decode_override;
  std::unordered_set<uint32_t> special_ids;
  AddedMatcher raw_matcher, normalized_matcher;
  std::vector<size_t> raw_index, normalized_index;  // matcher token -> index in `added`
  TokenizerConfig config;
  std::vector<std::string> token_bytes;  // ByteLevel decoder: bytes of each id
  uint32_t id_limit = 0;

  std::optional<uint32_t> token_to_id(std::string_view t) const {
    auto it = added_by_content.find(std::string(t));
    if (it != added_by_content.end()) return it->second;
    return model->token_to_id(t);
  }
  const std::string* id_to_token(uint32_t id) const {
    auto it = added_by_id.find(id);
    if (it != added_by_id.end()) return &added[it->second].content;
    return model->id_to_token(id);
  }
  const std::string* decode_token(uint32_t id) const {
    auto it = decode_override.find(id);
    return it != decode_override.end() ? &it->second : id_to_token(id);
  }
  void encode_text(std::string_view text, std::vector<uint32_t>& out) const;
  void encode_normalized(std::string_view text, std::vector<uint32_t>& out) const;
};

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  DI_CHECK(in.good(), ErrorCode::kNotFound, "tokenizer: cannot open {}", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json parse_json(std::string_view text, std::string_view origin) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(ErrorCode::kCorrupt, "tokenizer: {} is not valid JSON: {}", origin, e.what());
  }
}

// bos_token etc. are either a string or an AddedToken object {"content": ...}.
std::optional<std::string> token_field(const json& cfg, const char* key) {
  if (!cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  fail(ErrorCode::kCorrupt, "tokenizer_config.json: field '{}' is neither a string nor a token",
       key);
}

TokenizerConfig parse_config(const json& cfg) {
  TokenizerConfig c;
  c.bos_token = token_field(cfg, "bos_token");
  c.eos_token = token_field(cfg, "eos_token");
  c.pad_token = token_field(cfg, "pad_token");
  c.unk_token = token_field(cfg, "unk_token");
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
    c.add_bos_token = cfg["add_bos_token"].get<bool>();
  if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean())
    c.add_eos_token = cfg["add_eos_token"].get<bool>();
  if (cfg.contains("model_max_length") && cfg["model_max_length"].is_number_integer())
    c.model_max_length = cfg["model_max_length"].get<int64_t>();
  if (cfg.contains("chat_template")) {
    const json& t = cfg["chat_template"];
    if (t.is_string()) {
      c.chat_template = t.get<std::string>();
    } else if (t.is_array()) {  // named templates: use "default"
      for (const json& e : t)
        if (e.value("name", "") == "default") c.chat_template = e.value("template", "");
    }
  }
  return c;
}

}  // namespace

Tokenizer Tokenizer::from_path(const std::string& path) {
  fs::path p(path);
  fs::path tok_file = fs::is_directory(p) ? p / "tokenizer.json" : p;
  DI_CHECK(fs::exists(tok_file), ErrorCode::kNotFound, "tokenizer: {} not found",
           tok_file.string());
  fs::path cfg_file = tok_file.parent_path() / "tokenizer_config.json";
  std::string cfg = fs::exists(cfg_file) ? read_file(cfg_file) : std::string();
  return from_json(read_file(tok_file), cfg, tok_file.string());
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json,
                               std::string_view origin) {
  json j = parse_json(tokenizer_json, origin);
  DI_CHECK(j.is_object(), ErrorCode::kCorrupt, "tokenizer: {} is not a JSON object", origin);
  auto impl = std::make_shared<Impl>();
  try {
    if (j.contains("truncation") && !j["truncation"].is_null())
      fail(ErrorCode::kUnsupported, "tokenizer: 'truncation' is not supported");
    if (j.contains("padding") && j["padding"].is_object() && j["padding"].contains("strategy") &&
        j["padding"]["strategy"].is_object())
      fail(ErrorCode::kUnsupported, "tokenizer: fixed-length 'padding' is not supported");
    const json null;
    auto section = [&](const char* k) -> const json& { return j.contains(k) ? j[k] : null; };
    if (!section("normalizer").is_null()) impl->normalizer = make_normalizer(section("normalizer"));
    impl->pre = make_pre_tokenizer(section("pre_tokenizer"));
    DI_CHECK(j.contains("model"), ErrorCode::kCorrupt, "tokenizer: {} has no 'model'", origin);
    impl->model = std::make_unique<BpeModel>(j["model"], impl->pre.byte_level);
    impl->decoder = make_decoder(section("decoder"), &impl->pure_byte_level);
    impl->post = make_post_processor(section("post_processor"));

    // Added tokens get ids the way HF's add_tokens assigns them: an existing token keeps its id,
    // a new one goes after max(vocab size, largest added id).
    uint32_t vocab_size = static_cast<uint32_t>(impl->model->vocab_size());
    std::optional<uint32_t> max_added;
    for (const json& a : section("added_tokens").is_null() ? json::array() : j["added_tokens"]) {
      AddedToken t;
      t.content = a.at("content").get<std::string>();
      t.special = a.value("special", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.single_word = a.value("single_word", false);
      t.normalized = a.value("normalized", !t.special);
      if (t.content.empty()) continue;
      auto existing = impl->token_to_id(t.content);
      uint32_t id;
      if (existing) {
        id = *existing;
      } else if (!max_added) {
        id = vocab_size;
      } else {
        id = (*max_added >= vocab_size || vocab_size == 0) ? *max_added + 1 : vocab_size;
      }
      t.id = id;
      max_added = max_added ? std::max(*max_added, id) : id;
      if (auto it = impl->added_by_content.find(t.content); it != impl->added_by_content.end()) {
        impl->added[impl->added_by_id[it->second]] = t;  // re-declared token: last wins
        continue;
      }
      impl->added_by_content[t.content] = id;
      impl->added_by_id[id] = impl->added.size();
      impl->added.push_back(t);
    }
    std::vector<const AddedToken*> raw, norm;
    std::vector<std::string> raw_pat, norm_pat;
    // HF matches special tokens first, then the others, in declaration order.
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t i = 0; i < impl->added.size(); ++i) {
        const AddedToken& t = impl->added[i];
        if (t.special != (pass == 0)) continue;
        if (t.special) impl->special_ids.insert(t.id);
        if (t.normalized) {
          std::string pat = t.content;
          if (impl->normalizer) impl->normalizer->normalize(pat);
          if (pat != t.content) impl->decode_override[t.id] = pat;
          norm.push_back(&t);
          norm_pat.push_back(pat);
          impl->normalized_index.push_back(i);
        } else {
          raw.push_back(&t);
          raw_pat.push_back(t.content);
          impl->raw_index.push_back(i);
        }
      }
    }
    impl->raw_matcher.build(raw, raw_pat);
    impl->normalized_matcher.build(norm, norm_pat);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorrupt, "tokenizer: {}: malformed field: {}", origin, e.what());
  }

  if (!config_json.empty()) {
    json cfg = parse_json(config_json, "tokenizer_config.json");
    DI_CHECK(cfg.is_object(), ErrorCode::kCorrupt, "tokenizer_config.json is not a JSON object");
    impl->config = parse_config(cfg);
  }
  const TokenizerConfig& c = impl->config;
  auto resolve = [&](const std::optional<std::string>& tok, const char* what) {
    if (!tok) return std::optional<uint32_t>();
    auto id = impl->token_to_id(*tok);
    DI_CHECK(id.has_value(), ErrorCode::kCorrupt,
             "tokenizer_config.json: {} '{}' is not in the vocabulary", what, *tok);
    return id;
  };
  auto bos = resolve(c.bos_token, "bos_token");
  auto eos = resolve(c.eos_token, "eos_token");
  resolve(c.pad_token, "pad_token");
  // transformers' Llama-style tokenizers rebuild the post-processor from these flags.
  if (c.add_bos_token || c.add_eos_token) {
    impl->post = PostProcessor{};
    if (c.add_bos_token.value_or(false)) {
      DI_CHECK(bos.has_value(), ErrorCode::kCorrupt,
               "tokenizer_config.json: add_bos_token is set but bos_token is missing");
      impl->post.prefix.push_back(*bos);
    }
    if (c.add_eos_token.value_or(false)) {
      DI_CHECK(eos.has_value(), ErrorCode::kCorrupt,
               "tokenizer_config.json: add_eos_token is set but eos_token is missing");
      impl->post.suffix.push_back(*eos);
    }
  }

  impl->id_limit = impl->model->vocab_size() ? impl->model->max_id() + 1 : 0;
  for (const AddedToken& t : impl->added) impl->id_limit = std::max(impl->id_limit, t.id + 1);
  if (impl->pure_byte_level) {
    impl->token_bytes.resize(impl->id_limit);
    for (uint32_t id = 0; id < impl->id_limit; ++id)
      if (const std::string* t = impl->decode_token(id))
        append_byte_level_token(impl->token_bytes[id], *t);
  }
  return Tokenizer(std::move(impl));
}

// Text between non-normalized added tokens: normalize, split on normalized added tokens, then
// pre-tokenize and run the model on each piece.
void Tokenizer::Impl::encode_text(std::string_view text, std::vector<uint32_t>& out) const {
  std::string normalized;
  if (normalizer) {
    normalized.assign(text);
    normalizer->normalize(normalized);
    text = normalized;
  }
  if (text.empty()) return;
  if (normalized_matcher.empty()) return encode_normalized(text, out);
  std::vector<AddedMatch> matches;
  normalized_matcher.find(text, matches);
  for (const AddedMatch& m : matches) {
    if (m.token >= 0)
      out.push_back(added[normalized_index[m.token]].id);
    else if (m.end > m.start)
      encode_normalized(text.substr(m.start, m.end - m.start), out);
  }
}

void Tokenizer::Impl::encode_normalized(std::string_view text, std::vector<uint32_t>& out) const {
  thread_local Pieces pieces;
  pieces.list.assign(1, text);
  pieces.arena.clear();
  for (const auto& step : pre.steps) step->split(pieces);
  for (std::string_view piece : pieces.list) model->encode_word(piece, out);
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<uint32_t> out;
  encode_into(text, add_special_tokens, out);
  return out;
}

void Tokenizer::encode_into(std::string_view text, bool add_special_tokens,
                            std::vector<uint32_t>& out) const {
  size_t bad = 0;
  DI_CHECK(utf8_valid(text, &bad), ErrorCode::kInvalidArgument,
           "tokenizer: input text is not valid UTF-8 (byte offset {})", bad);
  const Impl& im = *impl_;
  if (add_special_tokens) out.insert(out.end(), im.post.prefix.begin(), im.post.prefix.end());
  if (im.raw_matcher.empty()) {
    im.encode_text(text, out);
  } else {
    std::vector<AddedMatch> matches;
    im.raw_matcher.find(text, matches);
    for (const AddedMatch& m : matches) {
      if (m.token >= 0)
        out.push_back(im.added[im.raw_index[m.token]].id);
      else if (m.end > m.start)
        im.encode_text(text.substr(m.start, m.end - m.start), out);
    }
  }
  if (add_special_tokens) out.insert(out.end(), im.post.suffix.begin(), im.post.suffix.end());
}

std::string Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special_tokens) const {
  const Impl& im = *impl_;
  if (im.pure_byte_level) {
    std::string bytes;
    for (uint32_t id : ids) {
      if (id >= im.token_bytes.size()) continue;
      if (skip_special_tokens && im.special_ids.count(id)) continue;
      bytes += im.token_bytes[id];
    }
    return utf8_lossy(bytes);
  }
  std::vector<std::string> tokens;
  for (uint32_t id : ids) {
    if (skip_special_tokens && im.special_ids.count(id)) continue;
    if (const std::string* t = im.decode_token(id)) tokens.push_back(*t);
  }
  if (!im.decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  im.decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::optional<uint32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->token_to_id(token);
}
std::optional<std::string> Tokenizer::id_to_token(uint32_t id) const {
  const std::string* t = impl_->id_to_token(id);
  return t ? std::optional<std::string>(*t) : std::nullopt;
}
size_t Tokenizer::vocab_size() const {
  size_t n = impl_->model->vocab_size();
  for (const AddedToken& t : impl_->added)
    if (!impl_->model->id_to_token(t.id)) ++n;
  return n;
}
uint32_t Tokenizer::id_limit() const {
  return impl_->id_limit;
}
bool Tokenizer::is_special(uint32_t id) const {
  return impl_->special_ids.count(id) > 0;
}
const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  return impl_->added;
}
const TokenizerConfig& Tokenizer::config() const {
  return impl_->config;
}
std::optional<uint32_t> Tokenizer::bos_id() const {
  return impl_->config.bos_token ? token_to_id(*impl_->config.bos_token) : std::nullopt;
}
std::optional<uint32_t> Tokenizer::eos_id() const {
  return impl_->config.eos_token ? token_to_id(*impl_->config.eos_token) : std::nullopt;
}
std::optional<uint32_t> Tokenizer::pad_id() const {
  return impl_->config.pad_token ? token_to_id(*impl_->config.pad_token) : std::nullopt;
}
bool Tokenizer::byte_level_decoder() const {
  return impl_->pure_byte_level;
}
std::string_view Tokenizer::token_bytes(uint32_t id) const {
  return id < impl_->token_bytes.size() ? std::string_view(impl_->token_bytes[id])
                                        : std::string_view();
}

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {}

std::string StreamingDetokenizer::push(uint32_t id) {
  if (tok_.byte_level_decoder()) {
    if (skip_special_ && tok_.is_special(id)) return {};
    pending_ += tok_.token_bytes(id);
    size_t cut = utf8_stable_prefix(pending_);
    std::string out = utf8_lossy(std::string_view(pending_).substr(0, cut));
    pending_.erase(0, cut);
    return out;
  }
  // Other decoders can rewrite their tail (byte-fallback runs), so re-decode and hold back any
  // trailing U+FFFD until it is final.
  ids_.push_back(id);
  std::string full = tok_.decode(ids_, skip_special_);
  size_t end = full.size();
  while (end >= 3 && full.compare(end - 3, 3, "\xEF\xBF\xBD") == 0) end -= 3;
  DI_CHECK(full.compare(0, emitted_.size(), emitted_) == 0, ErrorCode::kInternal,
           "tokenizer: streaming decode rewrote text it had already returned");
  if (end <= emitted_.size()) return {};
  std::string out = full.substr(emitted_.size(), end - emitted_.size());
  emitted_ += out;
  return out;
}

std::string StreamingDetokenizer::finish() {
  if (tok_.byte_level_decoder()) {
    std::string out = utf8_lossy(pending_);
    pending_.clear();
    return out;
  }
  std::string full = tok_.decode(ids_, skip_special_);
  DI_CHECK(full.compare(0, emitted_.size(), emitted_) == 0, ErrorCode::kInternal,
           "tokenizer: streaming decode rewrote text it had already returned");
  std::string out = full.substr(emitted_.size());
  emitted_ = full;
  return out;
}

}  // namespace deepinfer::tokenizer
