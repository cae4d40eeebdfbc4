// Turns one step's logits rows into tokens, where the logits are: on the host for the CPU
// backend (sampling::sample_row, row by row), on the device for CUDA (sampling::DeviceSampler:
// the same tokens, only the tokens come back). A row that cannot be sampled fails alone.
//
// launch() queues the sampling and collect() returns the tokens, so that the engine can queue
// the next step's forward in between (zero-overhead scheduling); launch() also leaves each
// row's token in a backend tensor, where that forward reads its input ids.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "sampling/sampler.h"

namespace deepinfer {

struct StepSample {
  int32_t token = -1;
  std::optional<sampling::Logprobs> logprobs;
  std::optional<Error> error;  // set: this row's request fails ("abort"), the others go on
};

class StepSampler {
 public:
  virtual ~StepSampler() = default;
  // Where the sampler wants the model's logits.
  virtual bool wants_device_logits() const = 0;
  // Queues sampling of logits [rows.size(), V] (host or device as wanted; processed in place;
  // rows and their contexts are read before it returns). next_ids (I32 [rows.size()] on the
  // backend) receives row k's token at k, 0 where the row failed, in the backend's stream
  // order. Returns, per row, whether next_ids holds its token (false: only the host will know
  // it, after collect). One launch at a time; the logits stay alive until collect().
  virtual std::vector<bool> launch(Tensor& logits, std::span<const sampling::SampleRow> rows,
                                   const TensorView& next_ids) = 0;
  // Waits for the last launch and returns its tokens.
  virtual std::vector<StepSample> collect() = 0;
};

// The device sampler on a CUDA backend (builds with CUDA), else the host sampler.
std::unique_ptr<StepSampler> make_step_sampler(Backend& backend);

}  // namespace deepinfer
