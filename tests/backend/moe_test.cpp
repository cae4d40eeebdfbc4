// route (top-k with / without bias, hash), swiglu, moe_experts.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "common/mxfp4_experts.h"
#include "test_util.h"

namespace deepinfer::test {
namespace {

class Moe : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
};

double score(double x, ScoringFunc f) {
  switch (f) {
    case ScoringFunc::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case ScoringFunc::kSqrtSoftplus:
      return std::sqrt(std::log1p(std::exp(x)));
    case ScoringFunc::kSoftmax:
      break;
  }
  return std::exp(x);  // softmax: normalised by the caller
}

std::vector<double> ref_scores(const float* logits, int64_t E, ScoringFunc f) {
  std::vector<double> s(E);
  double mx = -1e300, sum = 0;
  for (int64_t e = 0; e < E; ++e) mx = std::max(mx, double(logits[e]));
  for (int64_t e = 0; e < E; ++e)
    sum += s[e] = f == ScoringFunc::kSoftmax ? std::exp(logits[e] - mx) : score(logits[e], f);
  if (f == ScoringFunc::kSoftmax)
    for (auto& v : s) v /= sum;
  return s;
}

TEST_F(Moe, RouteTopkAndHash) {
  SEED_TRACE();
  const int64_t E = 64, k = 6, V = 500;
  for (auto func : {ScoringFunc::kSqrtSoftplus, ScoringFunc::kSigmoid, ScoringFunc::kSoftmax}) {
    for (int mode = 0; mode < 3; ++mode) {  // 0: top-k, 1: top-k + bias, 2: hash
      for (int64_t M : {1, 33, 500}) {
        SCOPED_TRACE(testing::Message() << "func=" << int(func) << " mode=" << mode << " M=" << M);
        Rng rng;
        Tensor logits = rand_tensor(rng, {M, E}, -4.f, 4.f),
               bias = rand_tensor(rng, {E}, -0.3f, 0.3f);
        std::vector<int32_t> table(V * k), ids(M);
        for (int64_t t = 0; t < V; ++t) {  // distinct experts per token, in a random order
          std::vector<int32_t> perm(E);
          std::iota(perm.begin(), perm.end(), 0);
          std::shuffle(perm.begin(), perm.end(), rng.gen());
          std::copy(perm.begin(), perm.begin() + k, table.begin() + t * k);
        }
        for (auto& i : ids) i = static_cast<int32_t>(rng.integer(0, V - 1));
        Tensor table_t = int_tensor(table, {V, k}), ids_t = int_tensor(ids, {M});
        Tensor w = poisoned({M, k}), idx = poisoned({M, k}, DType::kI32);
        const float routed_scale = 2.5f;
        be->route(logits, func, mode == 1 ? bias.view() : TensorView(),
                  mode == 2 ? table_t.view() : TensorView(),
                  mode == 2 ? ids_t.view() : TensorView(), routed_scale, w, idx);
        std::vector<double> ref_w(M * k);
        for (int64_t m = 0; m < M; ++m) {
          const auto s = ref_scores(logits.data_as<float>() + m * E, E, func);
          const int32_t* sel = idx.data_as<int32_t>() + m * k;
          if (mode == 2) {
            ASSERT_TRUE(std::equal(sel, sel + k, table.begin() + ids[m] * k)) << "row " << m;
          } else {
            // The selection is a top-k of the (biased) scores in descending order; near-equal
            // candidates may legitimately swap between fp32 and double, hence the slack.
            std::vector<double> key(s);
            if (mode == 1) {
              for (int64_t e = 0; e < E; ++e) key[e] += bias.data_as<float>()[e];
            }
            const std::set<int32_t> chosen(sel, sel + k);
            ASSERT_EQ(chosen.size(), size_t(k)) << "row " << m;
            double worst_in = 1e300, best_out = -1e300;
            for (int64_t j = 0; j < k; ++j) {
              ASSERT_TRUE(sel[j] >= 0 && sel[j] < E);
              worst_in = std::min(worst_in, key[sel[j]]);
              if (j) {
                ASSERT_GE(key[sel[j - 1]], key[sel[j]] - 1e-6) << "row " << m;
              }
            }
            for (int64_t e = 0; e < E; ++e)
              if (!chosen.count(int32_t(e))) best_out = std::max(best_out, key[e]);
            ASSERT_GE(worst_in, best_out - 1e-6) << "row " << m;
          }
          double sum = 0;
          for (int64_t j = 0; j < k; ++j) sum += s[sel[j]];
          for (int64_t j = 0; j < k; ++j)
            ref_w[m * k + j] = s[sel[j]] / (sum + 1e-20) * routed_scale;
        }
        EXPECT_CLOSE(w, ref_w);
      }
    }
  }
}

TEST_F(Moe, RouteTiesPickLowerIndexAndBiasOnlySelects) {
  Tensor logits = make({1, 8});
  std::fill(logits.data_as<float>(), logits.data_as<float>() + 8, 0.5f);
  Tensor w = poisoned({1, 3}), idx = poisoned({1, 3}, DType::kI32);
  be->route(logits, ScoringFunc::kSigmoid, TensorView(), TensorView(), TensorView(), 1.f, w, idx);
  EXPECT_EQ(std::vector<int32_t>(idx.data_as<int32_t>(), idx.data_as<int32_t>() + 3),
            (std::vector<int32_t>{0, 1, 2}));
  // A bias moves the selection to 7, 5, 6 but the weights stay the unbiased (equal) scores.
  Tensor bias = make({8});
  const float b[] = {0, 0, 0, 0, 0, 0.2f, 0.2f, 0.3f};
  std::copy(b, b + 8, bias.data_as<float>());
  be->route(logits, ScoringFunc::kSigmoid, bias, TensorView(), TensorView(), 3.f, w, idx);
  EXPECT_EQ(std::vector<int32_t>(idx.data_as<int32_t>(), idx.data_as<int32_t>() + 3),
            (std::vector<int32_t>{7, 5, 6}));
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(w.data_as<float>()[j], 1.f, 1e-6);
}

TEST_F(Moe, RouteRejectsBadInputs) {
  Tensor logits = make({2, 8}), w = make({2, 3}), idx = make({2, 3}, DType::kI32);
  EXPECT_THROW(
      be->route(logits, ScoringFunc::kSigmoid, make({7}), TensorView(), TensorView(), 1.f, w, idx),
      Error);  // bias per expert
  EXPECT_THROW(be->route(logits, ScoringFunc::kSigmoid, TensorView(), int_tensor({0, 1, 9}, {1, 3}),
                         int_tensor({0, 0}, {2}), 1.f, w, idx),
               Error);  // table names expert 9 of 8
  EXPECT_THROW(be->route(logits, ScoringFunc::kSigmoid, TensorView(), int_tensor({0, 1, 2}, {1, 3}),
                         int_tensor({0, 1}, {2}), 1.f, w, idx),
               Error);  // token id 1 outside a 1-row table
  EXPECT_THROW(be->route(logits, ScoringFunc::kSigmoid, TensorView(), TensorView(), TensorView(),
                         1.f, make({2, 9}), make({2, 9}, DType::kI32)),
               Error);  // k > E
}

double ref_swiglu(double g, double u, double limit) {
  if (limit > 0) g = std::min(g, limit), u = std::clamp(u, -limit, limit);
  return g / (1 + std::exp(-g)) * u;
}

TEST_F(Moe, SwigluClamps) {
  SEED_TRACE();
  for (float limit : {7.f, 0.f}) {
    for (auto [M, I] : std::vector<std::array<int64_t, 2>>{{1, 2048}, {33, 129}, {300, 512}}) {
      Rng rng;
      Tensor g = rand_tensor(rng, {M, I}, -12.f, 12.f), u = rand_tensor(rng, {M, I}, -12.f, 12.f);
      Tensor out = poisoned({M, I});
      be->swiglu(g, u, limit, out);
      std::vector<double> ref(M * I);
      for (int64_t i = 0; i < M * I; ++i)
        ref[i] = ref_swiglu(g.data_as<float>()[i], u.data_as<float>()[i], limit);
      EXPECT_CLOSE(out, ref);
    }
  }
  EXPECT_THROW(be->swiglu(make({2, 3}), make({2, 4}), 1.f, make({2, 3})), Error);
}

struct MoeCase {
  int64_t M, D, I, E, k;
};

TEST_F(Moe, ExpertsAccumulateWeightedOutputs) {
  SEED_TRACE();
  for (auto c : std::vector<MoeCase>{
           {1, 64, 48, 8, 3}, {17, 48, 40, 8, 3}, {200, 96, 80, 16, 6}, {5, 33, 17, 4, 4}}) {
    for (float limit : {1.5f, 0.f}) {
      SCOPED_TRACE(testing::Message() << "M=" << c.M << " D=" << c.D << " I=" << c.I << " E=" << c.E
                                      << " k=" << c.k << " limit=" << limit);
      Rng rng;
      Tensor x = rand_tensor(rng, {c.M, c.D});
      Tensor w1 = rand_tensor(rng, {c.E, c.I, c.D}, -0.3f, 0.3f);
      Tensor w3 = rand_tensor(rng, {c.E, c.I, c.D}, -0.3f, 0.3f);
      Tensor w2 = rand_tensor(rng, {c.E, c.D, c.I}, -0.3f, 0.3f);
      Tensor wts = rand_tensor(rng, {c.M, c.k}, 0.f, 1.f);
      std::vector<int32_t> idx(c.M * c.k);
      for (auto& i : idx) i = static_cast<int32_t>(rng.integer(0, c.E - 1));  // repeats allowed
      Tensor idx_t = int_tensor(idx, {c.M, c.k});
      Tensor out = rand_tensor(rng, {c.M, c.D});  // accumulated into: starts non-zero
      std::vector<double> ref = to_double(out);
      Tensor out2 = make({c.M, c.D});
      std::memcpy(out2.data_as<float>(), out.data_as<float>(), out.view().nbytes());
      be->moe_experts(x, idx_t, wts, ExpertWeights{w1, w3, w2}, limit, TensorView(), out);

      const float* xp = x.data_as<float>();
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t j = 0; j < c.k; ++j) {
          const int64_t e = idx[m * c.k + j];
          std::vector<double> a(c.I);
          for (int64_t i = 0; i < c.I; ++i) {
            double g = 0, u = 0;
            for (int64_t d = 0; d < c.D; ++d) {
              g += double(xp[m * c.D + d]) * w1.data_as<float>()[(e * c.I + i) * c.D + d];
              u += double(xp[m * c.D + d]) * w3.data_as<float>()[(e * c.I + i) * c.D + d];
            }
            a[i] = ref_swiglu(g, u, limit);
          }
          for (int64_t d = 0; d < c.D; ++d) {
            double y = 0;
            for (int64_t i = 0; i < c.I; ++i)
              y += a[i] * w2.data_as<float>()[(e * c.D + d) * c.I + i];
            ref[m * c.D + d] += wts.data_as<float>()[m * c.k + j] * y;
          }
        }
      EXPECT_CLOSE(out, ref);
      // Same inputs, same bits: the scatter does not depend on thread timing.
      be->moe_experts(x, idx_t, wts, ExpertWeights{w1, w3, w2}, limit, TensorView(), out2);
      EXPECT_EQ(0, std::memcmp(out.data_as<float>(), out2.data_as<float>(), out.view().nbytes()));
    }
  }
}

