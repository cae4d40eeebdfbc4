// The BPE model: initial symbols (chars, or bytes for byte-level input), unknown handling
// (byte_fallback, unk_token, fuse_unk), then HF's merge loop: a heap of candidate pairs ordered
// by (merge rank, position), with stale entries skipped. Mirroring it exactly keeps ties and
// overlapping pairs ("aaa") identical to HF.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "core/status.h"
#include "tokenizer/components.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

// Open-addressing map (id_a, id_b) -> (rank, new_id): this lookup is the hot loop of encoding.
struct BpeModel::MergeTable {
  struct Slot {
    uint64_t key;
    uint32_t rank, new_id;
  };
  static constexpr uint64_t kEmpty = ~0ull;
  std::vector<Slot> slots;
  uint64_t mask = 0;

  explicit MergeTable(size_t n) {
    size_t cap = 16;
    while (cap < n * 2 + 1) cap <<= 1;
    slots.assign(cap, Slot{kEmpty, 0, 0});
    mask = cap - 1;
  }
  static uint64_t hash(uint64_t k) { return (k * 0x9E3779B97F4A7C15ull) >> 17; }
  void put(uint32_t a, uint32_t b, uint32_t rank, uint32_t new_id) {
    uint64_t k = (uint64_t{a} << 32) | b;
    for (uint64_t i = hash(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == kEmpty || slots[i].key == k) {
        slots[i] = {k, rank, new_id};  // a repeated pair keeps the later rank, as HF's HashMap
        return;
      }
    }
  }
  const Slot* get(uint32_t a, uint32_t b) const {
    uint64_t k = (uint64_t{a} << 32) | b;
    for (uint64_t i = hash(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == k) return &slots[i];
      if (slots[i].key == kEmpty) return nullptr;
    }
  }
};

namespace {

// Per-thread cache of encoded words (HF keeps one too): most words of real text repeat, and a hit
// skips the merge loop. Per thread so encode needs no locks; it belongs to one model at a time.
struct WordCache {
  static constexpr size_t kMaxEntries = 1 << 16;
  static constexpr size_t kMaxWordBytes = 64;
  uint64_t owner = 0;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::vector<uint32_t>, Hash, std::equal_to<>> map;
};

WordCache& word_cache(uint64_t owner) {
  thread_local WordCache cache;
  if (cache.owner != owner) {
    cache.map.clear();
    cache.owner = owner;
  }
  return cache;
}

std::atomic<uint64_t> next_serial{1};

}  // namespace

BpeModel::~BpeModel() = default;

BpeModel::BpeModel(const json& j, bool byte_level_input)
    : serial_(next_serial.fetch_add(1)), byte_level_(byte_level_input) {
  std::string type = j.value("type", "BPE");
  DI_CHECK(type == "BPE", ErrorCode::kUnsupported,
           "tokenizer: unsupported model type '{}' (only BPE is implemented)", type);
  if (j.contains("dropout") && !j["dropout"].is_null()) {
    float d = j["dropout"].get<float>();
    DI_CHECK(d == 0.0f, ErrorCode::kUnsupported,
             "tokenizer: model BPE: dropout {} is not supported (non-deterministic)", d);
  }
  auto opt_string = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  prefix_ = opt_string("continuing_subword_prefix");
  suffix_ = opt_string("end_of_word_suffix");
  byte_fallback_ = j.value("byte_fallback", false);
  ignore_merges_ = j.value("ignore_merges", false);
  fuse_unk_ = j.value("fuse_unk", false);

  const json& vocab = j.at("vocab");
  DI_CHECK(vocab.is_object(), ErrorCode::kCorrupt, "tokenizer: model BPE: vocab must be an object");
  vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    uint32_t id = it.value().get<uint32_t>();
    DI_CHECK(id < (1u << 28), ErrorCode::kCorrupt,
             "tokenizer: model BPE: id {} of '{}' is too large", id, it.key());
    vocab_[it.key()] = id;
    if (id >= vocab_r_.size()) {
      vocab_r_.resize(id + 1);
      has_id_.resize(id + 1);
    }
    vocab_r_[id] = it.key();
    has_id_[id] = 1;
    max_id_ = std::max(max_id_, id);
  }
  vocab_size_ = vocab_.size();
  std::string unk = opt_string("unk_token");
  if (!unk.empty()) {
    auto it = vocab_.find(unk);
    DI_CHECK(it != vocab_.end(), ErrorCode::kCorrupt,
             "tokenizer: model BPE: unk_token '{}' is not in the vocab", unk);
    unk_id_ = it->second;
  }

  const json& merges = j.at("merges");
  merges_ = std::make_unique<MergeTable>(merges.size());
  auto lookup = [&](std::string_view tok) {
    auto it = vocab_.find(tok);
    DI_CHECK(it != vocab_.end(), ErrorCode::kCorrupt,
             "tokenizer: model BPE: merge token '{}' is not in the vocab", tok);
    return it->second;
  };
  uint32_t rank = 0;
  for (const json& m : merges) {
    std::string_view a, b;
    if (m.is_string()) {
      std::string_view s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      DI_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
               ErrorCode::kCorrupt, "tokenizer: model BPE: bad merge '{}'", s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      DI_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
               ErrorCode::kCorrupt, "tokenizer: model BPE: merge {} is not a pair", rank);
      a = m[0].get_ref<const std::string&>();
      b = m[1].get_ref<const std::string&>();
    }
    DI_CHECK(b.compare(0, prefix_.size(), prefix_) == 0 || prefix_.empty(), ErrorCode::kCorrupt,
             "tokenizer: model BPE: merge '{} {}' lacks the continuing_subword_prefix", a, b);
    std::string merged(a);
    merged.append(b.substr(prefix_.size()));
    merges_->put(lookup(a), lookup(b), rank, lookup(merged));
    ++rank;
  }

  for (int b = 0; b < 256; ++b) {
    std::string s;
    utf8_append(s, byte_to_char()[b]);
    auto it = vocab_.find(s);
    byte_ids_[b] = it == vocab_.end() ? -1 : static_cast<int64_t>(it->second);
  }
  if (byte_level_ && ignore_merges_) {
    // Whole-word lookups by raw bytes: undo the byte mapping of every fully mappable token.
    for (const auto& [tok, id] : vocab_) {
      std::string raw;
      bool ok = true;
      for (size_t i = 0; i < tok.size() && ok;) {
        char32_t cp;
        size_t n = utf8_decode(tok, i, &cp);
        int byte = n ? char_to_byte(cp) : -1;
        ok = byte >= 0;
        raw.push_back(static_cast<char>(byte));
        i += n ? n : 1;
      }
      if (ok) raw_vocab_.emplace(std::move(raw), id);
    }
  }
}

