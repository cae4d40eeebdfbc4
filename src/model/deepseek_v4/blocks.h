// The pieces of one DeepSeek-V4 forward, shared by model.cpp. Each function runs one sub-block
// of one layer for the S new tokens of a sequence through the backend, updating that layer's
// state. Internal to model/deepseek_v4.
#pragma once

#include <span>
#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"
#include "model/deepseek_v4/state.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::deepseek_v4 {

// One sequence's rows in a batched forward: rows [row0, row0 + count) of every [T, ...] tensor.
struct Segment {
  int64_t row0 = 0, count = 0;
  SequenceState* state = nullptr;
};

// Inputs of one forward call, uploaded once and shared by every layer. Dense work (projections,
// norms, mHC, MoE) runs over all T rows at once; attention and the compressors run per segment.
struct StepInputs {
  int64_t num_tokens = 0;  // T, all segments together
  std::vector<Segment> segments;
  std::vector<int32_t> positions;  // host copy, [T]
  Tensor ids;                      // I32 [T] on the device
  Tensor positions_dev;            // I32 [T] on the device
  // Per compress rate m of the model's compressed layers, uploaded once per step rather than
  // once per layer: how many compressed entries each row may see ((position + 1) / m).
  struct RateRows {
    int m = 0;
    Tensor visible;  // I32 [T]
  };
  std::vector<RateRows> rates;
  const RateRows& rate(int m) const;
};

// Copies a forward queues and issues together through Backend::copy_batch (one launch instead
// of one per copy: a decode step writes a row into every sequence's ring and pending buffers of
// every layer). Sources must stay alive until flush(); the queued pairs must not overlap (see
// Backend::copy_batch), so a copy whose destination something queued reads goes through
// Backend::copy instead.
class CopyBatch {
 public:
  void add(const TensorView& src, const TensorView& dst) {
    src_.push_back(src);
    dst_.push_back(dst);
  }
  void flush(Backend& b) {
    if (!src_.empty()) b.copy_batch(src_, dst_);
    src_.clear();
    dst_.clear();
  }

 private:
  std::vector<TensorView> src_, dst_;
};

// x [T, K] times a fused matrix ([sum of widths, K], weights.h's x_proj): one GEMM, then its
// column blocks as separate [T, width] tensors (views of the product when T == 1, else copied
// out with copy_columns).
std::vector<Tensor> project_fused(Backend& b, const TensorView& x, const Tensor& fused,
                                  const std::vector<int64_t>& widths);

// Uploads host int32 values into a new device tensor of shape [n].
Tensor upload_i32(Backend& backend, const std::vector<int32_t>& values);

// Query rows per lightning-indexer call of a long CSA prefill segment whose rows see up to
// `entries` compressed entries: DEEPINFER_INDEXER_CHUNK_ROWS (a size below 1 is an error naming
// it), fewer where a call's [rows, entries] fp32 scores would pass kIndexerScoreBytes, at least
// one. Each call scores only the entries its last row may see (a prompt's early rows see few),
// which halves a long prefill's indexer GEMMs; the default 1024 took an H100's 65,536-token step
// 1-2% under 256's (fuller waves, fewer launches and top-ks; docs/perf.md), and the cap keeps a
// 1M-token context's calls at 256 rows (256 MiB), as before.
constexpr int64_t kIndexerScoreBytes = int64_t{256} << 20;
int64_t indexer_chunk_rows(int64_t entries);

// Attention sub-block (projections, RoPE, ring update, compressors, indexer, attention with
// sinks, de-rotation, grouped output projection). x [T, D] is the normed collapsed stream.
Tensor attention_block(Backend& backend, const ModelConfig& config, const ModelWeights& weights,
                       int layer, const TensorView& x, const StepInputs& in);

// A compressor's projections of every row of the step (all segments at once): per series the
// key/value rows and the gate rows (their slot's position bias is added as windows pool:
// CompressorWeights::slot_bias); series b only for CSA (two overlapping series). proj: the
// layer's fused projection blocks of this compressor, kv_a, gate_a[, kv_b, gate_b].
struct CompressorRows {
  Tensor kv_a, gate_a, kv_b, gate_b;  // [T, d]
};
CompressorRows compressor_rows(bool csa, std::span<const Tensor> proj);

// Feeds one segment's rows [r0, r0 + S) of `rows` into a window compressor's state: closed
// windows become entries in state.entries, the rest waits in the pending buffers. d = entry
// width; csa = two overlapping series (CSA and the indexer) rather than one (HCA).
void compressor_update(Backend& backend, const CompressorWeights& w, int m, int d, bool csa,
                       float norm_eps, const CompressorRows& rows, int64_t r0, int64_t S,
                       const TensorView& inv_freq, CompressorState& state);
// compressor_update in two phases for rows that fit the unfinished window (every decode token):
// compressor_stage queues their copies into the pending buffers on `copies` and counts them
// (false, doing nothing, when they do not fit: use compressor_update); once the copies ran,
// compressor_close_full_windows pools the windows that filled, of many sequences at once (one
// launch per step of the pooling however many close, the same values as one by one).
bool compressor_stage(CopyBatch& copies, int m, bool csa, const CompressorRows& rows, int64_t r0,
                      int64_t S, CompressorState& state);
void compressor_close_full_windows(Backend& backend, const CompressorWeights& w, int m, int d,
                                   bool csa, float norm_eps, const TensorView& inv_freq,
                                   std::span<CompressorState* const> states);

// MoE sub-block: router (hash or top-k), routed experts and the shared expert.
Tensor moe_block(Backend& backend, const ModelConfig& config, const MoeWeights& w,
                 const TensorView& x, const StepInputs& in);

}  // namespace deepinfer::deepseek_v4
