// Helpers for the CUDA backend tests: GPU detection (tests skip without one), seeded random host
// tensors, bf16 rounding, host <-> device transfers through the backend, NaN-poisoned device
// outputs and the normalised error.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_info.h"
#include "common/test_seed.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace deepinfer::cudatest {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();
// Normalised L2 tolerances: pure fp32 ops, and ops with bf16 GEMM operands.
inline constexpr double kTolF32 = 1e-5;
inline constexpr double kTolBf16 = 1e-2;
// Attention runs split fp16 (hi + lo) operands through tensor cores: close to fp32, not exact.
inline constexpr double kTolAttention = 2e-5;

// Empty when a CUDA device is usable, else why not (tests then skip).
inline const std::string& no_gpu_reason() {
  static const std::string r = cuda::unavailable_reason();
  return r;
}

#define REQUIRE_GPU()                                                               \
  do {                                                                              \
    if (!::deepinfer::cudatest::no_gpu_reason().empty())                            \
      GTEST_SKIP() << "no CUDA device: " << ::deepinfer::cudatest::no_gpu_reason(); \
  } while (0)

using testing_seed::base_seed;

// Draws from the run's seed mixed with a per-process counter.
class Rng {
 public:
  Rng() : gen_(base_seed() + 0x9E3779B97F4A7C15ull * ++counter()) {}
  // Uniform in [lo, hi), away from zero (zeros hide unwritten outputs).
  float uniform(float lo = -1.f, float hi = 1.f) {
    std::uniform_real_distribution<float> d(lo, hi);
    for (;;) {
      const float v = d(gen_);
      if (std::fabs(v) > 1e-3f * std::max(std::fabs(lo), std::fabs(hi))) return v;
    }
  }
  int64_t integer(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }

 private:
  static uint64_t& counter() {
    static uint64_t c = 0;
    return c;
  }
  std::mt19937_64 gen_;
};

using testing_seed::seed_note;
#define SEED_TRACE() SCOPED_TRACE(::deepinfer::cudatest::seed_note())

inline Tensor host(std::vector<int64_t> shape, DType dtype = DType::kF32) {
  return Tensor::empty(shape.data(), static_cast<int>(shape.size()), dtype);
}

inline Tensor rand_host(Rng& rng, std::vector<int64_t> shape, float lo = -1.f, float hi = 1.f) {
  Tensor t = host(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = rng.uniform(lo, hi);
  return t;
}

inline Tensor i32_host(const std::vector<int32_t>& v, std::vector<int64_t> shape) {
  Tensor t = host(std::move(shape), DType::kI32);
  std::copy(v.begin(), v.end(), t.data_as<int32_t>());
  return t;
}

// The same values rounded to bf16 (as fp32): what the CPU reference gets for bf16 weights.
inline Tensor round_bf16(const Tensor& t) {
  std::vector<int64_t> shape(t.ndim());
  for (int i = 0; i < t.ndim(); ++i) shape[i] = t.dim(i);
  Tensor r = host(shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    r.data_as<float>()[i] = bf16_to_f32(f32_to_bf16(t.data_as<float>()[i]));
  return r;
}

inline Tensor dev_empty(Backend& g, const std::vector<int64_t>& s, DType dtype) {
  switch (s.size()) {
    case 1:
      return g.empty({s[0]}, dtype);
    case 2:
      return g.empty({s[0], s[1]}, dtype);
    case 3:
      return g.empty({s[0], s[1], s[2]}, dtype);
    case 4:
      return g.empty({s[0], s[1], s[2], s[3]}, dtype);
    default:
      ADD_FAILURE() << "rank " << s.size();
      return {};
  }
}

inline std::vector<int64_t> shape_of(const TensorView& t) {
  std::vector<int64_t> s(t.ndim());
  for (int i = 0; i < t.ndim(); ++i) s[i] = t.dim(i);
  return s;
}

// Host tensor -> device tensor of the same dtype, or bf16 when as_bf16 (from an F32 host tensor).
inline Tensor to_dev(Backend& g, const Tensor& h, bool as_bf16 = false) {
  if (!as_bf16) {
    Tensor d = dev_empty(g, shape_of(h), h.dtype());
    g.upload(h.view().data(), d);
    return d;
  }
  std::vector<uint16_t> bits(h.numel());
  for (int64_t i = 0; i < h.numel(); ++i) bits[i] = f32_to_bf16(h.data_as<float>()[i]);
  Tensor d = dev_empty(g, shape_of(h), DType::kBF16);
  g.upload(bits.data(), d);
  return d;
}

inline Tensor to_host(Backend& g, const TensorView& d) {
  Tensor h = host(shape_of(d), d.dtype());
  g.download(d, h.view().data());
  return h;
}

// Device output filled with NaN (F32) or a junk value (I32): unwritten elements show up.
inline Tensor dev_poisoned(Backend& g, std::vector<int64_t> shape, DType dtype = DType::kF32) {
  Tensor h = host(shape, dtype);
  if (dtype == DType::kF32) {
    std::fill(h.data_as<float>(), h.data_as<float>() + h.numel(), kNaN);
  } else {
    std::fill(h.data_as<int32_t>(), h.data_as<int32_t>() + h.numel(), INT32_MIN + 7);
  }
  return to_dev(g, h);
}

// ||got - ref|| / ||ref||; infinity on a non-finite value of got where ref is finite, or when
// the sizes differ. Matching non-finite values (both -inf, say) count as equal.
inline double rel_err(const Tensor& got, const Tensor& ref) {
  if (got.numel() != ref.numel()) return kInf;
  const float* a = got.data_as<float>();
  const float* b = ref.data_as<float>();
  double num = 0, den = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (!std::isfinite(b[i])) {
      if (!(a[i] == b[i])) return kInf;
      continue;
    }
    if (!std::isfinite(a[i])) return kInf;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline std::vector<int32_t> ints(const Tensor& t) {
  return std::vector<int32_t>(t.data_as<int32_t>(), t.data_as<int32_t>() + t.numel());
}

inline std::vector<float> floats(const Tensor& t) {
  return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
}

// Both kernel families where the device has wgmma: the wgmma kernels (on), then the others.
inline std::vector<bool> wgmma_settings(Backend& gpu) {
  std::vector<bool> settings{false};
  if (set_cuda_wgmma(gpu, true)) settings.insert(settings.begin(), true);
  return settings;
}

// Every op test: a CPU reference backend and the CUDA backend under test.
class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    cpu = make_cpu_backend();
    gpu = make_cuda_backend();
  }
  std::unique_ptr<Backend> cpu, gpu;
};

}  // namespace deepinfer::cudatest