std::optional<uint32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(uint32_t id) const {
  return id < has_id_.size() && has_id_[id] ? &vocab_r_[id] : nullptr;
}

// HF's merge_word: one symbol per character (with prefix/suffix), byte_fallback, unk handling.
void BpeModel::initial_symbols(std::string_view w, std::vector<uint32_t>& ids) const {
  ids.clear();
  if (byte_level_) {
    bool all = true;
    for (char c : w) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
    if (all) {
      for (char c : w)
        ids.push_back(static_cast<uint32_t>(byte_ids_[static_cast<unsigned char>(c)]));
      return;
    }
  }
  std::string mapped;
  if (byte_level_) {
    for (char c : w) utf8_append(mapped, byte_to_char()[static_cast<unsigned char>(c)]);
    w = mapped;
  }
  bool have_unk = false;  // an unk symbol waiting to be emitted (or fused with the next)
  uint32_t pending_unk = 0;
  std::string s;
  for (size_t i = 0; i < w.size();) {
    char32_t cp;
    size_t n = utf8_decode(w, i, &cp);
    DI_ASSERT(n > 0);
    s.clear();
    if (i > 0) s += prefix_;
    s.append(w.substr(i, n));
    if (i + n == w.size()) s += suffix_;
    i += n;
    auto it = vocab_.find(s);
    if (it != vocab_.end()) {
      if (have_unk) ids.push_back(pending_unk);
      have_unk = false;
      ids.push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      std::vector<uint32_t> bytes;
      for (unsigned char b : s) {
        auto bt = vocab_.find(fmt::format("<0x{:02X}>", b));
        if (bt == vocab_.end()) break;
        bytes.push_back(bt->second);
      }
      if (bytes.size() == s.size()) {
        ids.insert(ids.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (unk_id_) {
      if (have_unk && !fuse_unk_) ids.push_back(pending_unk);
      pending_unk = *unk_id_;
      have_unk = true;
    }
    // Without an unk_token the character is dropped, as in HF.
  }
  if (have_unk) ids.push_back(pending_unk);
}

void BpeModel::merge(std::vector<uint32_t>& ids) const {
  size_t n = ids.size();
  if (n < 2) return;
  struct Cand {
    uint32_t rank, pos, new_id;
    bool operator<(const Cand& o) const {  // max-heap on "better": lower rank, then lower pos
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  thread_local std::vector<Cand> heap;
  thread_local std::vector<int32_t> prev, next;
  thread_local std::vector<uint8_t> alive;
  heap.clear();
  prev.resize(n);
  next.resize(n);
  alive.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  for (size_t i = 0; i + 1 < n; ++i)
    if (const auto* m = merges_->get(ids[i], ids[i + 1]))
      heap.push_back({m->rank, static_cast<uint32_t>(i), m->new_id});
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    Cand top = heap.back();
    heap.pop_back();
    uint32_t pos = top.pos;
    if (!alive[pos] || next[pos] < 0) continue;
    int32_t right = next[pos];
    const auto* m = merges_->get(ids[pos], ids[right]);
    if (!m || m->new_id != top.new_id) continue;  // stale candidate
    ids[pos] = top.new_id;
    alive[right] = 0;
    next[pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = static_cast<int32_t>(pos);
    if (prev[pos] >= 0) {
      uint32_t p = static_cast<uint32_t>(prev[pos]);
      if (const auto* pm = merges_->get(ids[p], ids[pos])) {
        heap.push_back({pm->rank, p, pm->new_id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
    if (next[pos] >= 0) {
      if (const auto* nm = merges_->get(ids[pos], ids[next[pos]])) {
        heap.push_back({nm->rank, pos, nm->new_id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
  }
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)
    if (alive[i]) ids[k++] = ids[i];
  ids.resize(k);
}

void BpeModel::encode_word(std::string_view word, std::vector<uint32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (byte_level_) {
      auto it = raw_vocab_.find(word);
      if (it != raw_vocab_.end()) {
        out.push_back(it->second);
        return;
      }
    } else if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  WordCache& cache = word_cache(serial_);
  bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  if (cacheable) {
    auto it = cache.map.find(word);
    if (it != cache.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<uint32_t> ids;
  initial_symbols(word, ids);
  merge(ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable && cache.map.size() < WordCache::kMaxEntries) cache.map.emplace(word, ids);
}

}  // namespace deepinfer::tokenizer
