// Turns one step's logits rows into tokens, where the logits are: on the host for the CPU
// backend (sampling::sample_row, row by row), on the device for CUDA (sampling::DeviceSampler:
// the same tokens, only the tokens come back). A row that cannot be sampled fails alone.
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
  // logits [rows.size(), V] (host or device as wanted); processed in place.
  virtual std::vector<StepSample> sample(Tensor& logits,
                                         std::span<const sampling::SampleRow> rows) = 0;
};

// The device sampler on a CUDA backend (builds with CUDA), else the host sampler.
std::unique_ptr<StepSampler> make_step_sampler(Backend& backend);

}  // namespace deepinfer
