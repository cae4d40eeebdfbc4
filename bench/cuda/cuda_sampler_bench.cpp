// Micro-benchmark of the device sampler (src/sampling/cuda): R rows x 129280 vocab, timed with
// CUDA events around whole DeviceSampler::sample calls (staging upload, both kernels, the token
// download and the host synchronisation) after warm-up. GB/s counts the logits read once
// (R * V * 4 bytes); the kernel reads a row several times, so this is an effective rate.
//   cuda_sampler_bench            (needs a GPU; exits 0 with a note when there is none)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <vector>

#include "sampling/cuda/device_sampler.h"

using namespace deepinfer;
using namespace deepinfer::sampling;

namespace {

#define CHECK_CUDA(x)                                                      \
  do {                                                                     \
    const cudaError_t e_ = (x);                                            \
    if (e_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

struct Config {
  const char* name;
  SamplingParams params;
};

std::vector<Config> configs() {
  std::vector<Config> out;
  SamplingParams p;
  p.temperature = 0.0f;
  out.push_back({"greedy", p});
  p = {};
  out.push_back({"T=1", p});
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  out.push_back({"T=0.7 top_p=0.9", p});
  p = {};
  p.top_k = 50;
  out.push_back({"T=1 top_k=50", p});
  p = {};
  p.temperature = 1.0f;
  p.top_p = 0.95f;
  p.repetition_penalty = 1.1f;
  p.frequency_penalty = 0.5f;
  out.push_back({"T=1 top_p=0.95 + penalties", p});
  return out;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cuda_sampler_bench: no CUDA device, nothing to measure\n");
    return 0;
  }
  constexpr int64_t V = 129280;
  constexpr int kWarmup = 5, kIters = 50;
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  DeviceSampler sampler(stream);
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  // LLM-like logits: Gaussian with sigma 3, a handful of clear favourites.
  std::mt19937_64 gen(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<int32_t> history(200);
  for (int32_t& id : history) id = static_cast<int32_t>(gen() % V);

  std::printf("%-30s %5s %12s %10s\n", "config", "R", "us/call", "GB/s");
  for (int64_t R : {1, 64, 256}) {
    std::vector<float> h(R * V);
    for (float& v : h) v = nd(gen);
    for (int64_t r = 0; r < R; ++r)
      for (int j = 0; j < 5; ++j) h[r * V + gen() % V] += 12.0f;
    float* d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, h.size() * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    for (const Config& c : configs()) {
      std::vector<SampleRow> rows(R);
      for (int64_t r = 0; r < R; ++r)
        rows[r] = {&c.params,
                   1000u + static_cast<uint64_t>(r),
                   0,
                   {std::span<const int32_t>(history).first(100),
                    std::span<const int32_t>(history).subspan(100),
                    {}}};
      auto call = [&](int64_t step) {
        for (int64_t r = 0; r < R; ++r) rows[r].position = 500 + step;
        const auto out = sampler.sample(d, R, V, rows);
        for (const auto& o : out)
          if (o.error) {
            std::fprintf(stderr, "row error: %s\n", o.error->what());
            std::exit(1);
          }
      };
      for (int i = 0; i < kWarmup; ++i) call(i);
      std::vector<float> ms(kIters);
      for (int i = 0; i < kIters; ++i) {
        CHECK_CUDA(cudaEventRecord(start, stream));
        call(kWarmup + i);
        CHECK_CUDA(cudaEventRecord(stop, stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        CHECK_CUDA(cudaEventElapsedTime(&ms[i], start, stop));
      }
      std::sort(ms.begin(), ms.end());
      const double us = ms[kIters / 2] * 1e3;  // median
      const double bytes = static_cast<double>(R) * V * sizeof(float);
      std::printf("%-30s %5lld %12.1f %10.1f\n", c.name, static_cast<long long>(R), us,
                  bytes / (us * 1e-6) / 1e9);
    }
    CHECK_CUDA(cudaFree(d));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return 0;
}
