#include "sampling/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "core/status.h"
#include "core/thread_pool.h"
#include "sampling/rng.h"
#include "sampling/sampling_exp.h"

namespace deepinfer::sampling {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Cand {
  float p;
  int32_t id;
  uint64_t w;  // token_weight(p)
};

// (p desc, id asc): a strict total order, so every selection method picks the same tokens.
inline bool before(const Cand& a, const Cand& b) {
  return a.p > b.p || (a.p == b.p && a.id < b.id);
}

// For p >= 0 the bit pattern orders like the value.
uint32_t float_bits(float p) {
  return std::bit_cast<uint32_t>(p);
}

// The distribution step 3 leaves: the support c as an unordered set, and its exact mass.
struct Dist {
  std::vector<Cand>& c;
  uint64_t mass = 0;
  float zmax = kNegInf;
};

std::vector<Cand>& cand_scratch() {
  thread_local std::vector<Cand> c;
  return c;
}

float scaled(float logit, float temperature) {
  return logit / temperature;
}

// p relative to the top token; handles a +inf maximum (bias +inf) without NaN. sampling_exp, not
// std::exp: the device sampler must compute the same bits.
float rel_p(float z, float zmax) {
  return z == zmax ? 1.0f : sampling_exp(z - zmax);
}

// The tokens with p > 0 and p >= min_p, unordered. Cloned for x86-64 CPUs with FMA, where
// sampling_exp's fma is one instruction rather than a libm call (the same bits either way).
#if defined(__x86_64__) && defined(__GNUC__)
#define DI_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define DI_FMA_CLONES
#endif
DI_FMA_CLONES size_t collect_candidates(const float* logits, size_t n, float t, float zmax,
                                        float min_p, Cand* out) {
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    const float p = rel_p(scaled(logits[i], t), zmax);
    if (p > 0.0f && p >= min_p) out[kept++] = {p, static_cast<int32_t>(i), token_weight(p)};
  }
  return kept;
}

uint64_t total_weight(std::span<const Cand> c) {
  uint64_t m = 0;
  for (const Cand& e : c) m += e.w;
  return m;
}

// The first token, in the order (p desc, id asc), at which the running weight exceeds `target`
// (target < total weight). Radix select on the bits of p, three passes of 11 / 11 / 10 bits: a
// bucket's weight is exact, so the answer is the full-sort answer without sorting.
const Cand& find_crossing(std::span<const Cand> c, uint64_t target) {
  thread_local std::vector<const Cand*> subset, next;
  if (c.size() <= 256) {  // small sets: sorting is cheaper than the buckets, same answer
    subset.clear();
    for (const Cand& e : c) subset.push_back(&e);
    std::sort(subset.begin(), subset.end(),
              [](const Cand* a, const Cand* b) { return before(*a, *b); });
    uint64_t cum = 0;
    for (const Cand* e : subset)
      if ((cum += e->w) > target) return *e;
    DI_ASSERT(false);
  }
  static constexpr int kShift[3] = {21, 10, 0};
  static constexpr uint32_t kMask[3] = {0x7ff, 0x7ff, 0x3ff};
  thread_local std::array<uint64_t, 2048> bucket;
  subset.clear();
  for (const Cand& e : c) subset.push_back(&e);
  uint64_t prefix = 0;  // weight of the tokens before the subset; stays <= target
  for (int pass = 0; pass < 3; ++pass) {
    std::fill_n(bucket.begin(), kMask[pass] + 1, 0);
    for (const Cand* e : subset) bucket[(float_bits(e->p) >> kShift[pass]) & kMask[pass]] += e->w;
    int64_t chosen = -1;
    for (int64_t b = kMask[pass]; b >= 0; --b) {  // larger bits = larger p come first
      if (prefix + bucket[b] > target) {
        chosen = b;
        break;
      }
      prefix += bucket[b];
    }
    DI_ASSERT(chosen >= 0);
    next.clear();
    for (const Cand* e : subset)
      if (((float_bits(e->p) >> kShift[pass]) & kMask[pass]) == static_cast<uint32_t>(chosen))
        next.push_back(e);
    subset.swap(next);
  }
  // One p value left, so one weight (> 0, else the bucket could not be chosen); ids ascending.
  const uint64_t w = subset.front()->w;
  const auto nth = static_cast<size_t>((target - prefix) / w);
  DI_ASSERT(nth < subset.size());
  std::nth_element(subset.begin(), subset.begin() + nth, subset.end(),
                   [](const Cand* a, const Cand* b) { return a->id < b->id; });
  return *subset[nth];
}

