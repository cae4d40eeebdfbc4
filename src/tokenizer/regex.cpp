#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/status.h"

namespace deepinfer::tokenizer {
namespace {

constexpr std::string_view kWordClass = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
constexpr std::string_view kSpaceClass = "\\s\\x{85}";
constexpr std::string_view kHexClass = "0-9a-fA-F";

// Per-thread PCRE2 scratch: match data and a JIT stack large enough for long whitespace runs.
struct MatchScratch {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* ctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchScratch() {
    md = pcre2_match_data_create(16, nullptr);
    ctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_match_data_free(md);
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

size_t char_len_at(std::string_view s, size_t i) {
  unsigned char b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

}  // namespace

struct Pattern::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  std::string literal;  // used when code == nullptr
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

Pattern::Pattern() : impl_(std::make_unique<Impl>()) {}
Pattern::Pattern(Pattern&&) noexcept = default;
Pattern& Pattern::operator=(Pattern&&) noexcept = default;
Pattern::~Pattern() = default;

std::string Pattern::translate(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      ++i;
      auto emit = [&](std::string_view cls, bool negate) {
        if (in_class) {
          // A negated shorthand inside a class cannot be expanded inline; keep PCRE2's meaning.
          if (negate) {
            out += '\\';
            out += e;
          } else {
            out += cls;
          }
        } else {
          out += negate ? "[^" : "[";
          out += cls;
          out += ']';
        }
      };
      switch (e) {
        case 's':
          emit(kSpaceClass, false);
          break;
        case 'S':
          emit(kSpaceClass, true);
          break;
        case 'w':
          emit(kWordClass, false);
          break;
        case 'W':
          emit(kWordClass, true);
          break;
        case 'h':
          emit(kHexClass, false);
          break;
        case 'H':
          emit(kHexClass, true);
          break;
        default:
          out += '\\';
          out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Pattern Pattern::regex(std::string_view pattern, std::string_view what) {
  Pattern p;
  std::string translated = translate(pattern);
  int err = 0;
  PCRE2_SIZE off = 0;
  p.impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &off, nullptr);
  if (!p.impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    fail(ErrorCode::kUnsupported, "tokenizer: {}: cannot compile regex '{}' at offset {}: {}", what,
         pattern, off, reinterpret_cast<const char*>(msg));
  }
  p.impl_->jit = pcre2_jit_compile(p.impl_->code, PCRE2_JIT_COMPLETE) == 0;
  return p;
}

Pattern Pattern::literal(std::string_view text) {
  Pattern p;
  p.impl_->literal = std::string(text);
  return p;
}

void Pattern::find_all(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  if (!impl_->code) {
    const std::string& lit = impl_->literal;
    if (lit.empty()) return;
    for (size_t pos = text.find(lit); pos != std::string_view::npos;
         pos = text.find(lit, pos + lit.size()))
      out.push_back({pos, pos + lit.size()});
    return;
  }
  MatchScratch& s = scratch();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t search_from = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (search_from <= text.size()) {
    int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), search_from,
                                          PCRE2_NO_UTF_CHECK, s.md, s.ctx)
                        : pcre2_match(impl_->code, subject, text.size(), search_from,
                                      PCRE2_NO_UTF_CHECK, s.md, s.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    DI_CHECK(rc >= 0, ErrorCode::kInternal, "tokenizer: regex match failed with PCRE2 error {}",
             rc);
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    size_t st = ov[0], en = ov[1];
    if (st == en && have_last && last_end == en) {
      // onig: an empty match touching the previous match is skipped by advancing one character.
      if (search_from >= text.size()) break;
      search_from += char_len_at(text, search_from);
      continue;
    }
    out.push_back({st, en});
    have_last = true;
    last_end = en;
    search_from = en;
  }
}

}  // namespace deepinfer::tokenizer
