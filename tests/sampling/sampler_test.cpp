#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "sampling/sampling_exp.h"

using namespace deepinfer;
using namespace deepinfer::sampling;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::vector<double> softmax(const std::vector<float>& x, double temperature = 1.0) {
  const double m = *std::max_element(x.begin(), x.end());
  std::vector<double> p;
  double s = 0;
  for (float v : x) s += std::exp((v - m) / temperature);
  for (float v : x) p.push_back(std::exp((v - m) / temperature) / s);
  return p;
}

std::set<int32_t> support_ids(const std::vector<float>& logits, const SamplingParams& p) {
  std::set<int32_t> ids;
  for (const auto& k : kept_support(logits, p)) ids.insert(k.token);
  return ids;
}

// Pearson chi-square of `counts` against `probs` (zero-probability entries must have no counts).
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs) {
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double e = n * probs[i];
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

std::vector<int> histogram(const std::vector<float>& logits, const SamplingParams& p, int n) {
  std::vector<int> counts(logits.size());
  for (int i = 0; i < n; ++i) {
    // Many seeds and positions, as the engine uses them.
    ++counts[sample_processed(logits, p, /*seq_seed=*/1000 + i % 97, /*position=*/i / 97)];
  }
  return counts;
}

// Straightforward restatement of the documented algorithm, with a full sort.
int32_t reference_sample(const std::vector<float>& logits, const SamplingParams& p, uint64_t seed,
                         int64_t pos) {
  struct C {
    float p;
    int32_t id;
  };
  float zmax = kNegInf;
  for (float x : logits) zmax = std::max(zmax, x / p.temperature);
  std::vector<C> c;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float z = logits[i] / p.temperature;
    const float q = z == zmax ? 1.0f : sampling_exp(z - zmax);
    if (q > 0.0f && q >= p.min_p) c.push_back({q, static_cast<int32_t>(i)});
  }
  std::sort(c.begin(), c.end(),
            [](const C& a, const C& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(p.top_k);
  auto weight = [](const C& e) { return static_cast<uint64_t>(std::ldexp(e.p, 40)); };
  uint64_t total = 0;
  for (const C& e : c) total += weight(e);
  if (p.top_p < 1.0f) {
    const long double need = std::ceil(std::lround(p.top_p * 16777216.0f) *
                                       static_cast<long double>(total) / 16777216.0L);
    uint64_t cum = 0;
    size_t j = 0;
    while (j < c.size() && cum < need) cum += weight(c[j++]);
    c.resize(j);
    total = cum;
  }
  const long double u = uniform(seed, pos);
  const auto target = static_cast<uint64_t>(std::floor(u * static_cast<long double>(total)));
  uint64_t cum = 0;
  for (const C& e : c) {
    cum += weight(e);
    if (cum > target) return e.id;
  }
  ADD_FAILURE() << "target beyond the total";
  return -1;
}

}  // namespace

TEST(Sampler, GreedyTiesTakeLowestIdAndSkipNan) {
  EXPECT_EQ(greedy_token(std::vector<float>{1.0f, 3.0f, 2.0f, 3.0f}), 1);
  EXPECT_EQ(greedy_token(std::vector<float>{NAN, -5.0f, NAN, -5.0f}), 1);
  EXPECT_EQ(greedy_token(std::vector<float>{kNegInf, kNegInf, 0.0f}), 2);
  EXPECT_THROW(greedy_token(std::vector<float>{kNegInf, NAN}), Error);

  SamplingParams p;
  p.temperature = 0.0f;
  std::vector<float> x = {2.0f, 5.0f, 5.0f};
  EXPECT_EQ(sample_row(x, p, 1, 0, {}).token, 1);
  // Greedy sees the processed logits: a repetition penalty moves the argmax.
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> out = {1, 2};
  std::vector<float> y = {3.0f, 5.0f, 5.0f};
  EXPECT_EQ(sample_row(y, p, 1, 0, {{}, out, {}}).token, 0);
}

TEST(Sampler, AllMaskedThrows) {
  SamplingParams p;
  std::vector<float> x = {kNegInf, kNegInf};
  EXPECT_THROW(sample_processed(x, p, 1, 0), Error);
  p.min_tokens = 1;
  std::vector<float> y = {0.0f, kNegInf};
  const std::vector<int32_t> eos = {0};
  EXPECT_THROW(sample_row(y, p, 1, 0, {{}, {}, eos}), Error);
}

TEST(Sampler, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -3.0f};
  for (float t : {1.0f, 0.6f, 1.7f}) {
    SamplingParams p;
    p.temperature = t;
    const auto counts = histogram(logits, p, 200000);
    // 5 dof: the 99.99th percentile is about 25.7. Draws are deterministic, so no flakiness.
    EXPECT_LT(chi_square(counts, softmax(logits, t)), 25.7) << "temperature " << t;
  }
}

