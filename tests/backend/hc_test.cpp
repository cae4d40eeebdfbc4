// Hyper-connections: hc_pre (with the reference's exact Sinkhorn sequence), hc_post, hc_head.
#include "test_util.h"

namespace deepinfer::test {
namespace {

class Hc : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
};

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// f[m, :] = rmsnorm_unweighted(flatten(X[m])) @ fn^T, in double.
std::vector<double> ref_mixes(const Tensor& X, const Tensor& fn, double norm_eps) {
  const int64_t M = X.dim(0), W = X.dim(1) * X.dim(2), nmix = fn.dim(0);
  std::vector<double> f(M * nmix);
  for (int64_t m = 0; m < M; ++m) {
    const float* x = X.data_as<float>() + m * W;
    double ss = 0;
    for (int64_t i = 0; i < W; ++i) ss += double(x[i]) * x[i];
    const double inv = 1.0 / std::sqrt(ss / W + norm_eps);
    for (int64_t j = 0; j < nmix; ++j) {
      double s = 0;
      for (int64_t i = 0; i < W; ++i) s += x[i] * inv * fn.data_as<float>()[j * W + i];
      f[m * nmix + j] = s;
    }
  }
  return f;
}

std::vector<double> ref_collapse(const Tensor& X, const std::vector<double>& pre) {
  const int64_t M = X.dim(0), hc = X.dim(1), D = X.dim(2);
  std::vector<double> out(M * D, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t h = 0; h < hc; ++h)
      for (int64_t d = 0; d < D; ++d)
        out[m * D + d] += pre[m * hc + h] * X.data_as<float>()[(m * hc + h) * D + d];
  return out;
}

TEST_F(Hc, PreMatchesReferenceSinkhorn) {
  SEED_TRACE();
  struct Case {
    int64_t M, hc, D;
    int iters;
  };
  for (auto c : std::vector<Case>{
           {1, 4, 256, 20}, {7, 4, 129, 20}, {300, 4, 64, 3}, {5, 3, 33, 1}, {2, 4, 16, 0}}) {
    SCOPED_TRACE(testing::Message()
                 << "M=" << c.M << " hc=" << c.hc << " D=" << c.D << " iters=" << c.iters);
    Rng rng;
    const int64_t hc = c.hc, nmix = (2 + hc) * hc;
    Tensor X = rand_tensor(rng, {c.M, hc, c.D}, -2.f, 2.f);
    Tensor fn = rand_tensor(rng, {nmix, hc * c.D}, -0.2f, 0.2f);
    Tensor base = rand_tensor(rng, {nmix}), scale = rand_tensor(rng, {3}, 0.5f, 2.f);
    Tensor collapsed = poisoned({c.M, c.D}), post = poisoned({c.M, hc}),
           comb = poisoned({c.M, hc, hc});
    const float hc_eps = 1e-6f, norm_eps = 1e-6f;
    be->hc_pre(X, fn, base, scale, c.iters, hc_eps, norm_eps, collapsed, post, comb);

    const auto f = ref_mixes(X, fn, norm_eps);
    const float* b = base.data_as<float>();
    const float* s = scale.data_as<float>();
    std::vector<double> pre(c.M * hc), rpost(c.M * hc), rcomb(c.M * hc * hc);
    for (int64_t m = 0; m < c.M; ++m) {
      const double* fm = f.data() + m * nmix;
      for (int64_t h = 0; h < hc; ++h) {
        pre[m * hc + h] = sigmoid(fm[h] * s[0] + b[h]) + hc_eps;
        rpost[m * hc + h] = 2 * sigmoid(fm[hc + h] * s[1] + b[hc + h]);
      }
      // comb[i][j] at i * hc + j; "rows" sum over j (dim -1), "columns" over i (dim -2).
      std::vector<std::vector<double>> cm(hc, std::vector<double>(hc));
      for (int64_t i = 0; i < hc; ++i) {
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < hc; ++j)
          mx = std::max(mx, cm[i][j] = fm[2 * hc + i * hc + j] * s[2] + b[2 * hc + i * hc + j]);
        for (int64_t j = 0; j < hc; ++j) sum += cm[i][j] = std::exp(cm[i][j] - mx);
        for (int64_t j = 0; j < hc; ++j) cm[i][j] = cm[i][j] / sum + hc_eps;
      }
      auto cols = [&] {
        for (int64_t j = 0; j < hc; ++j) {
          double sum = 0;
          for (int64_t i = 0; i < hc; ++i) sum += cm[i][j];
          for (int64_t i = 0; i < hc; ++i) cm[i][j] /= sum + hc_eps;
        }
      };
      auto rows = [&] {
        for (int64_t i = 0; i < hc; ++i) {
          double sum = 0;
          for (int64_t j = 0; j < hc; ++j) sum += cm[i][j];
          for (int64_t j = 0; j < hc; ++j) cm[i][j] /= sum + hc_eps;
        }
      };
      cols();
      for (int it = 0; it < c.iters - 1; ++it) rows(), cols();
      for (int64_t i = 0; i < hc; ++i)
        for (int64_t j = 0; j < hc; ++j) rcomb[(m * hc + i) * hc + j] = cm[i][j];
    }
    EXPECT_CLOSE(post, rpost);
    EXPECT_CLOSE(comb, rcomb);
    EXPECT_CLOSE(collapsed, ref_collapse(X, pre));
  }
}

