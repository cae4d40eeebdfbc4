// Manifold-constrained hyper-connections: hc_pre (mix weights + Sinkhorn), hc_post, hc_head.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace deepinfer {

namespace {

float sigmoid(float x) {
  return 1.f / (1.f + std::exp(-x));
}

// mixes[M, nmix] = rmsnorm_unweighted(flatten(X)) @ fn^T. The norm is a per-row scalar, so it
// is applied to the GEMM result instead of materialising the normalised copy of X.
std::vector<float> hc_mixes(const float* X, int64_t M, int64_t width, const float* fn, int64_t nmix,
                            float norm_eps) {
  std::vector<float> mixes(static_cast<size_t>(M * nmix));
  cpu::parallel_sgemm_nt(M, nmix, width, X, width, fn, width, mixes.data(), nmix, 0.f);
  cpu::pool().parallel_for(
      M, std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1)), [&](int64_t b, int64_t e) {
        for (int64_t m = b; m < e; ++m) {
          const float ms = cpu::sum_squares(X + m * width, width) / static_cast<float>(width);
          const float inv = 1.f / std::sqrt(ms + norm_eps);
          for (int64_t j = 0; j < nmix; ++j) mixes[m * nmix + j] *= inv;
        }
      });
  return mixes;
}

// out[d] = sum_h pre[h] * X[h, d] for one token.
void collapse(const float* X, const float* pre, int64_t hc, int64_t D, float* out) {
  for (int64_t d = 0; d < D; ++d) out[d] = pre[0] * X[d];
  for (int64_t h = 1; h < hc; ++h) {
    const float p = pre[h];
    const float* xh = X + h * D;
    for (int64_t d = 0; d < D; ++d) out[d] += p * xh[d];
  }
}

// Sinkhorn projection of one [hc, hc] matrix (flat index row * hc + col), exactly the
// reference's sequence: row softmax + eps, column normalise, then (iters - 1) rounds of row
// then column normalisation, each with eps in the denominator.
void sinkhorn(float* c, int64_t hc, int iters, float eps) {
  auto norm_rows = [&] {
    for (int64_t i = 0; i < hc; ++i) {
      float s = 0.f;
      for (int64_t j = 0; j < hc; ++j) s += c[i * hc + j];
      for (int64_t j = 0; j < hc; ++j) c[i * hc + j] /= s + eps;
    }
  };
  auto norm_cols = [&] {
    for (int64_t j = 0; j < hc; ++j) {
      float s = 0.f;
      for (int64_t i = 0; i < hc; ++i) s += c[i * hc + j];
      for (int64_t i = 0; i < hc; ++i) c[i * hc + j] /= s + eps;
    }
  };
  for (int64_t i = 0; i < hc; ++i) {
    float* r = c + i * hc;
    const float mx = *std::max_element(r, r + hc);
    float s = 0.f;
    for (int64_t j = 0; j < hc; ++j) s += (r[j] = std::exp(r[j] - mx));
    for (int64_t j = 0; j < hc; ++j) r[j] = r[j] / s + eps;
  }
  norm_cols();
  for (int it = 1; it < iters; ++it) {
    norm_rows();
    norm_cols();
  }
}

}  // namespace

