// fill_random on the device: argument checks here, the work in kernels_fill.cu.
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/kernels.h"

namespace deepinfer::cuda {

void CudaBackend::fill_random(const TensorView& t, uint64_t seed, float lo, float hi) {
  const char* op = "fill_random";
  OpScope s(*this, op);
  arg_checks::expect_fill(op, t, Device::kCuda, lo, hi);
  if (t.numel() == 0) return;
  if (t.dtype() == DType::kFP4E2M1) {
    check(launch_fill_random_bytes(static_cast<uint8_t*>(t.data()), t.numel() / 2, seed,
                                   ctx_->stream()),
          op);
    return;
  }
  check(launch_fill_random(t.data(), t.dtype() == DType::kBF16, t.numel(), seed, lo, hi,
                           ctx_->stream()),
        op);
}

}  // namespace deepinfer::cuda
