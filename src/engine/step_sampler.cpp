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
  std::vector<StepSample> sample(Tensor& logits,
                                 std::span<const sampling::SampleRow> rows) override {
    const int64_t V = logits.dim(1);
    std::vector<StepSample> out(rows.size());
    for (size_t k = 0; k < rows.size(); ++k) {
      const sampling::SampleRow& row = rows[k];
      try {
        std::span<float> values(logits.data_as<float>() + static_cast<int64_t>(k) * V, V);
        sampling::SampleResult r =
            sampling::sample_row(values, *row.params, row.seq_seed, row.position, row.context);
        out[k].token = r.token;
        out[k].logprobs = std::move(r.logprobs);
      } catch (const Error& e) {
        out[k].error = e;
      }
    }
    return out;
  }
};

#ifdef DEEPINFER_HAVE_CUDA
class DeviceStepSampler final : public StepSampler {
 public:
  explicit DeviceStepSampler(cudaStream_t stream) : sampler_(stream) {}
  bool wants_device_logits() const override { return true; }
  std::vector<StepSample> sample(Tensor& logits,
                                 std::span<const sampling::SampleRow> rows) override {
    std::vector<sampling::DeviceSampleResult> got = sampler_.sample(
        logits.data_as<float>(), static_cast<int64_t>(rows.size()), logits.dim(1), rows);
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
