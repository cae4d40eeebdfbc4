// Host side of the device sampler: SampleRows -> the kernels' RowParams and sparse LogitEdits
// (sampler_kernels.h). Separate from DeviceSampler so tests can check it without a GPU.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/cuda/sampler_kernels.h"
#include "sampling/sampler.h"

namespace deepinfer::sampling {

class RowStager {
 public:
  // Starts a new batch over a vocabulary of V tokens.
  void clear(int64_t V);
  // Appends logits row `row` (its params must be set): the row's parameters, and one edit per
  // distinct token the processors change (min_tokens mask, logit_bias, penalties from the
  // token history). Throws logits_processors.cpp's kInvalidArgument, checked in its order, for
  // a token id outside [0, V); nothing of the row is kept then.
  void add(int64_t row, const SampleRow& r);

  const std::vector<cuda::RowParams>& params() const { return params_; }
  const std::vector<cuda::LogitEdit>& edits() const { return edits_; }

 private:
  int64_t vocab_ = 0;
  std::vector<cuda::RowParams> params_;
  std::vector<cuda::LogitEdit> edits_;
  std::vector<int32_t> edit_of_;  // token -> its edit in the row being added, or -1
};

// What launch_apply_edits does, on host logits [R, V] (for tests).
void apply_edits_host(float* logits, int64_t V, std::span<const cuda::RowParams> params,
                      std::span<const cuda::LogitEdit> edits);

}  // namespace deepinfer::sampling
