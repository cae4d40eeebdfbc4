#include "bench/machine.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/thread_pool.h"

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

// Best-of-runs fp32 GEMM throughput through the backend: [1024, 2048] x [2048, 2048]^T.
double probe_gemm(Backend& b) {
  const int64_t M = 1024, N = 2048, K = 2048;
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
  std::vector<float> sink(1);
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    b.matmul(x, w, out);
    if (b.device() != Device::kCpu) b.download(out.view().slice_rows(0, 1), sink.data());
    const double s = seconds_since(t0);
    if (run > 0) best = std::max(best, 2.0 * M * N * K / s);
  }
  return best;
}

}  // namespace

ProbedPeaks machine_peaks(Backend& backend, double peak_gbs_flag, double peak_tflops_flag) {
  ProbedPeaks p;
  std::string mem_how, flop_how;
  if (peak_gbs_flag > 0) {
    p.peaks.bytes_per_s = peak_gbs_flag * 1e9;
    mem_how = "--peak-gbs";
  } else {
    p.memcpy_gbs = probe_memcpy() / 1e9;
    p.peaks.bytes_per_s = p.memcpy_gbs * 1e9;
    mem_how = "memcpy probe (2 x 128 MiB, read + write bytes, best of 5)";
  }
  if (peak_tflops_flag > 0) {
    p.peaks.flops_per_s = peak_tflops_flag * 1e12;
    flop_how = "--peak-tflops";
  } else {
    p.gemm_tflops = probe_gemm(backend) / 1e12;
    p.peaks.flops_per_s = p.gemm_tflops * 1e12;
    flop_how = fmt::format("backend GEMM probe (1024x2048x2048, {} weights, best of 4)",
                           dtype_name(backend.weight_dtype()));
  }
  p.description =
      fmt::format("bandwidth {:.1f} GB/s from {}; compute {:.3f} TFLOP/s from {}",
                  p.peaks.bytes_per_s / 1e9, mem_how, p.peaks.flops_per_s / 1e12, flop_how);
  return p;
}

std::unique_ptr<StepTimer> make_step_timer(Backend& backend) {
  (void)backend;  // device backends: return their event timer here
  return std::make_unique<SteadyClockTimer>();
}

RooflineDtypes backend_dtypes(const Backend& backend) {
  RooflineDtypes d;
  d.weight = static_cast<double>(dtype_size_bits(backend.weight_dtype())) / 8.0;
  d.param = 4;
  d.state = backend.device() == Device::kCpu ? 4 : d.weight;
  return d;
}

}  // namespace deepinfer::bench
