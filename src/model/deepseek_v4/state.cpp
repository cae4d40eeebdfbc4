#include "model/deepseek_v4/state.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace deepinfer::deepseek_v4 {

RowStore::RowStore(Backend& backend, int64_t width) : width_(width) {
  buf_ = backend.empty({16, width});
}

void RowStore::append(Backend& backend, const TensorView& rows) {
  const int64_t n = rows.dim(0);
  if (n == 0) return;
  DI_ASSERT(rows.dim(1) == width_);
  backend.copy(rows, extend(backend, n));
}

TensorView RowStore::extend(Backend& backend, int64_t n, int64_t reserve) {
  DI_ASSERT(n >= 0 && reserve >= 0);
  if (rows_ + n + reserve > buf_.dim(0)) {
    const int64_t cap =
        reserve > 0 ? rows_ + n + reserve : std::max<int64_t>(2 * buf_.dim(0), rows_ + n);
    Tensor bigger = backend.empty({cap, width_});
    if (rows_ > 0)
      backend.copy(buf_.view().slice_rows(0, rows_), bigger.view().slice_rows(0, rows_));
    buf_ = std::move(bigger);
  }
  const TensorView fresh = buf_.view().slice_rows(rows_, rows_ + n);
  rows_ += n;
  return fresh;
}

TensorView RowStore::view() const {
  if (rows_ == 0) return TensorView();
  return buf_.view().slice_rows(0, rows_);
}

namespace {

CompressorState make_compressor(Backend& b, int m, int d, bool two_series) {
  CompressorState s;
  s.pend_kv_a = b.empty({m, d});
  s.pend_gate_a = b.empty({m, d});
  if (two_series) {
    s.pend_kv_b = b.empty({m, d});
    s.pend_gate_b = b.empty({m, d});
    s.prev_kv_a = b.empty({m, d});
    s.prev_gate_a = b.empty({m, d});
  }
  s.entries = RowStore(b, d);
  return s;
}

int64_t bytes(const Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.view().nbytes()) : 0;
}

int64_t compressor_bytes(const CompressorState& s) {
  return bytes(s.pend_kv_a) + bytes(s.pend_gate_a) + bytes(s.pend_kv_b) + bytes(s.pend_gate_b) +
         bytes(s.prev_kv_a) + bytes(s.prev_gate_a) + s.entries.rows() * s.entries.width() * 4;
}

}  // namespace

int64_t ring_capacity(const ModelConfig& c) {
  return 2 * std::max(c.sliding_window - 1, 1);
}

SequenceState SequenceState::create(const ModelConfig& c, Backend& b) {
  SequenceState st;
  st.layers.resize(c.num_hidden_layers);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    LayerState& L = st.layers[l];
    L.ring = b.empty({ring_capacity(c), c.head_dim});
    const AttnType t = c.layer_types[l];
    if (t == AttnType::kSliding) continue;
    const int m = c.compress_rate(l);
    L.comp = make_compressor(b, m, c.head_dim, t == AttnType::kCSA);
    if (t == AttnType::kCSA) L.indexer = make_compressor(b, m, c.index_head_dim, true);
  }
  return st;
}

namespace {

// Real state values have RMS about 1 (normed K=V rows and entries, projections of normed
// activations); uniform on [-sqrt(3), sqrt(3)] has RMS 1.
constexpr float kUnitRmsBound = 1.7320508f;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A fill seed per (sequence seed, layer, part): parts never share a stream.
uint64_t part_seed(uint64_t seed, int layer, int part) {
  return mix64(mix64(seed + 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(layer) << 8 | static_cast<uint64_t>(part)));
}

void fill_unit(Backend& b, const TensorView& t, uint64_t seed) {
  if (t.numel() > 0) b.fill_random(t, seed, -kUnitRmsBound, kUnitRmsBound);
}

// A compressor (or indexer) after n tokens: n / m entries, n % m pending rows, and (two series)
// the last closed window's series a.
void fill_compressor(Backend& b, CompressorState& st, int m, bool two_series, int64_t n,
                     int64_t reserve_tokens, uint64_t seed, int layer, int part0) {
  const int64_t entries = n / m, rest = n % m;
  const int64_t reserve = (n + reserve_tokens) / m - entries;
  if (entries > 0 || reserve > 0)
    fill_unit(b, st.entries.extend(b, entries, reserve), part_seed(seed, layer, part0));
  st.pending = static_cast<int>(rest);
  if (rest > 0) {
    fill_unit(b, st.pend_kv_a.view().slice_rows(0, rest), part_seed(seed, layer, part0 + 1));
    fill_unit(b, st.pend_gate_a.view().slice_rows(0, rest), part_seed(seed, layer, part0 + 2));
    if (two_series) {
      fill_unit(b, st.pend_kv_b.view().slice_rows(0, rest), part_seed(seed, layer, part0 + 3));
      fill_unit(b, st.pend_gate_b.view().slice_rows(0, rest), part_seed(seed, layer, part0 + 4));
    }
  }
  st.has_prev = two_series && entries > 0;
  if (st.has_prev) {
    fill_unit(b, st.prev_kv_a, part_seed(seed, layer, part0 + 5));
    fill_unit(b, st.prev_gate_a, part_seed(seed, layer, part0 + 6));
  }
}

}  // namespace

void SequenceState::fill_synthetic(const ModelConfig& c, Backend& b, int64_t n, uint64_t seed,
                                   int64_t reserve_tokens) {
  DI_CHECK(n >= 0 && reserve_tokens >= 0, ErrorCode::kInvalidArgument,
           "synthetic context: {} tokens (reserve {}) must not be negative", n, reserve_tokens);
  DI_CHECK(n + reserve_tokens <= std::numeric_limits<int32_t>::max(), ErrorCode::kInvalidArgument,
           "synthetic context: {} tokens exceed the int32 positions", n + reserve_tokens);
  DI_CHECK(num_tokens == 0 && static_cast<int64_t>(layers.size()) == c.num_hidden_layers,
           ErrorCode::kInvalidArgument,
           "synthetic context needs a fresh state of the model's {} layers (this one has {} "
           "layers and {} tokens)",
           c.num_hidden_layers, layers.size(), num_tokens);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    LayerState& L = layers[l];
    L.ring_begin = 0;
    L.ring_rows = std::min<int64_t>(std::max(c.sliding_window - 1, 0), n);
    if (L.ring_rows > 0)
      fill_unit(b, L.ring.view().slice_rows(0, L.ring_rows), part_seed(seed, l, 0));
    const AttnType t = c.layer_types[l];
    if (t == AttnType::kSliding) continue;
    const int m = c.compress_rate(l);
    const bool csa = t == AttnType::kCSA;
    fill_compressor(b, L.comp, m, csa, n, reserve_tokens, seed, l, 1);
    if (csa) fill_compressor(b, L.indexer, m, true, n, reserve_tokens, seed, l, 8);
  }
  num_tokens = n;
}

int64_t SequenceState::device_bytes() const {
  int64_t total = 0;
  for (const auto& L : layers)
    total += bytes(L.ring) + compressor_bytes(L.comp) + compressor_bytes(L.indexer);
  return total;
}

}  // namespace deepinfer::deepseek_v4
