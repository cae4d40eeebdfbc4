// Pattern matching for tokenizer.json components. HF tokenizers compiles regexes with Oniguruma
// (Ruby syntax); we compile them with PCRE2 + JIT after translating the few constructs whose
// meaning differs (\s includes U+0085, \w is Unicode word, \h is a hex digit) and iterate matches
// the way the onig crate does (an empty match right after the previous match is skipped).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::tokenizer {

struct Span {
  size_t start, end;
};

class Pattern {
 public:
  // A regex in Oniguruma syntax. `what` names the component for error messages.
  static Pattern regex(std::string_view pattern, std::string_view what);
  // A literal string (HF's {"String": ...} patterns).
  static Pattern literal(std::string_view text);

  Pattern(Pattern&&) noexcept;
  Pattern& operator=(Pattern&&) noexcept;
  ~Pattern();

  // All matches in `text`, in order, with onig's iteration rules. Input must be valid UTF-8.
  void find_all(std::string_view text, std::vector<Span>& out) const;

  // The Oniguruma pattern translated to PCRE2 (exposed for tests).
  static std::string translate(std::string_view onig_pattern);

 private:
  Pattern();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::tokenizer
