// Internal building blocks of the tokenizer, one per tokenizer.json section. Each factory reads
// its JSON object and throws ErrorCode::kUnsupported naming the component type it cannot handle,
// so a tokenizer we would encode differently from HF fails at load instead of at run time.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/regex.h"

namespace deepinfer::tokenizer {

using json = nlohmann::json;

// GPT-2's reversible byte <-> printable code point map used by ByteLevel components.
const std::array<char32_t, 256>& byte_to_char();
// -1 for code points outside the map.
int char_to_byte(char32_t cp);

// A {"Regex": ...} or {"String": ...} pattern object; `what` names the component for errors.
Pattern make_pattern(const json& j, std::string_view what);

// ---- normalizers --------------------------------------------------------------------------

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;  // s is valid UTF-8, and stays so
};
std::unique_ptr<Normalizer> make_normalizer(const json& j);

// ---- pre-tokenizers -----------------------------------------------------------------------

// Text being pre-tokenized: views into the input or into strings owned by `arena`.
struct Pieces {
  std::vector<std::string_view> list;
  std::vector<std::string_view> next;  // scratch for the next split round
  std::deque<std::string> arena;
  std::vector<Span> spans;  // scratch for pattern matches
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void split(Pieces& p) const = 0;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// The pre-tokenizer chain. A trailing ByteLevel is not applied to the text: it sets byte_level
// and the model maps bytes to symbols itself (saves building the mapped strings).
struct PreTokenizerChain {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  bool byte_level = false;
};
PreTokenizerChain make_pre_tokenizer(const json& j);

// ---- model --------------------------------------------------------------------------------

class BpeModel {
 public:
  BpeModel(const json& model, bool byte_level_input);
  ~BpeModel();

  // Appends the ids of one pre-tokenized word (raw bytes when byte_level_input).
  void encode_word(std::string_view word, std::vector<uint32_t>& out) const;

  std::optional<uint32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(uint32_t id) const;
  size_t vocab_size() const { return vocab_size_; }
  uint32_t max_id() const { return max_id_; }

 private:
  struct MergeTable;
  void initial_symbols(std::string_view word, std::vector<uint32_t>& ids) const;
  void merge(std::vector<uint32_t>& ids) const;

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using StringMap = std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>>;

  StringMap vocab_;
  std::vector<std::string> vocab_r_;  // by id; ids not in the vocab hold an empty string
  std::vector<uint8_t> has_id_;
  uint64_t serial_ = 0;  // identifies this model to the per-thread word caches
  std::unique_ptr<MergeTable> merges_;
  std::array<int64_t, 256> byte_ids_{};  // byte-level: id of each byte's symbol, -1 if none
  StringMap raw_vocab_;                  // byte-level + ignore_merges lookups
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  std::optional<uint32_t> unk_id_;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  size_t vocab_size_ = 0;
  uint32_t max_id_ = 0;
};

// ---- decoders -----------------------------------------------------------------------------

class Decoder {
 public:
  virtual ~Decoder() = default;
  // HF's decode_chain: transforms the token strings in place.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
// Sets *pure_byte_level when the whole decoder is a single ByteLevel (the fast, streamable case).
std::unique_ptr<Decoder> make_decoder(const json& j, bool* pure_byte_level);
// ByteLevel decoding of one token into raw bytes (before the lossy UTF-8 step).
void append_byte_level_token(std::string& bytes, std::string_view token);

// ---- added tokens -------------------------------------------------------------------------

struct AddedToken;

// One piece of HF's AddedVocabulary::find_matches: an added token (index into the token list
// given to build) or, with token == -1, plain text.
struct AddedMatch {
  int64_t token;
  size_t start, end;
};

// Leftmost-longest matcher over added-token strings (HF uses Aho-Corasick, LeftmostLongest), with
// the single_word / lstrip / rstrip rules applied to each match.
class AddedMatcher {
 public:
  // patterns[i] is what token i matches (its content, normalized when the token is).
  void build(std::vector<const AddedToken*> tokens, std::vector<std::string> patterns);
  bool empty() const { return tokens_.empty(); }
  // Splits s into token and text pieces covering it (text pieces may be empty-free; overlap is
  // possible only through rstrip, as in HF).
  void find(std::string_view s, std::vector<AddedMatch>& out) const;

 private:
  // Longest pattern starting at s[pos]: its index, or -1.
  int64_t longest_at(std::string_view s, size_t pos, size_t* len) const;
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;
    int64_t pattern = -1;
  };
  std::vector<Node> nodes_;
  std::vector<const AddedToken*> tokens_;
  std::vector<size_t> lengths_;
  std::array<bool, 256> first_{};
};

// ---- post-processor -----------------------------------------------------------------------

// Ids added around a single sequence when special tokens are requested.
struct PostProcessor {
  std::vector<uint32_t> prefix, suffix;
};
PostProcessor make_post_processor(const json& j);

}  // namespace deepinfer::tokenizer
