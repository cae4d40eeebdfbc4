// Added-token matching, mirroring HF's AddedVocabulary::find_matches.
#include <unicode/uchar.h>

#include "core/status.h"
#include "tokenizer/components.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

// Rust regex's Unicode \w and \s, which HF uses for single_word / lstrip / rstrip.
bool is_word_char(char32_t c) {
  UChar32 u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL))
    return true;
  int t = u_charType(u);
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK ||
         t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION;
}
bool is_space(char32_t c) {
  return u_isUWhiteSpace(static_cast<UChar32>(c));
}

// Start of the character that ends at `end` (s[0, end) valid UTF-8, end > 0).
size_t prev_char(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

bool ends_with_word(std::string_view s, size_t end) {
  if (end == 0) return false;
  char32_t cp;
  utf8_decode(s, prev_char(s, end), &cp);
  return is_word_char(cp);
}

bool starts_with_word(std::string_view s, size_t pos) {
  if (pos >= s.size()) return false;
  char32_t cp;
  utf8_decode(s, pos, &cp);
  return is_word_char(cp);
}

}  // namespace

void AddedMatcher::build(std::vector<const AddedToken*> tokens, std::vector<std::string> patterns) {
  tokens_ = std::move(tokens);
  nodes_.assign(1, Node{});
  lengths_.clear();
  first_.fill(false);
  for (size_t i = 0; i < patterns.size(); ++i) {
    const std::string& p = patterns[i];
    lengths_.push_back(p.size());
    if (p.empty()) continue;  // an empty pattern never matches
    first_[static_cast<unsigned char>(p[0])] = true;
    int32_t node = 0;
    for (unsigned char c : p) {
      int32_t child = -1;
      for (auto& [b, n] : nodes_[node].next)
        if (b == c) child = n;
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[node].next.push_back({c, child});
        nodes_.push_back(Node{});
      }
      node = child;
    }
    // Duplicate patterns: Aho-Corasick reports the first one added.
    if (nodes_[node].pattern < 0) nodes_[node].pattern = static_cast<int64_t>(i);
  }
}

int64_t AddedMatcher::longest_at(std::string_view s, size_t pos, size_t* len) const {
  int64_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int32_t child = -1;
    for (const auto& [b, n] : nodes_[node].next)
      if (b == c) {
        child = n;
        break;
      }
    if (child < 0) break;
    node = child;
    if (nodes_[node].pattern >= 0) {
      best = nodes_[node].pattern;
      *len = i + 1 - pos;
    }
  }
  return best;
}

void AddedMatcher::find(std::string_view s, std::vector<AddedMatch>& out) const {
  out.clear();
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < s.size() && !tokens_.empty()) {
    if (!first_[static_cast<unsigned char>(s[pos])]) {
      ++pos;
      continue;
    }
    size_t len = 0;
    int64_t idx = longest_at(s, pos, &len);
    if (idx < 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;  // the automaton resumes after the raw match, whatever happens to it below
    const AddedToken& t = *tokens_[idx];
    if (t.single_word) {
      bool start_space = start == 0 || !ends_with_word(s, start);
      bool stop_space = stop == s.size() || !starts_with_word(s, stop);
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t ns = start;
      while (ns > 0) {
        size_t p = prev_char(s, ns);
        char32_t cp;
        utf8_decode(s, p, &cp);
        if (!is_space(cp)) break;
        ns = p;
      }
      start = std::max(ns, start_offset);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        char32_t cp;
        size_t n = utf8_decode(s, stop, &cp);
        if (!is_space(cp)) break;
        stop += n;
      }
    }
    if (start_offset < start) out.push_back({-1, start_offset, start});
    out.push_back({idx, start, stop});
    start_offset = stop;
  }
  if (start_offset < s.size()) out.push_back({-1, start_offset, s.size()});
}

}  // namespace deepinfer::tokenizer
