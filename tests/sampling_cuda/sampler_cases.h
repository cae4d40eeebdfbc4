// Random sampling cases shared by the device sampler test and its host emulation test: logits
// rows with ties, -inf and NaN entries, every parameter combination the brief lists, random
// processors (min_tokens, logit_bias, penalties) and random seeds / positions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/test_seed.h"
#include "deepinfer/sampling_params.h"
#include "sampling/sampler.h"

namespace deepinfer::sampling::testcases {

inline constexpr float kInf = std::numeric_limits<float>::infinity();

// A fresh seed per run unless DEEPINFER_TEST_SEED pins it (printed on failure).
using testing_seed::base_seed;
using testing_seed::seed_note;

// greedy, then T in {0.3, 1, 2} x top_k in {-1, 1, 5, 50} x top_p in {1, 0.9, 0.5} x
// min_p in {0, 0.1}: 73 combinations.
inline std::vector<SamplingParams> parameter_grid() {
  std::vector<SamplingParams> out;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  out.push_back(greedy);
  for (float t : {0.3f, 1.0f, 2.0f})
    for (int k : {-1, 1, 5, 50})
      for (float tp : {1.0f, 0.9f, 0.5f})
        for (float mp : {0.0f, 0.1f}) {
          SamplingParams p;
          p.temperature = t;
          p.top_k = k;
          p.top_p = tp;
          p.min_p = mp;
          out.push_back(p);
        }
  return out;
}

// One row's inputs: raw logits, params (with processors), history, seed and position.
struct Case {
  std::vector<float> logits;
  SamplingParams params;
  std::vector<int32_t> prompt, output, eos;
  uint64_t seed = 0;
  int64_t position = 0;

  SampleRow row() const { return {&params, seed, position, {prompt, output, eos}}; }
};

class CaseGen {
 public:
  explicit CaseGen(uint64_t salt) : gen_(base_seed() ^ (salt * 0x9E3779B97F4A7C15ull)) {}

  int64_t integer(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(gen_); }
  uint64_t u64() { return gen_(); }

  // Logits of one of several shapes; all of them contain exact ties.
  std::vector<float> logits(int64_t V) {
    std::vector<float> x(V);
    const int shape = static_cast<int>(integer(0, 9));
    const float sigma = std::vector<float>{1.0f, 3.0f, 8.0f}[integer(0, 2)];
    std::normal_distribution<float> nd(0.0f, sigma);
    for (float& v : x) v = nd(gen_);
    switch (shape) {
      case 0:  // quantised: large groups of equal p
        for (float& v : x) v = std::round(v * 4.0f) / 4.0f;
        break;
      case 1:  // all equal
        std::fill(x.begin(), x.end(), static_cast<float>(integer(-3, 3)));
        break;
      case 2:  // a peaked row: one token far above the rest
        x[integer(0, V - 1)] = 40.0f;
        break;
      case 3:  // many ties at the top
        for (int64_t j = 0; j < std::min<int64_t>(V, 64); ++j) x[integer(0, V - 1)] = 9.5f;
        break;
      default:
        break;
    }
    // Copied values (ties anywhere), -inf and NaN entries.
    for (int64_t j = 0; j < V / 20 + 1; ++j) x[integer(0, V - 1)] = x[integer(0, V - 1)];
    if (chance(0.5))
      for (int64_t j = 0; j < V / 30 + 1; ++j) x[integer(0, V - 1)] = -kInf;
    if (chance(0.3))
      for (int64_t j = 0; j < V / 200 + 1; ++j)
        x[integer(0, V - 1)] = std::numeric_limits<float>::quiet_NaN();
    if (chance(0.02)) std::fill(x.begin(), x.end(), -kInf);  // nothing to sample
    return x;
  }

  // Random processors and history on top of `p`.
  Case make(int64_t V, const SamplingParams& p) {
    Case c;
    c.logits = logits(V);
    c.params = p;
    c.seed = chance(0.5) ? u64() : static_cast<uint64_t>(integer(0, 1000));
    c.position = chance(0.8) ? integer(0, 100000) : integer(0, int64_t{1} << 40);
    auto ids = [&](int64_t n) {
      std::vector<int32_t> v(n);
      for (int32_t& id : v) id = static_cast<int32_t>(integer(0, V - 1));
      return v;
    };
    c.prompt = ids(integer(0, 40));
    c.output = ids(integer(0, 30));
    if (V > 4 && chance(0.4)) {  // frequent repeats for the frequency penalty
      for (int j = 0; j < 10; ++j) c.output.push_back(c.output.empty() ? 0 : c.output[0]);
    }
    c.eos = ids(integer(0, 2));
    if (chance(0.3)) {
      c.params.min_tokens = static_cast<int>(c.output.size()) + static_cast<int>(integer(0, 3));
      c.params.stop_token_ids = ids(integer(0, 3));
      c.params.ignore_eos = chance(0.3);
    }
    if (chance(0.4)) {
      for (int j = 0, n = static_cast<int>(integer(1, 6)); j < n; ++j) {
        const float b = chance(0.1) ? (chance(0.5) ? -kInf : 100.0f)
                                    : static_cast<float>(integer(-500, 500)) / 100.0f;
        c.params.logit_bias[static_cast<int32_t>(integer(0, V - 1))] = b;
      }
    }
    if (chance(0.4)) c.params.repetition_penalty = chance(0.5) ? 1.3f : 0.8f;
    if (chance(0.4)) c.params.frequency_penalty = static_cast<float>(integer(-20, 20)) / 10.0f;
    if (chance(0.4)) c.params.presence_penalty = static_cast<float>(integer(-20, 20)) / 10.0f;
    return c;
  }

 private:
  std::mt19937_64 gen_;
};

// The CPU sampler's answer for a case: processed row, token or error message.
struct CpuAnswer {
  std::vector<float> processed;
  int32_t token = -1;
  std::string error;  // empty when token is valid
};
inline CpuAnswer cpu_answer(const Case& c, LogprobsMode mode = LogprobsMode::kRaw) {
  CpuAnswer a;
  a.processed = c.logits;
  try {
    a.token = sample_row(a.processed, c.params, c.seed, c.position, c.row().context, mode).token;
  } catch (const std::exception& e) {
    a.error = e.what();
  }
  return a;
}

// Bitwise equality of two float rows (any NaN equals any NaN: payloads differ between CPUs and
// GPUs); the first differing index or -1.
inline int64_t first_difference(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    uint32_t ua, ub;
    std::memcpy(&ua, a + i, 4);
    std::memcpy(&ub, b + i, 4);
    if (ua != ub) return i;
  }
  return -1;
}

}  // namespace deepinfer::sampling::testcases
