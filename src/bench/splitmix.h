// SplitMix64: the stream the benchmarks draw prompt tokens and arrival gaps from. Simple enough
// to reproduce bit for bit elsewhere (bench/transformers_baseline.py does, so a peer runs on the
// same prompts).
#pragma once

#include <cmath>
#include <cstdint>

namespace deepinfer::bench {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed)
      : state_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // A token id in [0, vocab).
  int32_t token(uint64_t vocab) { return static_cast<int32_t>(next() % vocab); }
  // Uniform in [0, 1) with 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Exponential with the given rate (a Poisson process's gap).
  double exponential(double rate) { return -std::log1p(-uniform()) / rate; }

 private:
  uint64_t state_;
};

}  // namespace deepinfer::bench
