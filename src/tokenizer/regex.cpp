#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <unicode/uchar.h>

#include <cstdio>
#include <map>

#include "core/status.h"

namespace deepinfer::tokenizer {
namespace {

struct GcRange {
  uint32_t first, last;
  uint8_t category;  // index into kGcNames
};
#include "tokenizer/unicode_gc_table.inc"

// For each general category name (one letter or two), the characters PCRE2's tables do not know
// yet (assigned after its Unicode version, per ICU's character age) that Oniguruma in HF
// tokenizers puts in that category, written as PCRE2 class ranges. Appended to \p{..} so both
// engines agree on new scripts and emoji. Costs some regex speed (~2x on the hottest pattern).
const std::map<std::string, std::string, std::less<>>& category_additions() {
  static const std::map<std::string, std::string, std::less<>> table = [] {
    char buf[32] = {};
    pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, buf);
    unsigned major = 0, minor = 0;
    std::sscanf(buf, "%u.%u", &major, &minor);
    auto unknown_to_pcre2 = [&](UChar32 c) {
      if (u_charType(c) == U_UNASSIGNED) return true;  // newer than ICU as well
      UVersionInfo age;
      u_charAge(c, age);
      return age[0] > major || (age[0] == major && age[1] > minor);
    };
    std::map<std::string, std::string, std::less<>> adds;
    auto append = [&](const std::string& name, uint32_t a, uint32_t b) {
      char r[40];
      std::snprintf(r, sizeof(r), a == b ? "\\x{%x}" : "\\x{%x}-\\x{%x}", a, b);
      adds[name] += r;
    };
    for (const GcRange& r : kGcRanges) {
      std::string two(kGcNames[r.category]);
      std::string one = two.substr(0, 1);
      for (uint32_t c = r.first; c <= r.last; ++c) {
        if (!unknown_to_pcre2(static_cast<UChar32>(c))) continue;
        uint32_t end = c;
        while (end < r.last && unknown_to_pcre2(static_cast<UChar32>(end + 1))) ++end;
        append(two, c, end);
        append(one, c, end);
        c = end;
      }
    }
    return adds;
  }();
  return table;
}

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

// \p{X} for a general category X, with the characters PCRE2 does not know yet added.
// `negate`: \P{X} or \p{^X}. Returns false for names we leave to PCRE2 (scripts, ...).
static bool emit_category(std::string_view name, bool negate, bool in_class, std::string& out) {
  const auto& adds = category_additions();
  auto it = adds.find(name);
  bool known =
      it != adds.end() || (name.size() <= 2 && !name.empty() &&
                           std::string_view("LMNPSZC").find(name[0]) != std::string_view::npos);
  if (!known) return false;
  std::string body = "\\p{" + std::string(name) + "}" + (it != adds.end() ? it->second : "");
  if (in_class) {
    if (negate) return false;  // a negated property inside a class cannot take additions
    out += body;
  } else {
    out += negate ? "[^" : "[";
    out += body;
    out += ']';
  }
  return true;
}

std::string Pattern::translate(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      // \p{Name}, \p{^Name}, \P{Name}, \pL
      if (e == 'p' || e == 'P') {
        size_t name_start = i + 2, name_end = i + 3, next = i + 3;
        if (i + 2 < p.size() && p[i + 2] == '{') {
          size_t close = p.find('}', i + 3);
          if (close != std::string_view::npos) {
            name_start = i + 3;
            name_end = close;
            next = close + 1;
          }
        }
        if (name_end <= p.size() && name_start < name_end) {
          std::string_view name = p.substr(name_start, name_end - name_start);
          bool negate = e == 'P';
          if (name.front() == '^') {
            negate = !negate;
            name.remove_prefix(1);
          }
          if (emit_category(name, negate, in_class, out)) {
            i = next - 1;
            continue;
          }
        }
      }
      ++i;
      switch (e) {
        case 's':
        case 'S':
          if (in_class && e == 'S') {
            out += "\\S";  // cannot be expanded inside a class; PCRE2's meaning (no U+0085)
          } else {
            out += in_class ? "" : (e == 'S' ? "[^" : "[");
            out += kSpaceClass;
            out += in_class ? "" : "]";
          }
          break;
        case 'w':
        case 'W': {
          // Oniguruma's \w: letters, marks, decimal digits, connector punctuation.
          std::string cls;
          for (std::string_view gc : {"L", "M", "Nd", "Pc"}) emit_category(gc, false, true, cls);
          if (in_class && e == 'W') {
            out += "\\W";
          } else {
            out += in_class ? "" : (e == 'W' ? "[^" : "[");
            out += cls;
            out += in_class ? "" : "]";
          }
          break;
        }
        case 'h':
        case 'H':  // Ruby syntax: hex digit
          if (in_class && e == 'H') {
            out += "\\H";
          } else {
            out += in_class ? "" : (e == 'H' ? "[^" : "[");
            out += kHexClass;
            out += in_class ? "" : "]";
          }
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
