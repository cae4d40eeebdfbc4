// Decoders (ByteLevel, ByteFallback, Fuse, Strip, Replace, Sequence) and the post-processor
// (TemplateProcessing, Bert, Roberta, ByteLevel, Sequence) for single sequences.
#include "core/status.h"
#include "tokenizer/components.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

// All tokens -> one string: each token's characters map back to bytes (a token with a character
// outside the map contributes its UTF-8 bytes unchanged), then lossy UTF-8, as HF does.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) append_token_bytes(bytes, t);
    tokens.assign(1, utf8_lossy(bytes));
  }
  static void append_token_bytes(std::string& bytes, std::string_view t) {
    size_t mark = bytes.size();
    for (size_t i = 0; i < t.size();) {
      char32_t cp;
      size_t n = utf8_decode(t, i, &cp);
      int b = n ? char_to_byte(cp) : -1;
      if (b < 0) {
        bytes.resize(mark);
        bytes.append(t);
        return;
      }
      bytes.push_back(static_cast<char>(b));
      i += n;
    }
  }
};

// "<0xAB>" tokens become bytes; each run of them is UTF-8 decoded, or becomes one U+FFFD per byte
// when the run is not valid UTF-8.
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_tokens = 0;
    auto flush = [&] {
      if (run_tokens == 0) return;
      if (utf8_valid(run)) {
        out.push_back(run);
      } else {
        for (size_t i = 0; i < run_tokens; ++i) out.push_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_tokens = 0;
    };
    for (std::string& t : tokens) {
      int byte = parse_byte(t);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
        ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }
  static int parse_byte(std::string_view t) {
    if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing occurrences of `content` from every token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t i = 0; i < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++i)
        b += content_.size();
      for (size_t i = 0; i < stop_ && e >= b + content_.size() &&
                         t.compare(e - content_.size(), content_.size(), content_) == 0;
           ++i)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern p, std::string content)
      : pattern_(std::move(p)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<Span> m;
    for (std::string& t : tokens) {
      pattern_.find_all(t, m);
      if (m.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (const Span& s : m) {
        out.append(t, prev, s.start - prev);
        out += content_;
        prev = s.end;
      }
      out.append(t, prev, std::string::npos);
      t.swap(out);
    }
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

std::unique_ptr<Decoder> build_decoder(const json& j) {
  std::string type = j.value("type", "");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(j.at("content").get<std::string>(),
                                          j.value("start", size_t{0}), j.value("stop", size_t{0}));
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(make_pattern(j.at("pattern"), "decoder Replace"),
                                            j.at("content").get<std::string>());
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const json& c : j.at("decoders")) parts.push_back(build_decoder(c));
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  fail(ErrorCode::kUnsupported, "tokenizer: unsupported decoder type '{}'", type);
}

void add_template_piece(const json& piece, const json& special_tokens, PostProcessor& pp,
                        bool& seen_sequence) {
  if (piece.contains("Sequence")) {
    std::string id = piece["Sequence"].at("id").get<std::string>();
    DI_CHECK(id == "A", ErrorCode::kUnsupported,
             "tokenizer: post_processor TemplateProcessing: single template uses sequence '{}'",
             id);
    seen_sequence = true;
    return;
  }
  DI_CHECK(piece.contains("SpecialToken"), ErrorCode::kCorrupt,
           "tokenizer: post_processor TemplateProcessing: bad template piece {}", piece.dump());
  std::string name = piece["SpecialToken"].at("id").get<std::string>();
  DI_CHECK(special_tokens.contains(name), ErrorCode::kCorrupt,
           "tokenizer: post_processor TemplateProcessing: special token '{}' is not defined", name);
  auto& dst = seen_sequence ? pp.suffix : pp.prefix;
  for (const json& id : special_tokens[name].at("ids")) dst.push_back(id.get<uint32_t>());
}

void build_post_processor(const json& j, PostProcessor& pp) {
  std::string type = j.value("type", "");
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "Sequence") {
    for (const json& c : j.at("processors")) build_post_processor(c, pp);
    return;
  }
  if (type == "TemplateProcessing") {
    bool seen = false;
    const json& specials = j.contains("special_tokens") ? j["special_tokens"] : json::object();
    for (const json& piece : j.at("single")) add_template_piece(piece, specials, pp, seen);
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    pp.prefix.push_back(j.at("cls").at(1).get<uint32_t>());
    pp.suffix.insert(pp.suffix.begin(), j.at("sep").at(1).get<uint32_t>());
    return;
  }
  fail(ErrorCode::kUnsupported, "tokenizer: unsupported post_processor type '{}'", type);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j, bool* pure_byte_level) {
  *pure_byte_level = !j.is_null() && j.value("type", "") == "ByteLevel";
  if (j.is_null()) return nullptr;
  return build_decoder(j);
}

void append_byte_level_token(std::string& bytes, std::string_view token) {
  ByteLevelDecoder::append_token_bytes(bytes, token);
}

PostProcessor make_post_processor(const json& j) {
  PostProcessor pp;
  if (!j.is_null()) build_post_processor(j, pp);
  return pp;
}

}  // namespace deepinfer::tokenizer
