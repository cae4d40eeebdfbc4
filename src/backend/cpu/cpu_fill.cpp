// fill_random: the counter-based uniform fill of backend.h, multithreaded over flat indices.
#include <cmath>
#include <cstdint>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"

namespace deepinfer {

namespace {

// The SplitMix64 hash of element i (see Backend::fill_random).
inline uint64_t fill_hash(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The 24-bit uniform of element i, as a float in [0, 1).
inline float fill_unit(uint64_t seed, uint64_t i) {
  return static_cast<float>(fill_hash(seed, i) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace

void CpuBackend::fill_random(const TensorView& t, uint64_t seed, float lo, float hi) {
  arg_checks::expect_fill("fill_random", t, Device::kCpu, lo, hi);
  const int64_t n = t.numel();
  if (n == 0) return;
  const float span = hi - lo;
  const bool bf16 = t.dtype() == DType::kBF16;
  void* data = t.data();
  if (t.dtype() == DType::kFP4E2M1) {
    auto* out = static_cast<uint8_t*>(data);
    cpu::pool().parallel_for(n / 2, int64_t{1} << 16, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j)
        out[j] = static_cast<uint8_t>(fill_hash(seed, static_cast<uint64_t>(j)) >> 56);
    });
    return;
  }
  cpu::pool().parallel_for(n, int64_t{1} << 16, [&](int64_t b, int64_t e) {
    if (bf16) {
      auto* out = static_cast<uint16_t*>(data);
      for (int64_t i = b; i < e; ++i)
        out[i] = f32_to_bf16(std::fma(span, fill_unit(seed, static_cast<uint64_t>(i)), lo));
    } else {
      auto* out = static_cast<float*>(data);
      for (int64_t i = b; i < e; ++i)
        out[i] = std::fma(span, fill_unit(seed, static_cast<uint64_t>(i)), lo);
    }
  });
}

}  // namespace deepinfer
