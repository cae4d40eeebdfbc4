// Products' operands written in bf16 by their producers (Backend::product_input_dtype,
// DEEPINFER_CUDA_BF16_PRODUCT_INPUTS): rms_norm, swiglu, grouped_matmul and the mHC sites' normed
// rows in bf16 are their fp32 outputs rounded to bf16 bit for bit; moe_experts from bf16 x is
// moe_experts from the fp32 x it rounds; and a prefill forward's logits are the same bits with the
// switch on and off. Skips without a GPU.
#include <array>
#include <vector>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"
#include "model/deepseek_v4/model.h"
#include "random_model.h"

namespace deepinfer::cudatest {
namespace {

using ProductInputs = CudaVsCpu;

// The bits of a device tensor.
std::vector<uint16_t> bf16_bits(Backend& g, const TensorView& d) {
  const Tensor h = to_host(g, d);
  const auto* p = static_cast<const uint16_t*>(h.view().data());
  return std::vector<uint16_t>(p, p + h.numel());
}
// The bits of an fp32 device tensor rounded to bf16 on the host.
std::vector<uint16_t> rounded_bits(Backend& g, const TensorView& d) {
  const Tensor h = to_host(g, d);
  std::vector<uint16_t> r(static_cast<size_t>(h.numel()));
  for (int64_t i = 0; i < h.numel(); ++i) r[i] = f32_to_bf16(h.data_as<float>()[i]);
  return r;
}

TEST_F(ProductInputs, DtypeFollowsRowsAndTheSwitch) {
  EXPECT_EQ(cpu->product_input_dtype(1 << 20), DType::kF32);
  EXPECT_EQ(gpu->product_input_dtype(cuda::kDenseGemmMaxRows), DType::kF32);  // decode tiles
  EXPECT_EQ(gpu->product_input_dtype(cuda::kDenseGemmMaxRows + 1), DType::kBF16);
  EXPECT_TRUE(set_cuda_bf16_product_inputs(*gpu, false));
  EXPECT_EQ(gpu->product_input_dtype(4096), DType::kF32);
  EXPECT_FALSE(set_cuda_bf16_product_inputs(*gpu, true));
}

TEST_F(ProductInputs, NormAndSwigluBf16OutputsAreTheirRoundedFp32Outputs) {
  SEED_TRACE();
  // [300, 1024]: the float4 kernel; [5, 1001]: the any-width one.
  for (auto shape : std::vector<std::vector<int64_t>>{{300, 1024}, {5, 1001}}) {
    for (bool weighted : {true, false}) {
      Rng rng;
      const Tensor x = to_dev(*gpu, rand_host(rng, shape, -3.f, 3.f));
      const Tensor w = to_dev(*gpu, rand_host(rng, {shape.back()}));
      const TensorView wv = weighted ? w.view() : TensorView();
      Tensor f32 = dev_poisoned(*gpu, shape), b16 = dev_empty(*gpu, shape, DType::kBF16);
      gpu->rms_norm(x, wv, 1e-6f, f32);
      gpu->rms_norm(x, wv, 1e-6f, b16);
      EXPECT_TRUE(bf16_bits(*gpu, b16) == rounded_bits(*gpu, f32)) << shape[1] << " " << weighted;
    }
  }
  Rng rng;
  const Tensor g = to_dev(*gpu, rand_host(rng, {17, 333}, -6.f, 6.f)),
               u = to_dev(*gpu, rand_host(rng, {17, 333}, -6.f, 6.f));
  for (float limit : {0.f, 4.f}) {
    Tensor f32 = dev_poisoned(*gpu, {17, 333}), b16 = gpu->empty({17, 333}, DType::kBF16);
    gpu->swiglu(g, u, limit, f32);
    gpu->swiglu(g, u, limit, b16);
    EXPECT_TRUE(bf16_bits(*gpu, b16) == rounded_bits(*gpu, f32)) << "swiglu " << limit;
  }
  // bf16 output takes the input's shape like fp32 does; other dtypes are refused.
  Tensor wrong = gpu->empty({17, 332}, DType::kBF16), i32 = gpu->empty({17, 333}, DType::kI32);
  EXPECT_THROW(gpu->swiglu(g, u, 0.f, wrong), Error);
  EXPECT_THROW(gpu->rms_norm(g, TensorView(), 1e-6f, i32), Error);
  Tensor on_cpu = host({17, 333}, DType::kBF16);
  EXPECT_THROW(cpu->rms_norm(to_host(*gpu, g), TensorView(), 1e-6f, on_cpu), Error);
}

// grouped_matmul into bf16 (V4's wo_a for wo_b): cuBLASLt's rows written rounded with the fp32
// output's algorithm, the tile kernels' rows rounded after; from fp32 and bf16 x.
TEST_F(ProductInputs, GroupedMatmulBf16OutIsItsRoundedFp32Out) {
  SEED_TRACE();
  Tensor w = gpu->empty({8 * 512, 1024}, DType::kBF16);
  gpu->fill_random(w, 6, -0.05f, 0.05f);
  for (int64_t M : {5, 300, 1000}) {
    Rng rng;
    const Tensor xh = rand_host(rng, {M, 8, 1024});
    for (bool x_bf16 : {false, true}) {
      const Tensor x = to_dev(*gpu, xh, x_bf16);
      Tensor f32 = dev_poisoned(*gpu, {M, 8, 512}), b16 = gpu->empty({M, 8, 512}, DType::kBF16);
      gpu->grouped_matmul(x, w, f32);
      gpu->grouped_matmul(x, w, b16);
      EXPECT_TRUE(bf16_bits(*gpu, b16) == rounded_bits(*gpu, f32)) << M << " " << x_bf16;
    }
  }
  Tensor w32 = gpu->empty({8 * 16, 64});
  gpu->fill_random(w32, 7, -0.05f, 0.05f);
  Tensor b16 = gpu->empty({300, 8, 16}, DType::kBF16);
  Rng rng;
  EXPECT_THROW(gpu->grouped_matmul(to_dev(*gpu, rand_host(rng, {300, 8, 64})), w32, b16), Error);
}

// hc_pre_norm / hc_post_pre_norm into bf16 normed rows: the fused kernels (prefill and decode
// rows), the norm after hc_pre (over 4096 columns), the expansion forming the mixing sums (up to 8
// rows) and the two ops in turn.
TEST_F(ProductInputs, HcNormedBf16RowsAreTheRoundedFp32Rows) {
  SEED_TRACE();
  for (auto [M, hc, D] : std::vector<std::array<int64_t, 3>>{
           {300, 4, 4096}, {3, 4, 4096}, {2, 4, 4100}, {5, 4, 1024}}) {
    Rng rng;
    const int64_t nmix = (2 + hc) * hc;
    const Tensor X = to_dev(*gpu, rand_host(rng, {M, hc, D}, -2.f, 2.f));
    const Tensor fn = to_dev(*gpu, rand_host(rng, {nmix, hc * D}, -0.1f, 0.1f));
    const Tensor base = to_dev(*gpu, rand_host(rng, {nmix}));
    const Tensor scale = to_dev(*gpu, rand_host(rng, {3}, 0.5f, 2.f));
    const Tensor w = to_dev(*gpu, rand_host(rng, {D}, 0.5f, 1.5f));
    const Tensor y = to_dev(*gpu, rand_host(rng, {M, D}));
    const Tensor post = to_dev(*gpu, rand_host(rng, {M, hc}, 0.f, 2.f));
    const Tensor comb = to_dev(*gpu, rand_host(rng, {M, hc, hc}, 0.f, 1.f));
    for (int op = 0; op < 2; ++op) {  // hc_pre_norm, hc_post_pre_norm
      Tensor normed[2];
      for (int b = 0; b < 2; ++b) {
        normed[b] = b ? gpu->empty({M, D}, DType::kBF16) : dev_poisoned(*gpu, {M, D});
        Tensor p = dev_poisoned(*gpu, {M, hc}), c = dev_poisoned(*gpu, {M, hc, hc});
        if (op == 0) {
          gpu->hc_pre_norm(X, fn, base, scale, 20, 1e-6f, 1e-6f, w, normed[b], p, c);
        } else {
          Tensor out = dev_poisoned(*gpu, {M, hc, D});
          gpu->hc_post_pre_norm(X, y, post, comb, out, fn, base, scale, 20, 1e-6f, 1e-6f, w,
                                normed[b], p, c);
        }
      }
      EXPECT_TRUE(bf16_bits(*gpu, normed[1]) == rounded_bits(*gpu, normed[0]))
          << (op ? "hc_post_pre_norm " : "hc_pre_norm ") << M << " x " << D;
    }
  }
}

// moe_experts from bf16 x: what every path rounds fp32 x to, so the same bits from either
// (decode tiles, prefill tiles, wgmma, the host-planned path).
TEST_F(ProductInputs, MoeExpertsFromBf16XAreMoeExpertsFromFp32X) {
  SEED_TRACE();
  for (bool wgmma : wgmma_settings(*gpu))
    for (auto [M, D, I, E, k] : std::vector<std::array<int64_t, 5>>{{1, 64, 32, 8, 2},
                                                                    {300, 256, 128, 32, 4},
                                                                    {1100, 200, 328, 4, 2},
                                                                    {300, 64, 36, 8, 2}}) {
      SCOPED_TRACE(wgmma ? "wgmma" : "mma.sync");
      set_cuda_wgmma(*gpu, wgmma);
      Rng rng;
      const Tensor x = rand_host(rng, {M, D});
      const Tensor dw1 = to_dev(*gpu, rand_host(rng, {E, I, D}, -0.2f, 0.2f), true);
      const Tensor dw3 = to_dev(*gpu, rand_host(rng, {E, I, D}, -0.2f, 0.2f), true);
      const Tensor dw2 = to_dev(*gpu, rand_host(rng, {E, D, I}, -0.2f, 0.2f), true);
      std::vector<int32_t> id(M * k);
      for (auto& e : id) e = static_cast<int32_t>(rng.integer(0, E - 1));
      const Tensor idx = to_dev(*gpu, i32_host(id, {M, k}));
      const Tensor wts = to_dev(*gpu, rand_host(rng, {M, k}, 0.f, 1.f));
      std::vector<float> got[2];
      for (int b = 0; b < 2; ++b) {
        const Tensor xin = b ? to_dev(*gpu, x, true) : to_dev(*gpu, x);
        Tensor out = gpu->empty({M, D});
        gpu->fill_random(out, 3, -1.f, 1.f);  // accumulated into
        gpu->moe_experts(xin, idx, wts, {dw1, dw3, dw2}, 3.f, TensorView(), out);
        got[b] = floats(to_host(*gpu, out));
      }
      EXPECT_TRUE(got[0] == got[1]) << M << " " << D << " " << I << " " << E;
    }
}

// A prefill forward at V4-Flash layer shapes (past the decode tiles' rows) gives the same logits
// with its products' operands made by their producers and cast by the products.
TEST(ProductInputsModel, PrefillLogitsAreTheSameBitsEitherWay) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  const std::unique_ptr<deepseek_v4::Model> model = random_v4_flash(*gpu, {"csa", "hca"}, 7);
  const int64_t T = 300, V = model->config().vocab_size;
  std::vector<int32_t> ids(T);
  for (int64_t t = 0; t < T; ++t) ids[t] = static_cast<int32_t>((7919 * t + 11) % V);
  std::vector<float> logits[2];
  for (int b = 0; b < 2; ++b) {
    set_cuda_bf16_product_inputs(*gpu, b == 1);
    deepseek_v4::SequenceState st = model->new_state();
    const Tensor l = model->forward(ids, st);
    ASSERT_EQ(l.dim(0), T);
    logits[b] = std::vector<float>(l.data_as<float>(), l.data_as<float>() + l.numel());
  }
  EXPECT_TRUE(logits[0] == logits[1]);
}

}  // namespace
}  // namespace deepinfer::cudatest