// ceil(frac * m) with frac in (0, 1] taken as a 24-bit fixed-point fraction, exactly.
uint64_t fraction_of(float frac, uint64_t m) {
  const auto f = static_cast<unsigned __int128>(std::lround(frac * 16777216.0f));
  return static_cast<uint64_t>((f * m + 16777215u) >> 24);
}

Dist build_dist(std::span<const float> logits, const SamplingParams& params) {
  // Keeps the total weight below 2^64.
  DI_CHECK(logits.size() < (size_t{1} << (63 - kWeightBits)), ErrorCode::kInvalidArgument,
           "vocabulary of {} tokens is too large to sample from", logits.size());
  Dist d{cand_scratch()};
  auto& c = d.c;
  c.clear();
  const float t = params.temperature;
  // Correctly rounded division by t > 0 is monotone, so max(x / t) == max(x) / t.
  float xmax = kNegInf;
  for (float x : logits)
    if (x > xmax) xmax = x;  // NaN never compares greater
  d.zmax = scaled(xmax, t);
  DI_CHECK(d.zmax > kNegInf, ErrorCode::kInvalidArgument,
           "cannot sample: every logit is -inf or NaN after processing (all tokens masked)");

  // min_p compares against the top token's relative p, which is exactly 1.
  c.resize(logits.size());
  c.resize(collect_candidates(logits.data(), logits.size(), t, d.zmax, params.min_p, c.data()));
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < c.size()) {
    std::nth_element(c.begin(), c.begin() + params.top_k, c.end(), before);
    c.resize(params.top_k);
  }
  d.mass = total_weight(c);

  if (params.top_p < 1.0f) {
    // Shortest prefix with weight >= ceil(top_p * mass): cut at the first running weight
    // exceeding that minus one. Never empty: the first token alone crosses 0.
    const uint64_t need = std::max<uint64_t>(1, fraction_of(params.top_p, d.mass));
    const Cand last = find_crossing(c, need - 1);
    std::erase_if(c, [&](const Cand& e) { return before(last, e); });
    d.mass = total_weight(c);
  }
  return d;
}

int32_t draw(const Dist& d, uint64_t seq_seed, int64_t position) {
  // target = floor(u * mass) with u = bits24 / 2^24, exact: always < mass.
  const uint64_t target = static_cast<uint64_t>(
      (static_cast<unsigned __int128>(uniform_bits24(seq_seed, position, kSampleStream)) *
       d.mass) >>
      24);
  return find_crossing(d.c, target).id;
}

// log_softmax of `x` into `out`, the max subtracted and the sum accumulated in double.
void log_softmax(std::span<const float> x, std::span<float> out) {
  float m = kNegInf;
  for (float v : x)
    if (v > m) m = v;
  if (!(m > kNegInf) || std::isinf(m)) {
    // Degenerate rows (all masked, or +inf logits): all mass on the maxima, if any.
    for (size_t i = 0; i < x.size(); ++i) out[i] = (x[i] == m && m > kNegInf) ? 0.0f : kNegInf;
    return;
  }
  double s = 0.0;
  for (float v : x) s += std::exp(v - m);  // exp(-inf) = 0; NaN rows stay NaN
  const double lse = m + std::log(s);
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i] - lse);
}

std::vector<float>& lp_scratch(size_t n) {
  thread_local std::vector<float> lp;
  lp.resize(n);
  return lp;
}

// Log of the distribution sampled from at temperature > 0: -inf outside the support.
void processed_random_logprobs(std::span<const float> logits, const SamplingParams& params,
                               std::span<float> out) {
  const Dist d = build_dist(logits, params);
  std::fill(out.begin(), out.end(), kNegInf);
  const double log_mass = std::log(static_cast<double>(d.mass)) - kWeightBits * std::log(2.0);
  for (const Cand& e : d.c) {
    const float z = scaled(logits[e.id], params.temperature);
    const double rel = z == d.zmax ? 0.0 : static_cast<double>(z) - d.zmax;
    out[e.id] = static_cast<float>(rel - log_mass);
  }
}

float lp_key(float v) {
  return std::isnan(v) ? kNegInf : v;
}

