// Pre-tokenizers: Split (regex or literal, five behaviours, invert), Digits, ByteLevel, Sequence.
// Each step replaces every piece by its parts, dropping empty parts as HF's
// PreTokenizedString::split does.
#include <unicode/uchar.h>

#include "core/status.h"
#include "tokenizer/components.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

const std::array<char32_t, 256>& byte_to_char() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = printable[b] ? static_cast<char32_t>(b) : next++;
    return t;
  }();
  return table;
}

int char_to_byte(char32_t cp) {
  static const std::array<int16_t, 324> inverse = [] {
    std::array<int16_t, 324> inv{};
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[byte_to_char()[b]] = static_cast<int16_t>(b);
    return inv;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

namespace {

struct Match {
  size_t start, end;
  bool is_match;
};

// HF's Pattern::find_matches: the matches plus the gaps between them, covering the whole piece.
void cover(std::string_view piece, const std::vector<Span>& spans, bool invert,
           std::vector<Match>& out) {
  out.clear();
  size_t prev = 0;
  for (const Span& s : spans) {
    if (prev != s.start) out.push_back({prev, s.start, invert});
    out.push_back({s.start, s.end, !invert});
    prev = s.end;
  }
  if (prev != piece.size()) out.push_back({prev, piece.size(), invert});
}

// Applies a split behaviour and appends the surviving non-empty parts of `piece` to `dst`.
void apply_behavior(std::string_view piece, const std::vector<Match>& m, SplitBehavior behavior,
                    std::vector<std::string_view>& dst) {
  auto emit = [&](size_t a, size_t b) {
    if (b > a) dst.push_back(piece.substr(a, b - a));
  };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Match& x : m) emit(x.start, x.end);
      return;
    case SplitBehavior::kRemoved:
      for (const Match& x : m)
        if (!x.is_match) emit(x.start, x.end);
      return;
    case SplitBehavior::kContiguous:
    case SplitBehavior::kMergedWithPrevious: {
      std::vector<std::pair<size_t, size_t>> acc;
      bool prev_match = false;
      for (const Match& x : m) {
        bool merge = behavior == SplitBehavior::kContiguous ? x.is_match == prev_match
                                                            : (x.is_match && !prev_match);
        if (merge && !acc.empty())
          acc.back().second = x.end;
        else
          acc.push_back({x.start, x.end});
        prev_match = x.is_match;
      }
      for (auto& [a, b] : acc) emit(a, b);
      return;
    }
    case SplitBehavior::kMergedWithNext: {
      std::vector<std::pair<size_t, size_t>> acc;
      bool prev_match = false;
      for (auto it = m.rbegin(); it != m.rend(); ++it) {
        if (it->is_match && !prev_match && !acc.empty())
          acc.back().first = it->start;
        else
          acc.push_back({it->start, it->end});
        prev_match = it->is_match;
      }
      for (auto it = acc.rbegin(); it != acc.rend(); ++it) emit(it->first, it->second);
      return;
    }
  }
}

SplitBehavior parse_behavior(const std::string& s) {
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  fail(ErrorCode::kUnsupported, "tokenizer: pre_tokenizer Split: unsupported behavior '{}'", s);
}

class Split : public PreTokenizer {
 public:
  Split(Pattern p, SplitBehavior b, bool invert)
      : pattern_(std::move(p)), behavior_(b), invert_(invert) {}
  void split(Pieces& p) const override {
    p.next.clear();
    std::vector<Match> m;
    for (std::string_view piece : p.list) {
      pattern_.find_all(piece, p.spans);
      cover(piece, p.spans, invert_, m);
      apply_behavior(piece, m, behavior_, p.next);
    }
    p.list.swap(p.next);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

bool is_numeric(char32_t c) {
  int t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

// Digits: every numeric character is a match (HF's Fn(char) pattern); Contiguous unless
// individual_digits.
class Digits : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void split(Pieces& p) const override {
    p.next.clear();
    std::vector<Match> m;
    for (std::string_view piece : p.list) {
      p.spans.clear();
      for (size_t i = 0; i < piece.size();) {
        char32_t cp;
        size_t n = utf8_decode(piece, i, &cp);
        if (is_numeric(cp)) p.spans.push_back({i, i + n});
        i += n;
      }
      cover(piece, p.spans, false, m);
      apply_behavior(piece, m, individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                     p.next);
    }
    p.list.swap(p.next);
  }

 private:
  bool individual_;
};

constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ByteLevel's text part: optional prefix space and the GPT-2 split. The byte mapping itself is
// left to the model (PreTokenizerChain::byte_level).
class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {
    if (use_regex_) regex_ = Pattern::regex(kGpt2Pattern, "pre_tokenizer ByteLevel");
  }
  void split(Pieces& p) const override {
    if (!add_prefix_space_ && !use_regex_) return;
    p.next.clear();
    std::vector<Match> m;
    for (std::string_view piece : p.list) {
      if (add_prefix_space_ && piece.front() != ' ') {
        p.arena.push_back(" ");
        p.arena.back().append(piece);
        piece = p.arena.back();
      }
      if (!use_regex_) {
        p.next.push_back(piece);
        continue;
      }
      regex_->find_all(piece, p.spans);
      cover(piece, p.spans, false, m);
      apply_behavior(piece, m, SplitBehavior::kIsolated, p.next);
    }
    p.list.swap(p.next);
  }

 private:
  bool add_prefix_space_, use_regex_;
  std::optional<Pattern> regex_;
};

void build(const json& j, PreTokenizerChain& chain) {
  std::string type = j.value("type", "");
  if (chain.byte_level)
    fail(ErrorCode::kUnsupported,
         "tokenizer: pre_tokenizer '{}' after ByteLevel is not supported (ByteLevel must be last)",
         type);
  if (type == "Sequence") {
    for (const json& c : j.at("pretokenizers")) build(c, chain);
  } else if (type == "Split") {
    chain.steps.push_back(std::make_unique<Split>(
        make_pattern(j.at("pattern"), "pre_tokenizer Split"),
        parse_behavior(j.at("behavior").get<std::string>()), j.value("invert", false)));
  } else if (type == "Digits") {
    chain.steps.push_back(std::make_unique<Digits>(j.value("individual_digits", false)));
  } else if (type == "ByteLevel") {
    chain.steps.push_back(
        std::make_unique<ByteLevel>(j.value("add_prefix_space", true), j.value("use_regex", true)));
    chain.byte_level = true;
  } else {
    fail(ErrorCode::kUnsupported, "tokenizer: unsupported pre_tokenizer type '{}'", type);
  }
}

}  // namespace

PreTokenizerChain make_pre_tokenizer(const json& j) {
  PreTokenizerChain chain;
  if (!j.is_null()) build(j, chain);
  return chain;
}

}  // namespace deepinfer::tokenizer
