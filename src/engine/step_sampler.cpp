#include "engine/step_sampler.h"

#ifdef DEEPINFER_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "sampling/cuda/device_sampler.h"
#endif

namespace deepinfer {

namespace {

class HostStepSampler final : public StepSampler {
 public:
  bool wants_device_logits() const override { return false; }
  // Samples at once (the logits are on the host, the forward is done).
  std::vector<bool> launch(Tensor& logits, std::span<const sampling::SampleRow> rows,
                           const TensorView& next_ids) override {
    DI_CHECK(next_ids.numel() == static_cast<int64_t>(rows.size()), ErrorCode::kInternal,
             "host sampler: next_ids {} for {} rows", next_ids.shape_str(), rows.size());
    const int64_t V = logits.dim(1);
    results_.assign(rows.size(), {});
    int32_t* next = next_ids.data_as<int32_t>();
    for (size_t k = 0; k < rows.size(); ++k) {
      const sampling::SampleRow& row = rows[k];
      try {
        std::span<float> values(logits.data_as<float>() + static_cast<int64_t>(k) * V, V);
        sampling::SampleResult r =
            sampling::sample_row(values, *row.params, row.seq_seed, row.position, row.context);
        results_[k].token = r.token;
        results_[k].logprobs = std::move(r.logprobs);
      } catch (const Error& e) {
        results_[k].error = e;
      }
      next[k] = results_[k].error ? 0 : results_[k].token;
    }
    return std::vector<bool>(rows.size(), true);
  }
  std::vector<StepSample> collect() override { return std::move(results_); }

 private:
  std::vector<StepSample> results_;
};

#ifdef DEEPINFER_HAVE_CUDA
class DeviceStepSampler final : public StepSampler {
 public:
  explicit DeviceStepSampler(cudaStream_t stream) : sampler_(stream) {}
  bool wants_device_logits() const override { return true; }
  std::vector<bool> launch(Tensor& logits, std::span<const sampling::SampleRow> rows,
                           const TensorView& next_ids) override {
    DI_CHECK(next_ids.numel() == static_cast<int64_t>(rows.size()), ErrorCode::kInternal,
             "device sampler: next_ids {} for {} rows", next_ids.shape_str(), rows.size());
    return sampler_.launch(logits.data_as<float>(), static_cast<int64_t>(rows.size()),
                           logits.dim(1), rows, next_ids.data_as<int32_t>());
  }
  std::vector<StepSample> collect() override {
    std::vector<sampling::DeviceSampleResult> got = sampler_.collect();
    std::vector<StepSample> out(got.size());
    for (size_t k = 0; k < got.size(); ++k)
      out[k] = StepSample{got[k].token, std::move(got[k].logprobs), std::move(got[k].error)};
    return out;
  }

 private:
  sampling::DeviceSampler sampler_;
};
#endif

}  // namespace

std::unique_ptr<StepSampler> make_step_sampler(Backend& backend) {
#ifdef DEEPINFER_HAVE_CUDA
  if (cudaStream_t stream = cuda_stream(backend))
    return std::make_unique<DeviceStepSampler>(stream);
#else
  (void)backend;
#endif
  return std::make_unique<HostStepSampler>();
}

}  // namespace deepinfer