using testing_mxfp4::Mxfp4Matrices;
using testing_mxfp4::random_mxfp4;

TEST_F(Moe, Mxfp4ExpertsGiveTheBitsOfTheirWidenedWeights) {
  SEED_TRACE();
  for (auto c : std::vector<MoeCase>{{1, 64, 96, 8, 3}, {40, 128, 64, 16, 6}}) {
    SCOPED_TRACE(testing::Message() << "M=" << c.M << " D=" << c.D << " I=" << c.I);
    Rng rng;
    ASSERT_TRUE(be->takes_mxfp4_experts(c.E, c.I, c.D));
    const Mxfp4Matrices w1 = random_mxfp4(rng, c.E, c.I, c.D),
                        w3 = random_mxfp4(rng, c.E, c.I, c.D),
                        w2 = random_mxfp4(rng, c.E, c.D, c.I);
    Tensor x = rand_tensor(rng, {c.M, c.D}, -0.05f, 0.05f);
    Tensor wts = rand_tensor(rng, {c.M, c.k}, 0.f, 1.f);
    std::vector<int32_t> idx(c.M * c.k);
    for (auto& i : idx) i = static_cast<int32_t>(rng.integer(0, c.E - 1));
    Tensor idx_t = int_tensor(idx, {c.M, c.k});
    Tensor wide_out = rand_tensor(rng, {c.M, c.D}), packed_out = make({c.M, c.D});
    std::memcpy(packed_out.data_as<float>(), wide_out.data_as<float>(), wide_out.view().nbytes());
    be->moe_experts(x, idx_t, wts, ExpertWeights{w1.wide, w3.wide, w2.wide}, 7.f, TensorView(),
                    wide_out);
    const ExpertWeights packed{w1.packed, w3.packed, w2.packed, w1.scales, w3.scales, w2.scales};
    ASSERT_TRUE(packed.mxfp4());
    be->moe_experts(x, idx_t, wts, packed, 7.f, TensorView(), packed_out);
    EXPECT_EQ(0, std::memcmp(wide_out.data_as<float>(), packed_out.data_as<float>(),
                             wide_out.view().nbytes()));
  }
}