void CpuBackend::hc_pre(const TensorView& X, const TensorView& fn, const TensorView& base,
                        const TensorView& scale, int sinkhorn_iters, float hc_eps, float norm_eps,
                        const TensorView& collapsed, const TensorView& post,
                        const TensorView& comb) {
  using cpu::kAny;
  cpu::expect("hc_pre", "X", X, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = X.dim(0), hc = X.dim(1), D = X.dim(2), nmix = (2 + hc) * hc;
  DI_CHECK(hc >= 1 && D >= 1, ErrorCode::kInvalidArgument, "hc_pre: X {} has no streams",
           X.shape_str());
  cpu::expect("hc_pre", "fn", fn, DType::kF32, {nmix, hc * D});
  cpu::expect("hc_pre", "base", base, DType::kF32, {nmix});
  cpu::expect("hc_pre", "scale", scale, DType::kF32, {3});
  cpu::expect("hc_pre", "collapsed", collapsed, DType::kF32, {M, D});
  cpu::expect("hc_pre", "post", post, DType::kF32, {M, hc});
  cpu::expect("hc_pre", "comb", comb, DType::kF32, {M, hc, hc});
  cpu::expect_no_alias("hc_pre", "collapsed", collapsed, "X", X);
  if (M == 0) return;
  const float* xp = X.data_as<float>();
  const std::vector<float> mixes = hc_mixes(xp, M, hc * D, fn.data_as<float>(), nmix, norm_eps);
  const float* bs = base.data_as<float>();
  const float* sc = scale.data_as<float>();
  float* cp = collapsed.data_as<float>();
  float* pp = post.data_as<float>();
  float* kp = comb.data_as<float>();
  cpu::pool().parallel_for(M, std::max<int64_t>(1, 4096 / std::max<int64_t>(hc * D, 1)),
                           [&](int64_t b, int64_t e) {
                             std::vector<float> pre(hc);
                             for (int64_t m = b; m < e; ++m) {
                               const float* f = mixes.data() + m * nmix;
                               for (int64_t h = 0; h < hc; ++h) {
                                 pre[h] = sigmoid(f[h] * sc[0] + bs[h]) + hc_eps;
                                 pp[m * hc + h] = 2.f * sigmoid(f[hc + h] * sc[1] + bs[hc + h]);
                               }
                               float* c = kp + m * hc * hc;
                               for (int64_t i = 0; i < hc * hc; ++i)
                                 c[i] = f[2 * hc + i] * sc[2] + bs[2 * hc + i];
                               sinkhorn(c, hc, sinkhorn_iters, hc_eps);
                               collapse(xp + m * hc * D, pre.data(), hc, D, cp + m * D);
                             }
                           });
}

void CpuBackend::hc_post(const TensorView& X, const TensorView& y, const TensorView& post,
                         const TensorView& comb, const TensorView& out) {
  using cpu::kAny;
  cpu::expect("hc_post", "X", X, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = X.dim(0), hc = X.dim(1), D = X.dim(2);
  cpu::expect("hc_post", "y", y, DType::kF32, {M, D});
  cpu::expect("hc_post", "post", post, DType::kF32, {M, hc});
  cpu::expect("hc_post", "comb", comb, DType::kF32, {M, hc, hc});
  cpu::expect("hc_post", "out", out, DType::kF32, {M, hc, D});
  cpu::expect_no_alias("hc_post", "out", out, "X", X);
  cpu::expect_no_alias("hc_post", "out", out, "y", y);
  const float* xp = X.data_as<float>();
  const float* yp = y.data_as<float>();
  const float* pp = post.data_as<float>();
  const float* cp = comb.data_as<float>();
  float* op = out.data_as<float>();
  // One task per output stream (m, h); comb is used transposed: weight of X[m, j] is comb[m, j, h].
  cpu::pool().parallel_for(M * hc, std::max<int64_t>(1, 8192 / std::max<int64_t>(D, 1)),
                           [&](int64_t b, int64_t e) {
                             for (int64_t t = b; t < e; ++t) {
                               const int64_t m = t / hc, h = t % hc;
                               float* o = op + t * D;
                               const float* yr = yp + m * D;
                               const float p = pp[t];
                               for (int64_t d = 0; d < D; ++d) o[d] = p * yr[d];
                               for (int64_t j = 0; j < hc; ++j) {
                                 const float w = cp[(m * hc + j) * hc + h];
                                 const float* xj = xp + (m * hc + j) * D;
                                 for (int64_t d = 0; d < D; ++d) o[d] += w * xj[d];
                               }
                             }
                           });
}

void CpuBackend::hc_head(const TensorView& X, const TensorView& fn, const TensorView& base,
                         const TensorView& scale, float hc_eps, float norm_eps,
                         const TensorView& out) {
  using cpu::kAny;
  cpu::expect("hc_head", "X", X, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = X.dim(0), hc = X.dim(1), D = X.dim(2);
  DI_CHECK(hc >= 1 && D >= 1, ErrorCode::kInvalidArgument, "hc_head: X {} has no streams",
           X.shape_str());
  cpu::expect("hc_head", "fn", fn, DType::kF32, {hc, hc * D});
  cpu::expect("hc_head", "base", base, DType::kF32, {hc});
  cpu::expect("hc_head", "scale", scale, DType::kF32, {1});
  cpu::expect("hc_head", "out", out, DType::kF32, {M, D});
  cpu::expect_no_alias("hc_head", "out", out, "X", X);
  if (M == 0) return;
  const float* xp = X.data_as<float>();
  const std::vector<float> mixes = hc_mixes(xp, M, hc * D, fn.data_as<float>(), hc, norm_eps);
  const float* bs = base.data_as<float>();
  const float s0 = scale.data_as<float>()[0];
  float* op = out.data_as<float>();
  cpu::pool().parallel_for(M, std::max<int64_t>(1, 4096 / std::max<int64_t>(hc * D, 1)),
                           [&](int64_t b, int64_t e) {
                             std::vector<float> pre(hc);
                             for (int64_t m = b; m < e; ++m) {
                               for (int64_t h = 0; h < hc; ++h)
                                 pre[h] = sigmoid(mixes[m * hc + h] * s0 + bs[h]) + hc_eps;
                               collapse(xp + m * hc * D, pre.data(), hc, D, op + m * D);
                             }
                           });
}

}  // namespace deepinfer
