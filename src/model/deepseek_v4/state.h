// Per-sequence DeepSeek-V4 state: what the model must remember between forward calls so that a
// prompt fed in any split (whole, chunks, token by token) gives the same logits. There is no
// classic KV cache: each layer keeps a sliding-window ring of shared K=V vectors; CSA/HCA layers
// add their compressed entries (one per `compress_rate` tokens) and the compressor's pending
// tokens of the unfinished window; CSA also keeps the last closed window's first series (the
// overlap carry) and the same three things for its lightning indexer. All tensors live on the
// backend's device. src/kv/ (the engine's memory manager) will own where these live; this file
// defines what they are.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"

namespace deepinfer::deepseek_v4 {

// Rows appended over time ([rows, width]), with amortised doubling on the device.
class RowStore {
 public:
  RowStore() = default;
  RowStore(Backend& backend, int64_t width);
  void append(Backend& backend, const TensorView& rows);
  // Appends n rows left for the caller to write (the returned view) and makes room for
  // `reserve` more after them without another reallocation.
  TensorView extend(Backend& backend, int64_t n, int64_t reserve = 0);
  int64_t capacity() const { return buf_.defined() ? buf_.dim(0) : 0; }
  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }
  // The filled rows [rows, width] (empty view when rows == 0).
  TensorView view() const;

 private:
  Tensor buf_;
  int64_t rows_ = 0, width_ = 0;
};

struct CompressorState {
  // Tokens of the unfinished window (fewer than m), per series, gates with the slot bias added.
  Tensor pend_kv_a, pend_gate_a, pend_kv_b, pend_gate_b;  // [m, d]; *_b only for CSA
  int pending = 0;
  // CSA: series a of the last closed window; absent before the first window closes.
  Tensor prev_kv_a, prev_gate_a;  // [m, d]
  bool has_prev = false;
  RowStore entries;  // [E, d], RoPE applied at position w * m
};

// Rows of a layer's K=V ring buffer: twice the W-1 the window keeps, so a full window can take
// W-1 more rows before it has to move.
int64_t ring_capacity(const ModelConfig& config);

struct LayerState {
  // The last ring_rows K=V vectors in position order, rows [ring_begin, ring_begin + ring_rows)
  // of a buffer of ring_capacity() rows: a decode token is written after them and the window is
  // a view (no copies); the rows move back to the front only when the buffer's end is reached.
  Tensor ring;  // [ring_capacity(config), hd]
  int64_t ring_begin = 0;
  int64_t ring_rows = 0;
  TensorView ring_view() const {
    return ring.view().slice_rows(ring_begin, ring_begin + ring_rows);
  }
  CompressorState comp;     // CSA / HCA
  CompressorState indexer;  // CSA only
};

struct SequenceState {
  int64_t num_tokens = 0;
  std::vector<LayerState> layers;

  static SequenceState create(const ModelConfig& config, Backend& backend);
  // Synthetic context (benchmarks): overwrites this state (fresh from create) with the layout a
  // prefill of num_tokens tokens leaves (ring of min(W-1, n) rows, n / m compressed entries and
  // indexer keys, n % m pending compressor rows, the CSA overlap carry once a window closed,
  // num_tokens = n), every value drawn with Backend::fill_random at the scale of real state
  // (uniform on +-sqrt(3): RMS 1, like the normed K=V rows, entries and projections). Entry
  // stores get room for `reserve_tokens` more tokens. Values are a function of `seed` only.
  void fill_synthetic(const ModelConfig& config, Backend& backend, int64_t num_tokens,
                      uint64_t seed, int64_t reserve_tokens = 0);
  // Bytes held on the device right now (rings, pending buffers, entries).
  int64_t device_bytes() const;
};

}  // namespace deepinfer::deepseek_v4