Logprobs collect_logprobs(std::span<const float> lp, int32_t token, int num) {
  Logprobs out;
  const float mine = lp_key(lp[token]);
  int64_t rank = 0;
  for (float v : lp) rank += lp_key(v) >= mine;
  out.sampled = {token, lp[token], rank};

  const size_t vocab = lp.size();
  const size_t k = num < 0 ? vocab : std::min(vocab, static_cast<size_t>(num));
  if (k == 0) return out;
  thread_local std::vector<int32_t> idx;
  idx.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) idx[i] = static_cast<int32_t>(i);
  auto better = [&](int32_t a, int32_t b) {
    const float va = lp_key(lp[a]), vb = lp_key(lp[b]);
    return va > vb || (va == vb && a < b);
  };
  if (k < vocab) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), better);
  std::sort(idx.begin(), idx.begin() + k, better);
  out.top.reserve(k);
  for (size_t j = 0; j < k; ++j)
    out.top.push_back({idx[j], lp[idx[j]], static_cast<int64_t>(j + 1)});
  return out;
}

}  // namespace

int32_t greedy_token(std::span<const float> logits) {
  int32_t best = -1;
  float best_v = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_v) {  // strict: ties keep the lowest id; NaN never wins
      best_v = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  DI_CHECK(best >= 0, ErrorCode::kInvalidArgument,
           "cannot sample: every logit is -inf or NaN after processing (all tokens masked)");
  return best;
}

int32_t sample_processed(std::span<const float> logits, const SamplingParams& params,
                         uint64_t seq_seed, int64_t position) {
  if (params.greedy()) return greedy_token(logits);
  return draw(build_dist(logits, params), seq_seed, position);
}

std::vector<KeptToken> kept_support(std::span<const float> logits, const SamplingParams& params) {
  if (params.greedy()) return {{greedy_token(logits), 1.0f}};
  const Dist d = build_dist(logits, params);
  std::sort(d.c.begin(), d.c.end(), before);
  std::vector<KeptToken> out;
  out.reserve(d.c.size());
  for (const Cand& e : d.c) out.push_back({e.id, e.p});
  return out;
}

SampleResult sample_row(std::span<float> logits, const SamplingParams& params, uint64_t seq_seed,
                        int64_t position, const TokenContext& ctx, LogprobsMode mode) {
  DI_CHECK(!logits.empty(), ErrorCode::kInvalidArgument, "cannot sample from an empty logits row");
  const bool want_lp = params.logprobs.has_value();
  std::vector<float>* lp = want_lp ? &lp_scratch(logits.size()) : nullptr;
  // Raw logprobs are taken before the processors edit the row.
  if (want_lp && mode == LogprobsMode::kRaw) log_softmax(logits, *lp);

  apply_logits_processors(logits, params, ctx);
  SampleResult result;
  result.token = sample_processed(logits, params, seq_seed, position);

  if (want_lp) {
    if (mode == LogprobsMode::kProcessed) {
      if (params.greedy()) {
        log_softmax(logits, *lp);
      } else {
        processed_random_logprobs(logits, params, *lp);
      }
    }
    result.logprobs = collect_logprobs(*lp, result.token, *params.logprobs);
  }
  return result;
}

std::vector<SampleResult> sample_batch(std::span<float> logits, int64_t vocab_size,
                                       std::span<const SampleRow> rows, LogprobsMode mode,
                                       ThreadPool* pool) {
  DI_CHECK(vocab_size > 0, ErrorCode::kInvalidArgument, "vocab_size must be > 0, got {}",
           vocab_size);
  const auto n = static_cast<int64_t>(rows.size());
  DI_CHECK(static_cast<int64_t>(logits.size()) == n * vocab_size, ErrorCode::kInvalidArgument,
           "logits has {} values, expected {} rows x {} vocab", logits.size(), n, vocab_size);
  std::vector<SampleResult> out(rows.size());
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const SampleRow& r = rows[i];
      DI_CHECK(r.params != nullptr, ErrorCode::kInvalidArgument, "row {} has no params", i);
      out[i] = sample_row(logits.subspan(i * vocab_size, vocab_size), *r.params, r.seq_seed,
                          r.position, r.context, mode);
    }
  };
  if (pool != nullptr && n > 1) {
    pool->parallel_for(n, 1, run);
  } else {
    run(0, n);
  }
  return out;
}

}  // namespace deepinfer::sampling