TEST_F(Hc, PostUsesCombTransposed) {
  SEED_TRACE();
  for (auto [M, hc, D] :
       std::vector<std::array<int64_t, 3>>{{1, 4, 4096}, {33, 4, 65}, {2, 2, 3}}) {
    Rng rng;
    Tensor X = rand_tensor(rng, {M, hc, D}), y = rand_tensor(rng, {M, D});
    Tensor post = rand_tensor(rng, {M, hc}, 0.f, 2.f),
           comb = rand_tensor(rng, {M, hc, hc}, 0.f, 1.f);
    Tensor out = poisoned({M, hc, D});
    be->hc_post(X, y, post, comb, out);
    std::vector<double> ref(M * hc * D);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t h = 0; h < hc; ++h)
        for (int64_t d = 0; d < D; ++d) {
          double s = double(post.data_as<float>()[m * hc + h]) * y.data_as<float>()[m * D + d];
          for (int64_t j = 0; j < hc; ++j)
            s += double(comb.data_as<float>()[(m * hc + j) * hc + h]) *
                 X.data_as<float>()[(m * hc + j) * D + d];
          ref[(m * hc + h) * D + d] = s;
        }
    EXPECT_CLOSE(out, ref);
    EXPECT_THROW(be->hc_post(X, y, post, comb, X), Error);  // out may not alias X
  }
}

TEST_F(Hc, HeadCollapsesStreams) {
  SEED_TRACE();
  for (auto [M, hc, D] : std::vector<std::array<int64_t, 3>>{{1, 4, 512}, {45, 4, 77}, {3, 1, 8}}) {
    Rng rng;
    Tensor X = rand_tensor(rng, {M, hc, D}, -2.f, 2.f),
           fn = rand_tensor(rng, {hc, hc * D}, -0.3f, 0.3f);
    Tensor base = rand_tensor(rng, {hc}), scale = rand_tensor(rng, {1}, 0.5f, 2.f);
    Tensor out = poisoned({M, D});
    const float hc_eps = 1e-6f, norm_eps = 1e-6f;
    be->hc_head(X, fn, base, scale, hc_eps, norm_eps, out);
    const auto f = ref_mixes(X, fn, norm_eps);
    std::vector<double> pre(M * hc);
    for (int64_t i = 0; i < M * hc; ++i)
      pre[i] = sigmoid(f[i] * scale.data_as<float>()[0] + base.data_as<float>()[i % hc]) + hc_eps;
    EXPECT_CLOSE(out, ref_collapse(X, pre));
  }
}

TEST_F(Hc, RejectsBadShapes) {
  Tensor X = make({2, 4, 8});
  EXPECT_THROW(be->hc_pre(X, make({24, 31}), make({24}), make({3}), 20, 1e-6f, 1e-6f, make({2, 8}),
                          make({2, 4}), make({2, 4, 4})),
               Error);
  EXPECT_THROW(be->hc_pre(X, make({24, 32}), make({24}), make({2}), 20, 1e-6f, 1e-6f, make({2, 8}),
                          make({2, 4}), make({2, 4, 4})),
               Error);
  EXPECT_THROW(be->hc_head(X, make({4, 32}), make({4}), make({1}), 1e-6f, 1e-6f, make({2, 9})),
               Error);
  EXPECT_THROW(be->hc_post(X, make({2, 8}), make({2, 3}), make({2, 4, 4}), make({2, 4, 8})), Error);
}

}  // namespace
}  // namespace deepinfer::test