TEST_F(Moe, Mxfp4ExpertsRejectBadScalesAndShapes) {
  Rng rng;
  const Mxfp4Matrices w1 = random_mxfp4(rng, 2, 32, 64), w3 = random_mxfp4(rng, 2, 32, 64),
                      w2 = random_mxfp4(rng, 2, 64, 32);
  Tensor x = make({1, 64}), wts = make({1, 1}), out = make({1, 64});
  const Tensor idx = int_tensor({1}, {1, 1});
  // s2 shaped like s1 (row-major instead of k-group-major).
  EXPECT_THROW(be->moe_experts(x, idx, wts,
                               ExpertWeights{w1.packed, w3.packed, w2.packed, w1.scales, w3.scales,
                                             make({2, 64, 1}, DType::kE8M0)},
                               1.f, TensorView(), out),
               Error);
  // fp32 data with scales.
  EXPECT_THROW(
      be->moe_experts(x, idx, wts,
                      ExpertWeights{w1.wide, w3.wide, w2.wide, w1.scales, w3.scales, w2.scales},
                      1.f, TensorView(), out),
      Error);
  // Rows not whole scale blocks.
  EXPECT_FALSE(be->takes_mxfp4_experts(2, 48, 64));
  EXPECT_FALSE(be->takes_mxfp4_experts(2, 32, 40));
}

