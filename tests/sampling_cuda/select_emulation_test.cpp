// Host emulation of sampler_kernels.cu: the same helpers (select_common.h), the same row staging
// (row_staging.h) and the same steps, run sequentially, against the CPU sampler. The GPU test
// checks the kernels themselves; this one checks the algorithm anywhere (no GPU needed),
// including the descent paths, which a small gather capacity forces on every crossing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/status.h"
#include "sampler_cases.h"
#include "sampling/cuda/row_staging.h"
#include "sampling/cuda/select_common.h"
#include "sampling/logits_processors.h"
#include "sampling/sampling_exp.h"

using namespace deepinfer;
using namespace deepinfer::sampling;
using namespace deepinfer::sampling::cuda;
using namespace deepinfer::sampling::testcases;

namespace {

// Per-bucket counts and weights made suffix sums, like histogram() + suffix_sums() (one extra
// zero entry at the end).
struct Hist {
  std::vector<uint64_t> c, w;
};
Hist histogram(const std::vector<float>& x, const RowMath& m, int n, uint32_t lo, uint32_t hi,
               int shift, uint32_t mask) {
  Hist h{std::vector<uint64_t>(n + 1), std::vector<uint64_t>(n + 1)};
  const DRange range = d_range(lo, hi);
  for (float v : x) {
    const uint32_t pb = candidate_bits(v, m, range);
    if (pb >= lo && pb <= hi) {
      const uint32_t b = ((pb - kPMinBits) >> shift) & mask;
      h.c[b] += 1;
      h.w[b] += weight_of_bits(pb);
    }
  }
  for (int b = n - 1; b >= 0; --b) h.c[b] += h.c[b + 1], h.w[b] += h.w[b + 1];
  return h;
}

// pick_bucket(): the unique b with S[b] > t >= S[b + 1], and the sums before it.
int pick(const Hist& h, bool by_count, uint64_t t, uint64_t& c_before, uint64_t& w_before) {
  const auto& S = by_count ? h.c : h.w;
  for (size_t b = 0; b + 1 < S.size(); ++b) {
    if (S[b] > t && S[b + 1] <= t) {
      c_before += h.c[b + 1];
      w_before += h.w[b + 1];
      return static_cast<int>(b);
    }
  }
  return -1;
}

// sample_rows_kernel for one row, with a gathered prefix of at most `cap` tokens.
int32_t emulate_row(const std::vector<float>& x, const RowParams& rp, int cap, int32_t& status) {
  status = kRowOk;
  float xmax = -kInf;
  int32_t imax = -1;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] > xmax) xmax = x[i], imax = static_cast<int32_t>(i);
  if (!(xmax > -kInf)) return status = kRowAllMasked, -1;
  if (rp.greedy) return imax;
  const RowMath m{rp.temperature, div_rn(xmax, rp.temperature), rp.min_p};
  if (!(m.zmax > -kInf)) return status = kRowAllMasked, -1;

  const Hist h1 = histogram(x, m, kL1Buckets, kPMinBits, kPOneBits, kL1Shift, 0xFFFu);
  const uint64_t n_cand = h1.c[0], mass = h1.w[0];
  if (n_cand == 0) return status = kRowInternal, -1;

  // gather_top(): the lowest bucket whose suffix count fits.
  int cut = 0;
  while (h1.c[cut] > static_cast<uint64_t>(cap)) ++cut;
  const uint64_t n = h1.c[cut];
  std::vector<uint64_t> gkey, gcum;
  if (n > 0) {
    const uint32_t lo = kPMinBits + (static_cast<uint32_t>(cut) << kL1Shift);
    const DRange range = d_range(lo, kPOneBits);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t pb = candidate_bits(x[i], m, range);
      if (pb >= lo) gkey.push_back(order_key(pb, static_cast<uint32_t>(i)));
    }
    EXPECT_EQ(gkey.size(), n);
    std::sort(gkey.begin(), gkey.end(), std::greater<>());
    uint64_t run = 0;
    for (uint64_t k : gkey) gcum.push_back(run += weight_of_bits(key_bits(k)));
  }

  auto cross = [&](bool by_count, uint64_t target) -> Crossing {
    if (n > 0 && target < (by_count ? n : gcum.back())) {
      uint64_t i = target;
      if (!by_count) i = std::upper_bound(gcum.begin(), gcum.end(), target) - gcum.begin();
      return {key_id(gkey[i]), gcum[i]};
    }
    uint64_t c_before = 0, w_before = 0;
    const int b1 = pick(h1, by_count, target, c_before, w_before);
    if (b1 < 0) return {-1, 0};
    uint32_t lo = kPMinBits + (static_cast<uint32_t>(b1) << kL1Shift);
    const Hist h2 =
        histogram(x, m, kL2Buckets, lo, lo + (1u << kL1Shift) - 1, kL2Shift, kL2Buckets - 1);
    const int b2 =
        pick(h2, by_count, target - (by_count ? c_before : w_before), c_before, w_before);
    if (b2 < 0) return {-1, 0};
    lo += static_cast<uint32_t>(b2) << kL2Shift;
    const Hist h3 = histogram(x, m, kL2Buckets, lo, lo + (1u << kL2Shift) - 1, 0, kL3Buckets - 1);
    const int b3 =
        pick(h3, by_count, target - (by_count ? c_before : w_before), c_before, w_before);
    if (b3 < 0) return {-1, 0};
    const uint32_t pb = lo + static_cast<uint32_t>(b3);
    const uint64_t w = weight_of_bits(pb);
    const uint64_t nth = by_count ? target - c_before : (target - w_before) / w;
    // nth_id_with_bits(): ordered scan.
    const DRange range = d_range(pb, pb);
    uint64_t seen = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (candidate_bits(x[i], m, range) == pb && seen++ == nth)
        return {static_cast<int32_t>(i), w_before + (nth + 1) * w};
    }
    return {-1, 0};
  };
  const int32_t id = select_token(rp, n_cand, mass, cross);
  if (id < 0 || id >= static_cast<int32_t>(x.size())) return status = kRowInternal, -1;
  return id;
}

