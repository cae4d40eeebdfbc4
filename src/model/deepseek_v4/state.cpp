#include "model/deepseek_v4/state.h"

#include <algorithm>

namespace deepinfer::deepseek_v4 {

RowStore::RowStore(Backend& backend, int64_t width) : width_(width) {
  buf_ = backend.empty({16, width});
}

void RowStore::append(Backend& backend, const TensorView& rows) {
  const int64_t n = rows.dim(0);
  if (n == 0) return;
  DI_ASSERT(rows.dim(1) == width_);
  if (rows_ + n > buf_.dim(0)) {
    const int64_t cap = std::max<int64_t>(2 * buf_.dim(0), rows_ + n);
    Tensor bigger = backend.empty({cap, width_});
    if (rows_ > 0)
      backend.copy(buf_.view().slice_rows(0, rows_), bigger.view().slice_rows(0, rows_));
    buf_ = std::move(bigger);
  }
  backend.copy(rows, buf_.view().slice_rows(rows_, rows_ + n));
  rows_ += n;
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

SequenceState SequenceState::create(const ModelConfig& c, Backend& b) {
  SequenceState st;
  st.layers.resize(c.num_hidden_layers);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    LayerState& L = st.layers[l];
    L.ring = b.empty({std::max(c.sliding_window - 1, 1), c.head_dim});
    const AttnType t = c.layer_types[l];
    if (t == AttnType::kSliding) continue;
    const int m = c.compress_rate(l);
    L.comp = make_compressor(b, m, c.head_dim, t == AttnType::kCSA);
    if (t == AttnType::kCSA) L.indexer = make_compressor(b, m, c.index_head_dim, true);
  }
  return st;
}

int64_t SequenceState::device_bytes() const {
  int64_t total = 0;
  for (const auto& L : layers)
    total += bytes(L.ring) + compressor_bytes(L.comp) + compressor_bytes(L.indexer);
  return total;
}

}  // namespace deepinfer::deepseek_v4