TEST(Sampler, TruncatedDistributionsAreRenormalised) {
  const std::vector<double> probs = {0.1, 0.4, 0.05, 0.3, 0.15};
  const auto logits = log_of(probs);
  SamplingParams p;
  p.top_k = 3;  // {1, 3, 4}
  EXPECT_LT(chi_square(histogram(logits, p, 100000), {0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85}),
            21.0);
  p = {};
  p.top_p = 0.6f;  // 0.4, 0.7 >= 0.6 -> {1, 3}
  EXPECT_LT(chi_square(histogram(logits, p, 100000), {0, 0.4 / 0.7, 0, 0.3 / 0.7, 0}), 16.0);
}

TEST(Sampler, TopKTopPMinPSupportsAreExact) {
  const auto logits = log_of({0.5, 0.3, 0.15, 0.05});
  auto with = [](auto edit) {
    SamplingParams p;
    edit(p);
    return p;
  };
  using S = std::set<int32_t>;
  EXPECT_EQ(support_ids(logits, {}), (S{0, 1, 2, 3}));
  EXPECT_EQ(support_ids(logits, with([](auto& p) { p.top_k = 2; })), (S{0, 1}));
  EXPECT_EQ(support_ids(logits, with([](auto& p) { p.top_k = -1; })), (S{0, 1, 2, 3}));
  EXPECT_EQ(support_ids(logits, with([](auto& p) { p.top_k = 99; })), (S{0, 1, 2, 3}));
  EXPECT_EQ(support_ids(logits, with([](auto& p) { p.top_p = 0.4f; })), (S{0}));
  EXPECT_EQ(support_ids(logits, with([](auto& p) { p.top_p = 0.75f; })), (S{0, 1}));
  EXPECT_EQ(support_ids(logits, with([](auto& p) { p.top_p = 0.85f; })), (S{0, 1, 2}));
  EXPECT_EQ(support_ids(logits, with([](auto& p) { p.top_p = 0.001f; })), (S{0}));
  EXPECT_EQ(support_ids(logits, with([](auto& p) { p.min_p = 0.25f; })), (S{0, 1, 2}));
  EXPECT_EQ(support_ids(logits, with([](auto& p) { p.min_p = 0.5f; })), (S{0, 1}));
  EXPECT_EQ(support_ids(logits, with([](auto& p) { p.min_p = 1.0f; })), (S{0}));
  // Kept tokens come in sampling order with p relative to the top token.
  const auto kept = kept_support(logits, with([](auto& p) { p.top_k = 3; }));
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].token, 0);
  EXPECT_EQ(kept[0].p, 1.0f);
  EXPECT_EQ(kept[2].token, 2);
  EXPECT_NEAR(kept[2].p, 0.3, 1e-6);

  // Never samples outside the support.
  for (auto p : {with([](auto& q) { q.top_k = 2; }), with([](auto& q) { q.top_p = 0.75f; }),
                 with([](auto& q) { q.min_p = 0.5f; })}) {
    const auto counts = histogram(logits, p, 20000);
    EXPECT_EQ(counts[2] + counts[3], 0);
    EXPECT_GT(counts[0], 0);
    EXPECT_GT(counts[1], 0);
  }
}

