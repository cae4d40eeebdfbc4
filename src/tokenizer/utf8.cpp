#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

// For a lead byte: the sequence width and the allowed range of the second byte (later bytes are
// always 0x80..0xBF). Width 0 marks a byte that can never start a sequence.
struct LeadInfo {
  int width;
  unsigned char lo, hi;
};

inline LeadInfo lead_info(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes after the lead (at most width-1) that continue a well-formed sequence.
inline int valid_continuations(std::string_view s, size_t i, const LeadInfo& li) {
  int k = 0;
  for (int j = 1; j < li.width && i + j < s.size(); ++j) {
    unsigned char c = static_cast<unsigned char>(s[i + j]);
    bool ok = j == 1 ? (c >= li.lo && c <= li.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++k;
  }
  return k;
}

}  // namespace

size_t utf8_decode(std::string_view s, size_t i, char32_t* cp) {
  unsigned char b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  LeadInfo li = lead_info(b);
  if (li.width == 0 || valid_continuations(s, i, li) != li.width - 1) return 0;
  char32_t c = b & (0x7F >> li.width);
  for (int j = 1; j < li.width; ++j) c = (c << 6) | (static_cast<unsigned char>(s[i + j]) & 0x3F);
  *cp = c;
  return static_cast<size_t>(li.width);
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool utf8_valid(std::string_view s, size_t* bad_at) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    char32_t cp;
    size_t n = utf8_decode(s, i, &cp);
    if (n == 0) {
      if (bad_at) *bad_at = i;
      return false;
    }
    i += n;
  }
  return true;
}

void utf8_append_lossy(std::string& out, std::string_view s) {
  size_t i = 0, run = 0;  // [run, i) is a well-formed stretch not yet copied
  while (i < s.size()) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    LeadInfo li = lead_info(b);
    int k = li.width ? valid_continuations(s, i, li) : 0;
    if (li.width && k == li.width - 1) {
      i += li.width;
      continue;
    }
    out.append(s.data() + run, i - run);
    out.append("\xEF\xBF\xBD");  // one U+FFFD per maximal ill-formed subpart
    i += 1 + k;
    run = i;
  }
  out.append(s.data() + run, s.size() - run);
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  utf8_append_lossy(out, bytes);
  return out;
}

size_t utf8_stable_prefix(std::string_view s) {
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t i = n - back;
    unsigned char b = static_cast<unsigned char>(s[i]);
    if (b >= 0x80 && b <= 0xBF) continue;  // continuation: keep looking for the lead
    LeadInfo li = lead_info(b);
    if (li.width > static_cast<int>(back) &&
        valid_continuations(s, i, li) == static_cast<int>(back) - 1)
      return i;
    return n;
  }
  return n;
}

}  // namespace deepinfer::tokenizer
