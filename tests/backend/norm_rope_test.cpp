// rms_norm and interleaved partial RoPE.
#include <cstring>

#include "test_util.h"

namespace deepinfer::test {
namespace {

class NormRope : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
};

std::vector<double> ref_rms_norm(const Tensor& x, const float* w, double eps) {
  const int64_t D = x.dim(x.ndim() - 1), rows = x.numel() / D;
  std::vector<double> r(x.numel());
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x.data_as<float>() + i * D;
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += double(xr[d]) * xr[d];
    const double inv = 1.0 / std::sqrt(ss / D + eps);
    for (int64_t d = 0; d < D; ++d) r[i * D + d] = xr[d] * inv * (w ? w[d] : 1.0);
  }
  return r;
}

TEST_F(NormRope, RmsNormWithAndWithoutWeight) {
  SEED_TRACE();
  for (auto shape : std::vector<std::vector<int64_t>>{{1, 4096}, {37, 129}, {3, 5, 64}, {600, 7}}) {
    const int64_t D = shape.back();
    for (bool weighted : {true, false}) {
      Rng rng;
      Tensor x = rand_tensor(rng, shape, -3.f, 3.f), w = rand_tensor(rng, {D}, 0.5f, 1.5f);
      Tensor out = poisoned(shape);
      const float eps = 1e-6f;
      be->rms_norm(x, weighted ? w.view() : TensorView(), eps, out);
      const auto ref = ref_rms_norm(x, weighted ? w.data_as<float>() : nullptr, eps);
      EXPECT_CLOSE(out, ref);
      be->rms_norm(x, weighted ? w.view() : TensorView(), eps, x);  // in place
      EXPECT_EQ(0, std::memcmp(x.data_as<float>(), out.data_as<float>(), x.view().nbytes()));
    }
  }
}

TEST_F(NormRope, RmsNormEpsGoesInsideTheRoot) {
  // Tiny inputs make eps dominate: x * rsqrt(mean(x^2) + eps), not x / (rms + eps).
  Tensor x = make({1, 4});
  for (int i = 0; i < 4; ++i) x.data_as<float>()[i] = 1e-3f * (i + 1);
  Tensor out = poisoned({1, 4});
  be->rms_norm(x, TensorView(), 1e-2f, out);
  EXPECT_CLOSE(out, ref_rms_norm(x, nullptr, 1e-2));
}

TEST_F(NormRope, RmsNormRejectsBadWeight) {
  EXPECT_THROW(be->rms_norm(make({2, 8}), make({7}), 1e-6f, make({2, 8})), Error);
  EXPECT_THROW(be->rms_norm(make({2, 8}), TensorView(), 1e-6f, make({2, 9})), Error);
}

// The reference forms the angle in fp32 (inv_freq @ positions in float); cos / sin exactly.
std::vector<double> ref_rope(const Tensor& x, const std::vector<int32_t>& pos,
                             const Tensor& inv_freq, bool inverse) {
  const int64_t M = x.dim(0), H = x.dim(1), hd = x.dim(2), R = inv_freq.dim(0);
  std::vector<double> r = to_double(x);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < R; ++i) {
        const float ang = static_cast<float>(pos[m]) * inv_freq.data_as<float>()[i];
        const double c = std::cos(double(ang)), s = (inverse ? -1 : 1) * std::sin(double(ang));
        double* v = r.data() + (m * H + h) * hd + (hd - 2 * R) + 2 * i;
        const double a = v[0], b = v[1];
        // x * cos + rotate_half(x) * sin, rotate_half(x)[2i] = -x[2i+1], [2i+1] = x[2i].
        v[0] = a * c - b * s;
        v[1] = b * c + a * s;
      }
  return r;
}

Tensor make_inv_freq(int64_t R, double theta) {
  Tensor f = make({R});
  for (int64_t i = 0; i < R; ++i)
    f.data_as<float>()[i] = static_cast<float>(1.0 / std::pow(theta, 2.0 * i / (2.0 * R)));
  return f;
}

TEST_F(NormRope, RopeRotatesTrailingPairs) {
  SEED_TRACE();
  struct Case {
    int64_t M, H, hd, R;
    int32_t max_pos;
  };
  for (auto c : std::vector<Case>{{1, 64, 128, 32, 1000000},
                                  {17, 3, 64, 32, 100},
                                  {200, 8, 40, 6, 65535},
                                  {5, 1, 8, 4, 7}}) {
    for (bool inverse : {false, true}) {
      SCOPED_TRACE(testing::Message() << "M=" << c.M << " H=" << c.H << " hd=" << c.hd
                                      << " R=" << c.R << " inverse=" << inverse);
      Rng rng;
      Tensor x = rand_tensor(rng, {c.M, c.H, c.hd});
      std::vector<int32_t> pos(c.M);
      for (auto& p : pos) p = static_cast<int32_t>(rng.integer(0, c.max_pos));
      Tensor inv_freq = make_inv_freq(c.R, 10000.0);
      const auto ref = ref_rope(x, pos, inv_freq, inverse);
      be->rope(x, int_tensor(pos, {c.M}), inv_freq, inverse);
      EXPECT_CLOSE(x, ref);
    }
  }
}

TEST_F(NormRope, RopeInverseUndoesForward) {
  SEED_TRACE();
  Rng rng;
  Tensor x = rand_tensor(rng, {9, 4, 96});
  const auto orig = to_double(x);
  std::vector<int32_t> pos(9);
  for (auto& p : pos) p = static_cast<int32_t>(rng.integer(0, 5000));
  Tensor positions = int_tensor(pos, {9}), inv_freq = make_inv_freq(16, 160000.0);
  be->rope(x, positions, inv_freq, false);
  EXPECT_GT(rel_err(x, orig), 1e-2);
  be->rope(x, positions, inv_freq, true);
  EXPECT_CLOSE(x, orig);
  // The leading (nope) dims are untouched bit for bit.
  for (int64_t r = 0; r < 36; ++r)
    for (int64_t d = 0; d < 96 - 32; ++d)
      ASSERT_EQ(x.data_as<float>()[r * 96 + d], static_cast<float>(orig[r * 96 + d]));
}

TEST_F(NormRope, RopeRejectsBadShapes) {
  EXPECT_THROW(be->rope(make({2, 3, 8}), make({2}, DType::kI32), make({5}), false), Error);
  EXPECT_THROW(be->rope(make({2, 3, 8}), make({3}, DType::kI32), make({4}), false), Error);
  EXPECT_THROW(be->rope(make({2, 3, 8}), make({2}), make({4}), false), Error);  // F32 positions
}

}  // namespace
}  // namespace deepinfer::test
