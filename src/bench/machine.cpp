#include "bench/machine.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/thread_pool.h"

#ifdef DEEPINFER_BENCH_HAVE_CUDA
#include <cuda_profiler_api.h>

#include "backend/cuda/cuda_backend_impl.h"
#endif

namespace deepinfer::bench {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best-of-runs memcpy bandwidth (read + write bytes per second) over 2 x 128 MiB.
double probe_memcpy() {
  constexpr size_t kBytes = size_t{128} << 20;
  std::vector<char> src(kBytes, 1), dst(kBytes, 0);
  ThreadPool& pool = ThreadPool::global();
  const int64_t parts = std::max(1, pool.size()) * 4;
  const size_t part = kBytes / parts;
  double best = 0;
  for (int run = 0; run < 6; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(parts, 1, [&](int64_t b, int64_t e) {
      std::memcpy(dst.data() + b * part, src.data() + b * part, (e - b) * part);
    });
    const double s = seconds_since(t0);
    if (run > 0) best = std::max(best, 2.0 * part * parts / s);  // first run: page faults
  }
  return best;
}

// Best-of-runs device copy bandwidth (read + write bytes per second) through the backend.
double probe_device_copy(Backend& b, StepTimer& timer) {
  const int64_t n = int64_t{256} << 20;  // floats: 1 GiB each way
  Tensor src = b.empty({n}), dst = b.empty({n});
  double best = 0;
  for (int run = 0; run < 6; ++run) {
    timer.start();
    b.copy(src, dst);
    const double s = timer.stop();
    if (run > 0) best = std::max(best, 2.0 * 4 * n / s);
  }
  return best;
}

// Best-of-runs GEMM throughput through the backend (the model's matmul, weights in the
// backend's weight dtype): [M, K] x [N, K]^T, larger on devices.
double probe_gemm(Backend& b, StepTimer& timer) {
  const int64_t M = b.device() == Device::kCpu ? 1024 : 8192;
  const int64_t N = b.device() == Device::kCpu ? 2048 : 8192, K = N;
  Tensor x = b.empty({M, K}), w = b.empty({N, K}, b.weight_dtype()), out = b.empty({M, N});
  std::vector<float> xs(M * K, 0.01f);
  b.upload(xs.data(), x);
  if (b.weight_dtype() == DType::kF32) {
    std::vector<float> ws(N * K, 0.02f);
    b.upload(ws.data(), w);
  } else {
    std::vector<uint16_t> ws(N * K, f32_to_bf16(0.02f));
    b.upload(ws.data(), w);
  }
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    timer.start();
    b.matmul(x, w, out);
    const double s = timer.stop();
    if (run > 0) best = std::max(best, 2.0 * M * N * K / s);
  }
  return best;
}

#ifdef DEEPINFER_BENCH_HAVE_CUDA
// CUDA events recorded on the backend's stream around the step.
class CudaEventTimer : public StepTimer {
 public:
  explicit CudaEventTimer(cuda::CudaBackend& backend) : ctx_(backend.context()) {
    cuda::check(cudaSetDevice(ctx_.device()), "cudaSetDevice");
    cuda::check(cudaEventCreate(&start_), "cudaEventCreate");
    cuda::check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~CudaEventTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start() override { cuda::check(cudaEventRecord(start_, ctx_.stream()), "cudaEventRecord"); }
  double stop() override {
    cuda::check(cudaEventRecord(stop_, ctx_.stream()), "cudaEventRecord");
    cuda::check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    cuda::check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms / 1e3;
  }
  const char* name() const override { return "cuda_events"; }
  void profile(bool on) override {
    cuda::check(on ? cudaProfilerStart() : cudaProfilerStop(), "cudaProfilerStart/Stop");
  }

 private:
  cuda::DeviceContext& ctx_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};
#endif

}  // namespace

ProbedPeaks machine_peaks(Backend& backend, double peak_gbs_flag, double peak_tflops_flag) {
  ProbedPeaks p;
  const std::unique_ptr<StepTimer> timer = make_step_timer(backend);
  const bool cpu = backend.device() == Device::kCpu;
  std::string mem_how, flop_how;
  if (peak_gbs_flag > 0) {
    p.peaks.bytes_per_s = peak_gbs_flag * 1e9;
    mem_how = "--peak-gbs";
  } else {
    p.memcpy_gbs = (cpu ? probe_memcpy() : probe_device_copy(backend, *timer)) / 1e9;
    p.peaks.bytes_per_s = p.memcpy_gbs * 1e9;
    mem_how = cpu ? "memcpy probe (2 x 128 MiB, read + write bytes, best of 5)"
                  : "device copy probe (2 x 1 GiB, read + write bytes, best of 5)";
  }
  if (peak_tflops_flag > 0) {
    p.peaks.flops_per_s = peak_tflops_flag * 1e12;
    flop_how = "--peak-tflops";
  } else {
    p.gemm_tflops = probe_gemm(backend, *timer) / 1e12;
    p.peaks.flops_per_s = p.gemm_tflops * 1e12;
    flop_how = fmt::format("backend GEMM probe ({}, {} weights, best of 4)",
                           cpu ? "1024x2048x2048" : "8192^3", dtype_name(backend.weight_dtype()));
  }
  p.description =
      fmt::format("bandwidth {:.1f} GB/s from {}; compute {:.3f} TFLOP/s from {}",
                  p.peaks.bytes_per_s / 1e9, mem_how, p.peaks.flops_per_s / 1e12, flop_how);
  return p;
}

std::unique_ptr<StepTimer> make_step_timer(Backend& backend) {
#ifdef DEEPINFER_BENCH_HAVE_CUDA
  if (auto* cuda_backend = dynamic_cast<cuda::CudaBackend*>(&backend))
    return std::make_unique<CudaEventTimer>(*cuda_backend);
#endif
  return std::make_unique<SteadyClockTimer>();
}

RooflineDtypes backend_dtypes(const Backend& backend) {
  RooflineDtypes d;
  d.weight = static_cast<double>(dtype_size_bits(backend.weight_dtype())) / 8.0;
  d.param = 4;
  d.state = 4;  // the model keeps per-sequence state in fp32 on every backend today
  return d;
}

}  // namespace deepinfer::bench
