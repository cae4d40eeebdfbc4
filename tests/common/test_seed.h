// The random seed of a test run: fresh per run (so repeated runs explore new inputs) unless
// DEEPINFER_TEST_SEED pins it; tests print seed_note() on failure so a run can be replayed.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace deepinfer::testing_seed {

inline uint64_t base_seed() {
  static const uint64_t s = [] {
    const char* env = std::getenv("DEEPINFER_TEST_SEED");
    return env ? std::strtoull(env, nullptr, 10)
               : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  }();
  return s;
}

inline std::string seed_note() {
  return "DEEPINFER_TEST_SEED=" + std::to_string(base_seed());
}

}  // namespace deepinfer::testing_seed