TEST(Sampler, MinPThenTopKThenTopPInVllmOrder) {
  const auto logits = log_of({0.4, 0.3, 0.2, 0.1});
  SamplingParams p;
  p.min_p = 0.3f;   // keeps p >= 0.12: {0, 1, 2}, mass 0.9
  p.top_p = 0.75f;  // on the renormalised rest: 0.444, 0.778 -> {0, 1}
  EXPECT_EQ(support_ids(logits, p), (std::set<int32_t>{0, 1}));
  p.min_p = 0.0f;  // on the full distribution: 0.4, 0.7, 0.9 -> {0, 1, 2}
  EXPECT_EQ(support_ids(logits, p), (std::set<int32_t>{0, 1, 2}));
  p.top_k = 3;  // 0.4/0.9, 0.7/0.9 = 0.778 -> {0, 1}
  EXPECT_EQ(support_ids(logits, p), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, TiesBreakByLowestId) {
  const std::vector<float> flat(10, 0.5f);
  SamplingParams p;
  p.top_k = 3;
  EXPECT_EQ(support_ids(flat, p), (std::set<int32_t>{0, 1, 2}));
  p = {};
  p.top_p = 0.45f;  // 0.1 each: 5 tokens reach 0.5 >= 0.45
  EXPECT_EQ(support_ids(flat, p), (std::set<int32_t>{0, 1, 2, 3, 4}));
}

TEST(Sampler, DeterministicPerSeedAndPosition) {
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(5000);
  for (float& v : logits) v = nd(gen);
  SamplingParams p;
  p.temperature = 0.8f;
  std::set<int32_t> tokens;
  for (int64_t pos = 0; pos < 64; ++pos) {
    const int32_t t = sample_processed(logits, p, 77, pos);
    for (int rep = 0; rep < 3; ++rep) ASSERT_EQ(sample_processed(logits, p, 77, pos), t);
    tokens.insert(t);
  }
  EXPECT_GT(tokens.size(), 20u);  // different positions draw differently
  std::set<int32_t> by_seed;
  for (uint64_t seed = 0; seed < 64; ++seed) by_seed.insert(sample_processed(logits, p, seed, 9));
  EXPECT_GT(by_seed.size(), 20u);
}

TEST(Sampler, MatchesFullSortReferenceOnLargeVocab) {
  std::mt19937 gen(11);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> logits(129280);
  for (float& v : logits) v = nd(gen);
  for (size_t i = 0; i < 2000; ++i) logits[i * 37] = logits[i * 41];  // plenty of exact ties
  std::vector<SamplingParams> configs(5);
  configs[1].temperature = 0.7f, configs[1].top_p = 0.9f;
  configs[2].top_k = 50, configs[2].top_p = 0.8f;
  configs[3].min_p = 0.05f, configs[3].temperature = 1.3f;
  configs[4].temperature = 2.5f, configs[4].top_p = 0.99f;
  for (const auto& p : configs) {
    for (int i = 0; i < 15; ++i) {
      const uint64_t seed = 0x9e3779b97f4a7c15ull * (i + 1);
      ASSERT_EQ(sample_processed(logits, p, seed, i * 13),
                reference_sample(logits, p, seed, i * 13))
          << "config top_k " << p.top_k << " top_p " << p.top_p << " draw " << i;
    }
  }
}

TEST(Sampler, RawLogprobsAreLogSoftmaxOfModelLogits) {
  const std::vector<float> raw = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 3;
  p.logit_bias = {{4, 10.0f}};  // changes the sample, not the raw logprobs
  std::vector<float> x = raw;
  const auto r = sample_row(x, p, 5, 0, {});
  EXPECT_EQ(r.token, 4);
  ASSERT_TRUE(r.logprobs);
  const auto ref = softmax(raw);
  EXPECT_EQ(r.logprobs->sampled.token, 4);
  EXPECT_NEAR(r.logprobs->sampled.logprob, std::log(ref[4]), 1e-6);
  EXPECT_EQ(r.logprobs->sampled.rank, 5);
  ASSERT_EQ(r.logprobs->top.size(), 3u);
  // (logprob desc, id asc): the tie 1/3 resolves to 1 first.
  const int32_t order[] = {1, 3, 2};
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(r.logprobs->top[j].token, order[j]);
    EXPECT_NEAR(r.logprobs->top[j].logprob, std::log(ref[order[j]]), 1e-6);
    EXPECT_EQ(r.logprobs->top[j].rank, j + 1);
  }

  // -1: the whole vocabulary, sorted; 0: only the sampled token.
  p.logprobs = -1;
  x = raw;
  const auto all = sample_row(x, p, 5, 0, {});
  ASSERT_EQ(all.logprobs->top.size(), raw.size());
  double mass = 0;
  for (const auto& e : all.logprobs->top) mass += std::exp(e.logprob);
  EXPECT_NEAR(mass, 1.0, 1e-6);
  EXPECT_EQ(all.logprobs->top.back().token, 4);  // raw logit -1 is the lowest
  p.logprobs = 0;
  x = raw;
  const auto none = sample_row(x, p, 5, 0, {});
  EXPECT_TRUE(none.logprobs->top.empty());
  EXPECT_EQ(none.logprobs->sampled.token, 4);

  p.logprobs.reset();
  x = raw;
  EXPECT_FALSE(sample_row(x, p, 5, 0, {}).logprobs);
}

