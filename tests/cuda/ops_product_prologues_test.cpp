// Products that form their operand themselves (rms_norm_matmul: a decode step's low-rank query
// products; swiglu_matmul: the shared expert's w2): bitwise the op then matmul on the GPU,
// fused or not, and near the CPU's.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace deepinfer::cudatest {
namespace {

using Ops = CudaVsCpu;

// Runs `op` into a poisoned output like want_h with the prologue switch on and off: each time
// want_h's bits, and one prologue call counted where on and the shape is `fused`.
void expect_both_ways(Backend& gpu, const Tensor& want_h, bool fused, const std::string& how,
                      const std::function<void(const Tensor&)>& op) {
  for (bool allow : {true, false}) {
    const bool was = set_cuda_product_prologues(gpu, allow);
    const int64_t calls = cuda_product_prologue_calls(gpu);
    Tensor got = dev_poisoned(gpu, shape_of(want_h));
    op(got);
    set_cuda_product_prologues(gpu, was);
    EXPECT_EQ(cuda_product_prologue_calls(gpu) - calls, allow && fused ? 1 : 0)
        << how << " allowed " << allow;
    const Tensor got_h = to_host(gpu, got);
    EXPECT_EQ(0, std::memcmp(got_h.data_as<float>(), want_h.data_as<float>(), want_h.numel() * 4))
        << how << " allowed " << allow;
  }
}

TEST_F(Ops, RmsNormMatmulIsRmsNormThenMatmul) {
  SEED_TRACE();
  struct Shape {
    int64_t M, N, K;
    bool inside;  // norms_inside_products: for any N (the unsplit product's rows fit)
    bool fused;   // normed inside this product (a split one's segments may fit where K does not)
  };
  for (const Shape& sh : std::vector<Shape>{{1, 32768, 1024, true, true},  // wq_b
                                            {1, 8192, 1024, true, true},   // the indexer's
                                            {4, 2048, 1024, true, true},
                                            {2, 300, 4096, false, true},   // K split, a column tail
                                            {1, 64, 200, true, true},      // a k tail
                                            {5, 2048, 1024, false, true},  // split: 512 a segment
                                            {16, 2048, 1024, false, false},  // past the rows
                                            {1, 512, 8192, false, false},    // past rms_norm4's
                                            {1, 512, 6, false, false}}) {    // K % 4 != 0
    const int64_t M = sh.M, N = sh.N, K = sh.K;
    const bool was = set_cuda_product_prologues(*gpu, true);
    EXPECT_EQ(gpu->norms_inside_products(M, K), sh.inside) << M << "x" << K;
    set_cuda_product_prologues(*gpu, false);
    EXPECT_FALSE(gpu->norms_inside_products(M, K)) << M << "x" << K << " switched off";
    set_cuda_product_prologues(*gpu, was);
    Rng rng;
    const Tensor wh = rand_host(rng, {N, K}, -0.05f, 0.05f), w = to_dev(*gpu, wh, true);
    const Tensor xh = rand_host(rng, {M, K}, -3.f, 3.f), gh = rand_host(rng, {K}, 0.5f, 1.5f);
    const Tensor x = to_dev(*gpu, xh), g = to_dev(*gpu, gh);
    for (bool weighted : {true, false}) {
      const TensorView nw = weighted ? g.view() : TensorView();
      const std::string how = fmt::format("{}x{}x{} weighted {}", M, N, K, weighted);
      // rms_norm, then matmul.
      Tensor normed = gpu->empty({M, K}, gpu->product_input_dtype(M));
      gpu->rms_norm(x, nw, 1e-6f, normed);
      Tensor want = dev_poisoned(*gpu, {M, N});
      gpu->matmul(normed, w, want);
      const Tensor want_h = to_host(*gpu, want);
      expect_both_ways(*gpu, want_h, sh.fused, how,
                       [&](const Tensor& got) { gpu->rms_norm_matmul(x, nw, 1e-6f, w, got); });
      // Near the CPU's fp32 product of the same bf16 weights (the GPU rounds its operand).
      Tensor ref = host({M, N});
      cpu->rms_norm_matmul(xh, weighted ? gh.view() : TensorView(), 1e-6f, round_bf16(wh), ref);
      EXPECT_LE(rel_err(want_h, ref), kTolBf16) << how;
    }
  }
}

TEST_F(Ops, SwigluMatmulIsSwigluThenMatmul) {
  SEED_TRACE();
  struct Shape {
    int64_t M, N, K;
    bool fused;
  };
  for (const Shape& sh : std::vector<Shape>{{1, 4096, 2048, true},  // V4's shared w2, K split
                                            {4, 1000, 2048, true},
                                            {2, 64, 200, true},      // a k tail
                                            {16, 512, 1024, false},  // past the resident rows
                                            {1, 64, 6, false}}) {    // K % 4 != 0
    const int64_t M = sh.M, N = sh.N, K = sh.K;
    Rng rng;
    const Tensor wh = rand_host(rng, {N, K}, -0.05f, 0.05f), w = to_dev(*gpu, wh, true);
    const Tensor gh = rand_host(rng, {M, K}, -12.f, 12.f), uh = rand_host(rng, {M, K}, -12.f, 12.f);
    const Tensor gate = to_dev(*gpu, gh), up = to_dev(*gpu, uh);
    for (float limit : {10.f, 0.f}) {  // V4 clamps at 10; 0: no clamp
      const std::string how = fmt::format("{}x{}x{} limit {}", M, N, K, limit);
      Tensor act = gpu->empty({M, K}, gpu->product_input_dtype(M));
      gpu->swiglu(gate, up, limit, act);
      Tensor want = dev_poisoned(*gpu, {M, N});
      gpu->matmul(act, w, want);
      const Tensor want_h = to_host(*gpu, want);
      expect_both_ways(*gpu, want_h, sh.fused, how,
                       [&](const Tensor& got) { gpu->swiglu_matmul(gate, up, limit, w, got); });
      Tensor ref = host({M, N});
      cpu->swiglu_matmul(gh, uh, limit, round_bf16(wh), ref);
      EXPECT_LE(rel_err(want_h, ref), kTolBf16) << how;
    }
  }
}

TEST_F(Ops, ProductProloguesRejectBadShapes) {
  Rng rng;
  const Tensor w = to_dev(*gpu, rand_host(rng, {64, 128}), true);
  const Tensor x = to_dev(*gpu, rand_host(rng, {1, 128}));
  Tensor out = gpu->empty({1, 64});
  EXPECT_THROW(gpu->rms_norm_matmul(x, to_dev(*gpu, rand_host(rng, {127})), 1e-6f, w, out),
               Error);  // norm weight of the wrong width
  Tensor bad_out = gpu->empty({1, 63});
  EXPECT_THROW(gpu->rms_norm_matmul(x, TensorView(), 1e-6f, w, bad_out), Error);
  const Tensor x3 = to_dev(*gpu, rand_host(rng, {1, 1, 128}));
  EXPECT_THROW(gpu->rms_norm_matmul(x3, TensorView(), 1e-6f, w, out), Error);
  // swiglu_matmul: up not like gate, the wrong out
  EXPECT_THROW(gpu->swiglu_matmul(x, to_dev(*gpu, rand_host(rng, {1, 64})), 10.f, w, out), Error);
  EXPECT_THROW(gpu->swiglu_matmul(x, x, 10.f, w, bad_out), Error);
}

}  // namespace
}  // namespace deepinfer::cudatest