// Stages `cases` like DeviceSampler, applies the edits on the host, emulates every row with
// each gather capacity and compares with the CPU sampler.
void check_cases(const std::vector<Case>& cases, int64_t V, std::vector<int> caps) {
  RowStager stager;
  stager.clear(V);
  std::vector<float> logits;
  for (size_t i = 0; i < cases.size(); ++i) {
    stager.add(static_cast<int64_t>(i), cases[i].row());
    logits.insert(logits.end(), cases[i].logits.begin(), cases[i].logits.end());
  }
  apply_edits_host(logits.data(), V, stager.params(), stager.edits());
  for (size_t i = 0; i < cases.size(); ++i) {
    const CpuAnswer want = cpu_answer(cases[i]);
    const float* row = logits.data() + i * V;
    const int64_t diff = first_difference(row, want.processed.data(), V);
    ASSERT_EQ(diff, -1) << "processed logit " << diff << " of row " << i << ": "
                        << row[std::max<int64_t>(diff, 0)] << " vs "
                        << want.processed[std::max<int64_t>(diff, 0)];
    const std::vector<float> x(row, row + V);
    for (int cap : caps) {
      int32_t status;
      const int32_t got = emulate_row(x, stager.params()[i], cap, status);
      if (!want.error.empty()) {
        EXPECT_EQ(status, kRowAllMasked) << want.error;
      } else {
        ASSERT_EQ(status, kRowOk) << "row " << i << " cap " << cap;
        ASSERT_EQ(got, want.token)
            << "row " << i << " cap " << cap << " V " << V << " T " << cases[i].params.temperature
            << " top_k " << cases[i].params.top_k << " top_p " << cases[i].params.top_p << " min_p "
            << cases[i].params.min_p;
      }
    }
  }
}

}  // namespace

TEST(SelectEmulation, SamplingExpIsNearlyCorrectlyRoundedAndMonotone) {
  // Every float in [-104, 0] with a stride; the result is within one ulp of exp.
  float prev = 0.0f;
  for (uint32_t b = 0xC2D00000u; b > 0x80000000u; b -= 97) {
    float d;
    std::memcpy(&d, &b, 4);
    const float got = sampling_exp(d);
    const double ref = std::exp(static_cast<double>(d));
    ASSERT_LE(std::fabs(got - ref), std::nextafter(static_cast<float>(ref), 2.0f) - float(ref))
        << d;
    ASSERT_GE(got, prev) << d;
    prev = got;
  }
  EXPECT_EQ(sampling_exp(0.0f), 1.0f);
  EXPECT_EQ(sampling_exp(-kInf), 0.0f);
  EXPECT_TRUE(std::isnan(sampling_exp(std::nanf(""))));
  EXPECT_EQ(sampling_exp(-200.0f), 0.0f);
}

TEST(SelectEmulation, MatchesCpuSamplerSmallVocabularies) {
  SCOPED_TRACE(seed_note());
  CaseGen gen(1);
  const auto grid = parameter_grid();
  for (int64_t V : {1, 2, 5, 37, 1000, 3001}) {
    std::vector<Case> cases;
    for (int rep = 0; rep < 6; ++rep)
      for (const auto& p : grid) cases.push_back(gen.make(V, p));
    check_cases(cases, V, {kGather, 16, 1, 0});
  }
}

TEST(SelectEmulation, MatchesCpuSamplerFullVocabulary) {
  SCOPED_TRACE(seed_note());
  CaseGen gen(2);
  constexpr int64_t V = 129280;
  std::vector<Case> cases;
  for (const auto& p : parameter_grid()) cases.push_back(gen.make(V, p));
  check_cases(cases, V, {kGather, 0});
}

TEST(SelectEmulation, StagerReportsBadIdsLikeTheCpuAndKeepsNothing) {
  SamplingParams p;
  p.logit_bias = {{3, 1.0f}, {12, 1.0f}};
  p.repetition_penalty = 1.2f;
  const std::vector<int32_t> prompt = {1, 2};
  RowStager stager;
  stager.clear(10);
  EXPECT_THROW(
      {
        try {
          stager.add(0, {&p, 1, 0, {prompt, {}, {}}});
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "logit_bias token id 12 is outside the vocabulary [0, 10)");
          throw;
        }
      },
      Error);
  EXPECT_TRUE(stager.params().empty());
  EXPECT_TRUE(stager.edits().empty());
  // The scratch is clean: a good row after it gets exactly its own edits.
  p.logit_bias = {{3, 1.0f}};
  stager.add(0, {&p, 1, 0, {prompt, {}, {}}});
  ASSERT_EQ(stager.edits().size(), 3u);  // tokens 3 (bias), 1 and 2 (repetition)
  EXPECT_EQ(stager.edits()[0].flags, kEditBias);
  EXPECT_EQ(stager.edits()[1].flags, kEditRepetition);
}
