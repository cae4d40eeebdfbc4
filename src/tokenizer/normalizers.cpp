// Normalizers: NFC/NFD/NFKC/NFKD (ICU), Lowercase (per character, full mapping like Rust's
// char::to_lowercase), Prepend, Replace, Strip, StripAccents, ByteLevel and Sequence.
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "core/status.h"
#include "tokenizer/components.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

std::u16string to_utf16(std::string_view s) {
  std::u16string out(s.size() + 1, u'\0');
  int32_t len = 0;
  UErrorCode st = U_ZERO_ERROR;
  u_strFromUTF8(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &len,
                s.data(), static_cast<int32_t>(s.size()), &st);
  DI_CHECK(U_SUCCESS(st), ErrorCode::kInternal, "tokenizer: UTF-8 to UTF-16 failed: {}",
           u_errorName(st));
  out.resize(len);
  return out;
}

std::string to_utf8(const std::u16string& s) {
  std::string out(s.size() * 3 + 1, '\0');
  int32_t len = 0;
  UErrorCode st = U_ZERO_ERROR;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &len,
              reinterpret_cast<const UChar*>(s.data()), static_cast<int32_t>(s.size()), &st);
  DI_CHECK(U_SUCCESS(st), ErrorCode::kInternal, "tokenizer: UTF-16 to UTF-8 failed: {}",
           u_errorName(st));
  out.resize(len);
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(const std::string& form) : form_(form) {
    UErrorCode st = U_ZERO_ERROR;
    if (form == "NFC") norm_ = unorm2_getNFCInstance(&st);
    if (form == "NFD") norm_ = unorm2_getNFDInstance(&st);
    if (form == "NFKC") norm_ = unorm2_getNFKCInstance(&st);
    if (form == "NFKD") norm_ = unorm2_getNFKDInstance(&st);
    DI_CHECK(norm_ && U_SUCCESS(st), ErrorCode::kInternal,
             "tokenizer: normalizer {}: ICU instance unavailable: {}", form, u_errorName(st));
  }
  void normalize(std::string& s) const override {
    if (is_ascii(s)) return;  // ASCII is invariant under every normalization form
    std::u16string in = to_utf16(s);
    UErrorCode st = U_ZERO_ERROR;
    int32_t n = unorm2_normalize(norm_, reinterpret_cast<const UChar*>(in.data()),
                                 static_cast<int32_t>(in.size()), nullptr, 0, &st);
    std::u16string out(static_cast<size_t>(n), u'\0');
    st = U_ZERO_ERROR;
    unorm2_normalize(norm_, reinterpret_cast<const UChar*>(in.data()),
                     static_cast<int32_t>(in.size()), reinterpret_cast<UChar*>(out.data()), n, &st);
    DI_CHECK(U_SUCCESS(st), ErrorCode::kInternal, "tokenizer: normalizer {} failed: {}", form_,
             u_errorName(st));
    s = to_utf8(out);
  }

 private:
  std::string form_;
  const UNormalizer2* norm_ = nullptr;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      unsigned char b = static_cast<unsigned char>(s[i]);
      if (b < 0x80) {
        out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
        ++i;
        continue;
      }
      char32_t cp;
      size_t n = utf8_decode(s, i, &cp);
      DI_ASSERT(n > 0);
      // Full lowercase of the lone character: what Rust's char::to_lowercase returns.
      UChar src[2], dst[8];
      int32_t src_len = 0;
      U16_APPEND_UNSAFE(src, src_len, cp);
      UErrorCode st = U_ZERO_ERROR;
      int32_t m = u_strToLower(dst, 8, src, src_len, "", &st);
      DI_CHECK(U_SUCCESS(st), ErrorCode::kInternal, "tokenizer: Lowercase failed: {}",
               u_errorName(st));
      for (int32_t k = 0; k < m;) {
        UChar32 c;
        U16_NEXT(dst, k, m, c);
        utf8_append(out, static_cast<char32_t>(c));
      }
      i += n;
    }
    s.swap(out);
  }
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

class Replace : public Normalizer {
 public:
  Replace(Pattern p, std::string content) : pattern_(std::move(p)), content_(std::move(content)) {}
  void normalize(std::string& s) const override {
    std::vector<Span> m;
    pattern_.find_all(s, m);
    if (m.empty()) return;
    std::string out;
    size_t prev = 0;
    for (const Span& sp : m) {
      out.append(s, prev, sp.start - prev);
      out += content_;
      prev = sp.end;
    }
    out.append(s, prev, std::string::npos);
    s.swap(out);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

bool is_white_space(char32_t c) {
  return u_isUWhiteSpace(static_cast<UChar32>(c));
}

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        char32_t cp;
        size_t n = utf8_decode(s, b, &cp);
        if (!is_white_space(cp)) break;
        b += n;
      }
    }
    if (right_) {
      while (e > b) {
        size_t st = e - 1;
        while (st > b && (static_cast<unsigned char>(s[st]) & 0xC0) == 0x80) --st;
        char32_t cp;
        utf8_decode(s, st, &cp);
        if (!is_white_space(cp)) break;
        e = st;
      }
    }
    s = s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

// Drops combining marks (HF's is_combining_mark: general categories Mn, Mc and Me).
class StripAccents : public Normalizer {
 public:
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      char32_t cp;
      size_t n = utf8_decode(s, i, &cp);
      int t = u_charType(static_cast<UChar32>(cp));
      if (t != U_NON_SPACING_MARK && t != U_COMBINING_SPACING_MARK && t != U_ENCLOSING_MARK)
        out.append(s, i, n);
      i += n;
    }
    s.swap(out);
  }
};

class ByteLevelNormalizer : public Normalizer {
 public:
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size() * 2);
    for (char c : s) utf8_append(out, byte_to_char()[static_cast<unsigned char>(c)]);
    s.swap(out);
  }
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void normalize(std::string& s) const override {
    for (const auto& p : parts_) p->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

Pattern make_pattern(const json& j, std::string_view what) {
  DI_CHECK(j.is_object(), ErrorCode::kCorrupt, "tokenizer: {}: pattern must be an object", what);
  if (j.contains("Regex")) return Pattern::regex(j.at("Regex").get<std::string>(), what);
  if (j.contains("String")) return Pattern::literal(j.at("String").get<std::string>());
  fail(ErrorCode::kCorrupt, "tokenizer: {}: pattern needs 'Regex' or 'String'", what);
}

std::unique_ptr<Normalizer> make_normalizer(const json& j) {
  std::string type = j.value("type", "");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const json& c : j.at("normalizers"))
      if (auto n = make_normalizer(c)) parts.push_back(std::move(n));
    if (parts.empty()) return nullptr;  // an empty Sequence is the identity
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<UnicodeNormalizer>(type);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Prepend") return std::make_unique<Prepend>(j.at("prepend").get<std::string>());
  if (type == "Replace")
    return std::make_unique<Replace>(make_pattern(j.at("pattern"), "normalizer Replace"),
                                     j.at("content").get<std::string>());
  if (type == "Strip")
    return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  fail(ErrorCode::kUnsupported, "tokenizer: unsupported normalizer type '{}'", type);
}

}  // namespace deepinfer::tokenizer
