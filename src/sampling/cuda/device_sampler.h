// Token sampling on a CUDA device, choosing exactly the token sampler.h's sample_row chooses for
// the same logits, params, seq_seed and position (same processors, roundings, integer weights
// and Philox draw; see select_common.h and sampler_kernels.cu for how).
//
//   DeviceSampler sampler(stream);
//   auto results = sampler.sample(d_logits, R, V, rows);   // rows[i] pairs with logits row i
//
// Per call: one pinned staging buffer and one host-to-device copy carry every row's parameters
// and its sparse processor edits (min_tokens mask, logit_bias, penalties from the token
// history); one kernel applies the edits in place, one samples (a block per row); one copy
// brings the tokens back behind an event. sample() waits for it at once; launch() returns
// without waiting and collect() waits later, so the host can queue the next step meanwhile
// (zero-overhead scheduling). launch() may also leave each row's token in a device buffer
// (next_ids), where the next step's forward reads its input ids without a round trip.
//
// Rows that ask for logprobs run on the CPU instead: the raw row is downloaded and, in
// collect(), sample_row (with `mode`) does everything, so they get the CPU's logprobs; their
// device row is left as it was, and next_ids is not written for them. Every other row ends with
// its processed logits (after the processors, before temperature) in place. launch() never
// waits for the device (grown buffers are retired until the sampler goes, not freed).
//
// A row that cannot be sampled (all logits -inf / NaN after processing, a token id outside the
// vocabulary in its context or params, no params) gets `error` set with the CPU sampler's code
// and message and token -1 (next_ids 0); the other rows are unaffected. Params are expected
// validated (SamplingParams::validate); vocabularies of 2^23 tokens or more are refused, like
// the CPU. Not thread-safe: one DeviceSampler per stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "sampling/cuda/row_staging.h"
#include "sampling/sampler.h"

namespace deepinfer::sampling {

struct DeviceSampleResult {
  int32_t token = -1;
  std::optional<Logprobs> logprobs;  // set iff the row's params ask for logprobs
  std::optional<Error> error;        // set when the row could not be sampled (token is -1)
};

class DeviceSampler {
 public:
  explicit DeviceSampler(cudaStream_t stream);
  ~DeviceSampler();
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;

  // logits: device fp32 [R, V], row stride V, ready in `stream` order; modified in place as
  // described above. rows.size() == R. Throws deepinfer::Error for a bad call (sizes) or a CUDA
  // failure; per-row problems go into the results.
  std::vector<DeviceSampleResult> sample(float* logits, int64_t R, int64_t V,
                                         std::span<const SampleRow> rows,
                                         LogprobsMode mode = LogprobsMode::kRaw);

  // sample() in two halves. launch() queues the work (rows and their contexts are read before
  // it returns); next_ids, when given (device int32 [R]), receives row i's token at index i for
  // every row sampled on the device, in stream order. Returns, per row, whether next_ids holds
  // it. collect() waits for the last launch and returns its results; one launch at a time.
  std::vector<bool> launch(float* logits, int64_t R, int64_t V, std::span<const SampleRow> rows,
                           int32_t* next_ids = nullptr, LogprobsMode mode = LogprobsMode::kRaw);
  std::vector<DeviceSampleResult> collect();

 private:
  void reserve(size_t in_bytes, size_t out_rows, size_t cpu_floats);

  cudaStream_t stream_;
  RowStager stager_;
  cudaEvent_t tokens_ready_ = nullptr;       // recorded behind the last launch's token download
  bool launched_ = false;                    // a launch waits for its collect
  std::vector<DeviceSampleResult> pending_;  // the last launch's results, device rows unfilled
  std::vector<int64_t> device_rows_;         // rows sampled on the device, in kernel order
  int64_t vocab_ = 0;
  // The last launch's logprobs rows, sampled on the host by collect() (raw row k of h_rows_).
  struct HostRow {
    int64_t row;
    SamplingParams params;
    uint64_t seed;
    int64_t position;
    std::vector<int32_t> prompt, output, eos;
  };
  std::vector<HostRow> host_rows_;
  LogprobsMode mode_ = LogprobsMode::kRaw;
  std::vector<void*> retired_host_, retired_device_;  // grown-out buffers, freed at the end

  // Pinned host staging and device buffers, grown on demand.
  void* h_in_ = nullptr;  // RowParams[n] then LogitEdit[e]
  void* d_in_ = nullptr;
  size_t in_capacity_ = 0;    // bytes, both
  int32_t* h_out_ = nullptr;  // tokens[n] then status[n]
  int32_t* d_out_ = nullptr;
  size_t out_capacity_ = 0;   // rows, both
  float* h_rows_ = nullptr;   // raw rows of the CPU (logprobs) rows
  size_t rows_capacity_ = 0;  // floats
};

}  // namespace deepinfer::sampling