TEST(Sampler, SampledRankCountsTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 1;
  std::vector<float> x = {2.0f, 2.0f, 1.0f};
  const auto r = sample_row(x, p, 1, 0, {});
  EXPECT_EQ(r.token, 0);
  EXPECT_EQ(r.logprobs->sampled.rank, 2);  // vLLM: tokens with logprob >= its own
  EXPECT_EQ(r.logprobs->top[0].token, 0);
}

TEST(Sampler, ProcessedLogprobsFollowTheSampledDistribution) {
  const std::vector<float> raw = {0.0f, 1.0f, 2.0f, 0.5f};
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 2;
  p.logprobs = -1;
  std::vector<float> x = raw;
  const auto r = sample_row(x, p, 9, 4, {}, LogprobsMode::kProcessed);
  ASSERT_TRUE(r.token == 1 || r.token == 2);
  std::map<int32_t, float> lp;
  for (const auto& e : r.logprobs->top) lp[e.token] = e.logprob;
  const double s = std::exp(2.0 / 0.5) + std::exp(1.0 / 0.5);
  EXPECT_NEAR(lp[2], 2.0 / 0.5 - std::log(s), 1e-5);
  EXPECT_NEAR(lp[1], 1.0 / 0.5 - std::log(s), 1e-5);
  EXPECT_EQ(lp[0], kNegInf);
  EXPECT_EQ(lp[3], kNegInf);
  EXPECT_EQ(r.logprobs->sampled.logprob, lp[r.token]);

  // Greedy: log_softmax of the processed logits.
  p = {};
  p.temperature = 0.0f;
  p.logprobs = 1;
  p.logit_bias = {{0, 3.0f}};
  x = raw;
  const auto g = sample_row(x, p, 9, 4, {}, LogprobsMode::kProcessed);
  EXPECT_EQ(g.token, 0);
  EXPECT_NEAR(g.logprobs->sampled.logprob, std::log(softmax({3.0f, 1.0f, 2.0f, 0.5f})[0]), 1e-6);
}

TEST(Sampler, BatchRowsIndependentOfCompanionsAndThreads) {
  constexpr int64_t kVocab = 3000;
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  constexpr int kRows = 24;
  std::vector<float> logits(kRows * kVocab);
  for (float& v : logits) v = nd(gen);
  std::vector<SamplingParams> params(kRows);
  std::vector<std::vector<int32_t>> outputs(kRows);
  std::vector<SampleRow> rows(kRows);
  for (int i = 0; i < kRows; ++i) {
    params[i].temperature = i % 4 == 0 ? 0.0f : 0.5f + 0.1f * (i % 7);
    params[i].top_p = i % 3 == 0 ? 0.9f : 1.0f;
    params[i].top_k = i % 5 == 0 ? 20 : 0;
    params[i].frequency_penalty = 0.3f;
    params[i].logprobs = 2;
    outputs[i] = {i, i + 1, i};
    rows[i] = {&params[i], 100u + i, 50 + i, {{}, outputs[i], {}}};
  }
  std::vector<float> serial_in = logits;
  const auto serial = sample_batch(serial_in, kVocab, rows);

  ThreadPool pool(4);
  std::vector<float> pooled_in = logits;
  const auto pooled = sample_batch(pooled_in, kVocab, rows, LogprobsMode::kRaw, &pool);

  for (int i = 0; i < kRows; ++i) {
    std::vector<float> alone(logits.begin() + i * kVocab, logits.begin() + (i + 1) * kVocab);
    const auto single = sample_row(alone, params[i], 100u + i, 50 + i, rows[i].context);
    EXPECT_EQ(serial[i].token, single.token) << i;
    EXPECT_EQ(pooled[i].token, single.token) << i;
    EXPECT_EQ(pooled[i].logprobs->sampled.logprob, single.logprobs->sampled.logprob) << i;
  }
  // Reversed batch order: every row lands at another index with other neighbours.
  std::vector<SampleRow> rev(rows.rbegin(), rows.rend());
  std::vector<float> rev_in;
  for (int j = kRows - 1; j >= 0; --j)
    rev_in.insert(rev_in.end(), logits.begin() + j * kVocab, logits.begin() + (j + 1) * kVocab);
  const auto reversed = sample_batch(rev_in, kVocab, rev, LogprobsMode::kRaw, &pool);
  for (int j = 0; j < kRows; ++j) EXPECT_EQ(reversed[kRows - 1 - j].token, serial[j].token) << j;

  std::vector<float> wrong(10);
  EXPECT_THROW(sample_batch(wrong, kVocab, rows), Error);
}