TEST_F(Moe, ExpertsRejectBadInputs) {
  Tensor x = make({2, 8}), w = make({2, 2}), out = make({2, 8});
  ExpertWeights ew{make({3, 4, 8}), make({3, 4, 8}), make({3, 8, 4})};
  EXPECT_THROW(be->moe_experts(x, int_tensor({0, 1, 2, 3}, {2, 2}), w, ew, 1.f, TensorView(), out),
               Error);
  EXPECT_THROW(be->moe_experts(x, int_tensor({0, 1, 2, -1}, {2, 2}), w, ew, 1.f, TensorView(), out),
               Error);
  ExpertWeights bad{make({3, 4, 8}), make({3, 4, 8}), make({3, 4, 8})};
  EXPECT_THROW(be->moe_experts(x, int_tensor({0, 1, 2, 0}, {2, 2}), w, bad, 1.f, TensorView(), out),
               Error);
  EXPECT_THROW(be->moe_experts(x, int_tensor({0, 1, 2, 0}, {2, 2}), make({2, 3}), ew, 1.f,
                               TensorView(), out),
               Error);
  // The CPU makes no plans, and takes none.
  const Tensor idx = int_tensor({0, 1, 2, 0}, {2, 2});
  EXPECT_FALSE(be->moe_plan(idx, 3).defined());
  EXPECT_THROW(be->moe_experts(x, idx, w, ew, 1.f, int_tensor({0, 0, 0}, {3}), out), Error);
}

}  // namespace
}  // namespace deepinfer::test
