// Shared helpers for the backend op tests: seeded random tensors (never zero), NaN poisoning of
// outputs, and the normalised error against double-precision references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/test_seed.h"
#include "core/tensor.h"

namespace deepinfer::test {

inline constexpr double kTol = 1e-5;
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

using testing_seed::base_seed;

// A fresh base seed per run (DEEPINFER_TEST_SEED pins it), mixed with the test's name and a
// per-test counter so that every tensor of every test draws different numbers, reproducibly
// for a given seed whatever the test filter. Failures print the seed.
class Rng {
 public:
  Rng() : seed_(next_seed()), gen_(seed_) {}
  uint64_t seed() const { return seed_; }
  // Uniform in [lo, hi), resampled away from zero.
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
  std::mt19937_64& gen() { return gen_; }

 private:
  static uint64_t next_seed() {
    static std::string test;
    static uint64_t counter = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string name =
        info ? std::string(info->test_suite_name()) + "." + info->name() : std::string();
    if (name != test) test = name, counter = 0;
    return base_seed() ^ (std::hash<std::string>{}(name) + 0x9E3779B97F4A7C15ull * ++counter);
  }
  uint64_t seed_;
  std::mt19937_64 gen_;
};

inline Tensor make(std::vector<int64_t> shape, DType dtype = DType::kF32) {
  return Tensor::empty(shape.data(), static_cast<int>(shape.size()), dtype);
}

inline Tensor rand_tensor(Rng& rng, std::vector<int64_t> shape, float lo = -1.f, float hi = 1.f) {
  Tensor t = make(std::move(shape));
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.uniform(lo, hi);
  return t;
}

inline Tensor int_tensor(const std::vector<int32_t>& v, std::vector<int64_t> shape) {
  Tensor t = make(std::move(shape), DType::kI32);
  EXPECT_EQ(t.numel(), static_cast<int64_t>(v.size()));
  std::copy(v.begin(), v.end(), t.data_as<int32_t>());
  return t;
}

// Outputs are poisoned before each call so that an element the op forgot to write shows up.
inline Tensor poisoned(std::vector<int64_t> shape, DType dtype = DType::kF32) {
  Tensor t = make(std::move(shape), dtype);
  if (dtype == DType::kF32) {
    std::fill(t.data_as<float>(), t.data_as<float>() + t.numel(), kNaN);
  } else {
    std::fill(t.data_as<int32_t>(), t.data_as<int32_t>() + t.numel(), INT32_MIN + 7);
  }
  return t;
}

inline std::vector<double> to_double(const Tensor& t) {
  const float* p = t.data_as<float>();
  return std::vector<double>(p, p + t.numel());
}

// ||out - ref|| / ||ref||; infinity when out has a NaN / inf or the sizes differ.
inline double rel_err(const Tensor& out, const std::vector<double>& ref) {
  if (out.numel() != static_cast<int64_t>(ref.size())) return kInf;
  const float* o = out.data_as<float>();
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(o[i])) return kInf;
    num += (o[i] - ref[i]) * (o[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

#define EXPECT_CLOSE(out, ref) \
  EXPECT_LT(::deepinfer::test::rel_err(out, ref), ::deepinfer::test::kTol)

using testing_seed::seed_note;

// Every test body runs under this trace so that a failure can be replayed.
#define SEED_TRACE() SCOPED_TRACE(::deepinfer::test::seed_note())

}  // namespace deepinfer::test
