// CUDA vs CPU: route (three scoring functions, bias, hash routing) and moe_experts (bf16 expert
// weights, accumulation into out, out-of-range experts rejected).
#include <array>
#include <cstring>

#include "backend/cuda/kernels.h"
#include "common/mxfp4_experts.h"
#include "cuda_test_util.h"

namespace deepinfer::cudatest {
namespace {

using Moe = CudaVsCpu;

// The router's selection value of expert e for row m, recomputed in double (for tie checks).
double selection_value(const float* x, int64_t E, ScoringFunc f, const float* bias, int64_t e) {
  double s = 0;
  if (f == ScoringFunc::kSoftmax) {
    double mx = x[0], sum = 0;
    for (int64_t i = 1; i < E; ++i) mx = std::max<double>(mx, x[i]);
    for (int64_t i = 0; i < E; ++i) sum += std::exp(x[i] - mx);
    s = std::exp(x[e] - mx) / sum;
  } else if (f == ScoringFunc::kSigmoid) {
    s = 1 / (1 + std::exp(-double(x[e])));
  } else {
    s = std::sqrt(x[e] > 20 ? double(x[e]) : std::log1p(std::exp(double(x[e]))));
  }
  return s + (bias ? bias[e] : 0.0);
}

TEST_F(Moe, RouteMatchesCpu) {
  SEED_TRACE();
  for (ScoringFunc f : {ScoringFunc::kSoftmax, ScoringFunc::kSigmoid, ScoringFunc::kSqrtSoftplus}) {
    for (int mode = 0; mode < 3; ++mode) {  // 0: plain top-k, 1: with bias, 2: hash
      for (auto [M, E, k] :
           std::vector<std::array<int64_t, 3>>{{1, 8, 2}, {37, 64, 6}, {5, 256, 8}}) {
        Rng rng;
        const Tensor logits = rand_host(rng, {M, E}, -4.f, 30.f);
        const Tensor bias = rand_host(rng, {E}, -0.5f, 0.5f);
        const int64_t V = 50;
        std::vector<int32_t> table(V * k), id(M);
        for (auto& t : table) t = static_cast<int32_t>(rng.integer(0, E - 1));
        for (auto& t : id) t = static_cast<int32_t>(rng.integer(0, V - 1));
        const Tensor tid2eid = i32_host(table, {V, k}), ids = i32_host(id, {M});
        const bool hash = mode == 2, biased = mode == 1;
        Tensor rw = host({M, k}), ri = host({M, k}, DType::kI32);
        cpu->route(logits, f, biased ? bias.view() : TensorView(),
                   hash ? tid2eid.view() : TensorView(), ids, 1.5f, rw, ri);
        Tensor db = to_dev(*gpu, bias), dt = to_dev(*gpu, tid2eid), di = to_dev(*gpu, ids);
        Tensor w = dev_poisoned(*gpu, {M, k}), i = dev_poisoned(*gpu, {M, k}, DType::kI32);
        gpu->route(to_dev(*gpu, logits), f, biased ? db.view() : TensorView(),
                   hash ? dt.view() : TensorView(), di, 1.5f, w, i);
        const std::vector<int32_t> got = ints(to_host(*gpu, i)), want = ints(ri);
        // Indices must agree except where two candidates tie to within rounding.
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < k; ++j) {
            const int32_t a = got[m * k + j], b = want[m * k + j];
            if (a == b) continue;
            ASSERT_GE(a, 0);
            const float* x = logits.data_as<float>() + m * E;
            const float* bp = biased ? bias.data_as<float>() : nullptr;
            EXPECT_NEAR(selection_value(x, E, f, bp, a), selection_value(x, E, f, bp, b), 1e-5)
                << "row " << m << " slot " << j;
          }
        EXPECT_LE(rel_err(to_host(*gpu, w), rw), kTolF32)
            << "func " << int(f) << " mode " << mode << " E " << E;
      }
    }
  }
}

TEST_F(Moe, MoeExpertsMatchCpu) {
  SEED_TRACE();
  for (bool wgmma : wgmma_settings(*gpu))
    for (auto [M, D, I, E, k] : std::vector<std::array<int64_t, 5>>{
             {1, 64, 32, 8, 2},
             {7, 64, 96, 16, 6},
             {64, 128, 64, 8, 2},
             {200, 256, 64, 256, 6},  // many experts, some empty
             {300, 256, 128, 32, 4},  // prefill tiles, partial tiles
             {700, 72, 40, 4, 2},     // several full row tiles per expert, K tails
             {1100, 200, 328, 4, 2},  // wgmma: 4-5 128-row tiles per expert, partial column tiles
             {300, 64, 36, 8, 2},     // I not a multiple of 8: host-planned cuBLAS path
             {50, 66, 40, 8, 2}}) {   // D not a multiple of 4 either: the scalar combine
      SCOPED_TRACE(wgmma ? "wgmma" : "mma.sync");
      set_cuda_wgmma(*gpu, wgmma);
      Rng rng;
      const Tensor x = rand_host(rng, {M, D});
      const Tensor w1 = rand_host(rng, {E, I, D}, -0.2f, 0.2f);
      const Tensor w3 = rand_host(rng, {E, I, D}, -0.2f, 0.2f);
      const Tensor w2 = rand_host(rng, {E, D, I}, -0.2f, 0.2f);
      std::vector<int32_t> id(M * k);
      for (auto& e : id) e = static_cast<int32_t>(rng.integer(0, E - 1));
      const Tensor idx = i32_host(id, {M, k}), wts = rand_host(rng, {M, k}, 0.f, 1.f);
      const Tensor init = rand_host(rng, {M, D});
      Tensor ref = host({M, D});
      std::copy_n(init.data_as<float>(), M * D, ref.data_as<float>());
      cpu->moe_experts(x, idx, wts, {round_bf16(w1), round_bf16(w3), round_bf16(w2)}, 3.f,
                       TensorView(), ref);
      Tensor dw1 = to_dev(*gpu, w1, true), dw3 = to_dev(*gpu, w3, true),
             dw2 = to_dev(*gpu, w2, true);
      Tensor out = to_dev(*gpu, init);  // accumulated into
      gpu->moe_experts(to_dev(*gpu, x), to_dev(*gpu, idx), to_dev(*gpu, wts), {dw1, dw3, dw2}, 3.f,
                       TensorView(), out);
      // The error is measured on the experts' contribution, not on the initial values.
      Tensor got = to_host(*gpu, out), delta_ref = host({M, D}), delta = host({M, D});
      for (int64_t i = 0; i < M * D; ++i) {
        delta_ref.data_as<float>()[i] = ref.data_as<float>()[i] - init.data_as<float>()[i];
        delta.data_as<float>()[i] = got.data_as<float>()[i] - init.data_as<float>()[i];
      }
      EXPECT_LE(rel_err(delta, delta_ref), kTolBf16) << M << " " << D << " " << I << " " << E;
      if (M == 7 || M == 300) {
        // Device path: found on the device, reported at the next sync; host path: at the call.
        id[5] = static_cast<int32_t>(E);
        EXPECT_THROW(
            {
              gpu->moe_experts(to_dev(*gpu, x), to_dev(*gpu, i32_host(id, {M, k})),
                               to_dev(*gpu, wts), {dw1, dw3, dw2}, 3.f, TensorView(), out);
              to_host(*gpu, out);
            },
            Error);
      }
    }
}

Tensor zeros_host(std::vector<int64_t> shape) {
  Tensor t = host(std::move(shape));
  std::fill_n(t.data_as<float>(), t.numel(), 0.f);
  return t;
}

using testing_mxfp4::Mxfp4Matrices;
using testing_mxfp4::random_mxfp4;

// MXFP4-resident experts give the bits of the same experts dequantised to bf16 on every tile
// path: the narrow decode tiles (batch 1 with its combine in the down GEMM), the 64-row mma.sync
// tiles and the wgmma tiles (weights widened in registers, the products transposed).
TEST_F(Moe, Mxfp4ExpertsGiveTheBitsOfTheirDequantisedWeights) {
  SEED_TRACE();
  for (bool wgmma : wgmma_settings(*gpu))
    for (auto [M, D, I, E, k] : std::vector<std::array<int64_t, 5>>{
             {1, 128, 64, 8, 2},         // narrow tiles, combined in the down GEMM
             {7, 128, 192, 16, 6},       // narrow tiles
             {300, 256, 128, 32, 4},     // prefill tiles, partial row tiles
             {1100, 192, 320, 4, 2}}) {  // several row tiles an expert, partial column tiles
      SCOPED_TRACE(testing::Message() << (wgmma ? "wgmma" : "mma.sync") << " M=" << M);
      set_cuda_wgmma(*gpu, wgmma);
      ASSERT_TRUE(gpu->takes_mxfp4_experts(E, I, D));
      Rng rng;
      const Mxfp4Matrices w1 = random_mxfp4(rng, E, I, D), w3 = random_mxfp4(rng, E, I, D),
                          w2 = random_mxfp4(rng, E, D, I);
      // x exact in bf16, so that the CPU's reference differs from the device's only by its bf16
      // rounding of the swiglu output (x's rounding as well put ~2% of the batch-1 draws past
      // the tolerance).
      Tensor x = rand_host(rng, {M, D}, -0.05f, 0.05f);
      for (int64_t i = 0; i < M * D; ++i)
        x.data_as<float>()[i] = bf16_to_f32(f32_to_bf16(x.data_as<float>()[i]));
      std::vector<int32_t> id(M * k);
      for (auto& e : id) e = static_cast<int32_t>(rng.integer(0, E - 1));
      const Tensor idx = to_dev(*gpu, i32_host(id, {M, k}));
      const Tensor wts = to_dev(*gpu, rand_host(rng, {M, k}, 0.f, 1.f));
      const Tensor init = rand_host(rng, {M, D}), dx = to_dev(*gpu, x);
      Tensor wide_out = to_dev(*gpu, init), packed_out = to_dev(*gpu, init);
      const Tensor b1 = to_dev(*gpu, w1.wide, true), b3 = to_dev(*gpu, w3.wide, true),
                   b2 = to_dev(*gpu, w2.wide, true);
      gpu->moe_experts(dx, idx, wts, {b1, b3, b2}, 7.f, TensorView(), wide_out);
      const Tensor q1 = to_dev(*gpu, w1.packed), q3 = to_dev(*gpu, w3.packed),
                   q2 = to_dev(*gpu, w2.packed), s1 = to_dev(*gpu, w1.scales),
                   s3 = to_dev(*gpu, w3.scales), s2 = to_dev(*gpu, w2.scales);
      for (const Tensor* q : {&q1, &q3, &q2}) gpu->prepare_mxfp4_experts(q->view());
      gpu->moe_experts(dx, idx, wts, {q1, q3, q2, s1, s3, s2}, 7.f, TensorView(), packed_out);
      const Tensor a = to_host(*gpu, wide_out), b = to_host(*gpu, packed_out);
      int64_t differ = 0;
      for (int64_t i = 0; i < M * D; ++i)
        differ +=
            a.data_as<float>()[i] != b.data_as<float>()[i] || std::isnan(b.data_as<float>()[i]);
      EXPECT_EQ(differ, 0) << "of " << M * D << " outputs";
      // The values are the experts' too (not just equal to the bf16 path's): the contribution
      // against the CPU's from the same MXFP4 experts.
      Tensor ref = zeros_host({M, D}), delta = host({M, D});
      cpu->moe_experts(x, to_host(*gpu, idx), to_host(*gpu, wts),
                       {w1.packed, w3.packed, w2.packed, w1.scales, w3.scales, w2.scales}, 7.f,
                       TensorView(), ref);
      for (int64_t i = 0; i < M * D; ++i)
        delta.data_as<float>()[i] = b.data_as<float>()[i] - init.data_as<float>()[i];
      EXPECT_LE(rel_err(delta, ref), kTolBf16);
    }
  // Shapes the kernels do not take are refused, not run.
  EXPECT_FALSE(gpu->takes_mxfp4_experts(8, 96, 128));
  EXPECT_FALSE(gpu->takes_mxfp4_experts(8, 128, 96));
}

// The resident order (backend/cuda/mxfp4.cuh): every byte of a 64-value k tile moves to where the
// MMA fragments' thread column t reads it, its two codes split between the low and high halves
// of a word; rows of other widths are refused.
TEST_F(Moe, Mxfp4ResidentOrderPutsEachThreadsPairsInOneRun) {
  SEED_TRACE();
  Rng rng;
  const int64_t E = 3, rows = 5, cols = 128;
  Tensor packed = host({E, rows, cols}, DType::kFP4E2M1);
  uint8_t* in = packed.data_as<uint8_t>();
  for (int64_t i = 0; i < E * rows * cols / 2; ++i)
    in[i] = static_cast<uint8_t>(rng.integer(0, 255));
  const Tensor dev = to_dev(*gpu, packed);
  gpu->prepare_mxfp4_experts(dev.view());
  const Tensor out = to_host(*gpu, dev);
  const auto* res = out.data_as<uint8_t>();
  int64_t wrong = 0;
  for (int64_t tile = 0; tile < E * rows * cols / 64; ++tile)
    for (int t = 0; t < 4; ++t)
      for (int c = 0; c < 4; ++c)
        for (int hi = 0; hi < 2; ++hi) {
          // Values 16 c + 2 t + 8 hi and + 1: byte 8 c + 4 hi + t of the checkpoint's tile; in
          // word c / 2 of run t, pair i = 2 (c % 2) + hi: nibbles i and 4 + i.
          const uint8_t b = in[tile * 32 + 8 * c + 4 * hi + t];
          uint32_t word;
          std::memcpy(&word, res + tile * 32 + 8 * t + 4 * (c / 2), 4);
          const int i = 2 * (c % 2) + hi;
          wrong +=
              ((word >> (4 * i)) & 15) != (b & 15u) || ((word >> (16 + 4 * i)) & 15) != (b >> 4);
        }
  EXPECT_EQ(wrong, 0);
  const Tensor narrow = to_dev(*gpu, host({1, 2, 96}, DType::kFP4E2M1));
  EXPECT_THROW(gpu->prepare_mxfp4_experts(narrow.view()), Error);
}

// A token's expert output does not depend on the other tokens of the batch (bitwise): what the
// engine's determinism per seq_seed rests on. The batch of 40 (80 rows over 8 experts) runs the
// prefill tiles (wgmma's, then the mma.sync ones), the batch of 12 the narrow decode tiles with
// a few rows each, and each single row the narrow tiles alone: all must give the same bits.
TEST_F(Moe, MoeExpertsRowsAreBatchInvariant) {
  SEED_TRACE();
  for (bool wgmma : wgmma_settings(*gpu)) {
    SCOPED_TRACE(wgmma ? "wgmma" : "mma.sync");
    set_cuda_wgmma(*gpu, wgmma);
    Rng rng;
    const int64_t M = 40, D = 136, I = 64, E = 8, k = 2;  // D: two 64-wide k tiles and a tail
    const Tensor x = rand_host(rng, {M, D});
    Tensor dw1 = to_dev(*gpu, rand_host(rng, {E, I, D}, -0.2f, 0.2f), true);
    Tensor dw3 = to_dev(*gpu, rand_host(rng, {E, I, D}, -0.2f, 0.2f), true);
    Tensor dw2 = to_dev(*gpu, rand_host(rng, {E, D, I}, -0.2f, 0.2f), true);
    std::vector<int32_t> id(M * k);
    for (auto& e : id) e = static_cast<int32_t>(rng.integer(0, E - 1));
    const Tensor wts = rand_host(rng, {M, k}, 0.f, 1.f);
    // Rows [0, n) as one batch.
    auto run = [&](int64_t m0, int64_t n) {
      Tensor xm = host({n, D}), wm = host({n, k});
      std::copy_n(x.data_as<float>() + m0 * D, n * D, xm.data_as<float>());
      std::copy_n(wts.data_as<float>() + m0 * k, n * k, wm.data_as<float>());
      const std::vector<int32_t> im(id.begin() + m0 * k, id.begin() + (m0 + n) * k);
      Tensor out = to_dev(*gpu, zeros_host({n, D}));
      gpu->moe_experts(to_dev(*gpu, xm), to_dev(*gpu, i32_host(im, {n, k})), to_dev(*gpu, wm),
                       {dw1, dw3, dw2}, 3.f, TensorView(), out);
      return floats(to_host(*gpu, out));
    };
    const std::vector<float> all = run(0, M), some = run(0, 12);
    for (int64_t m = 0; m < M; m += 7) {
      const std::vector<float> one = run(m, 1);
      for (int64_t d = 0; d < D; ++d) {
        ASSERT_EQ(one[d], all[m * D + d]) << m << " " << d;
        if (m < 12) {
          ASSERT_EQ(one[d], some[m * D + d]) << "batch of 12, " << m << " " << d;
        }
      }
    }
  }
}

// E random experts' bf16 weights on the device (w1, w3 [E, I, D], w2 [E, D, I]).
struct DeviceExperts {
  Tensor w1, w3, w2;
};
DeviceExperts random_device_experts(Backend& gpu, Rng& rng, int64_t E, int64_t I, int64_t D) {
  DeviceExperts ex;
  ex.w1 = to_dev(gpu, rand_host(rng, {E, I, D}, -0.2f, 0.2f), true);
  ex.w3 = to_dev(gpu, rand_host(rng, {E, I, D}, -0.2f, 0.2f), true);
  ex.w2 = to_dev(gpu, rand_host(rng, {E, D, I}, -0.2f, 0.2f), true);
  return ex;
}

// n expert ids in [0, E).
std::vector<int32_t> random_ids(Rng& rng, int64_t n, int64_t E) {
  std::vector<int32_t> id(n);
  for (auto& e : id) e = static_cast<int32_t>(rng.integer(0, E - 1));
  return id;
}

// moe_experts with its plan made ahead (moe_plan, as the model does on the router's side branch)
// gives the bits it gives planning by itself, on the decode and the prefill tiles; a plan made
// for another idx shape is refused.
TEST_F(Moe, MoeExpertsWithAPlanMadeAheadAreTheSame) {
  SEED_TRACE();
  for (bool wgmma : wgmma_settings(*gpu))
    for (const int64_t M : {int64_t{1}, int64_t{5}, int64_t{300}}) {
      SCOPED_TRACE(testing::Message() << (wgmma ? "wgmma " : "mma.sync ") << M);
      set_cuda_wgmma(*gpu, wgmma);
      Rng rng;
      const int64_t D = 136, I = 64, E = 8, k = 2;
      const Tensor x = to_dev(*gpu, rand_host(rng, {M, D}));
      const DeviceExperts ex = random_device_experts(*gpu, rng, E, I, D);
      const Tensor &dw1 = ex.w1, &dw3 = ex.w3, &dw2 = ex.w2;
      const std::vector<int32_t> id = random_ids(rng, M * k, E);
      const Tensor idx = to_dev(*gpu, i32_host(id, {M, k}));
      const Tensor wts = to_dev(*gpu, rand_host(rng, {M, k}, 0.f, 1.f));
      Tensor alone = to_dev(*gpu, zeros_host({M, D})), ahead = to_dev(*gpu, zeros_host({M, D}));
      gpu->moe_experts(x, idx, wts, {dw1, dw3, dw2}, 3.f, TensorView(), alone);
      const Tensor plan = gpu->moe_plan(idx, E);
      ASSERT_TRUE(plan.defined());
      gpu->moe_experts(x, idx, wts, {dw1, dw3, dw2}, 3.f, plan, ahead);
      EXPECT_TRUE(floats(to_host(*gpu, alone)) == floats(to_host(*gpu, ahead)));
      const Tensor other = gpu->moe_plan(idx.view().slice_rows(0, (M + 1) / 2), E);
      if (M > 1)
        EXPECT_THROW(gpu->moe_experts(x, idx, wts, {dw1, dw3, dw2}, 3.f, other, ahead), Error);
    }
  set_cuda_wgmma(*gpu, true);
}

// A prefill batch with more (tile, column tile) items than the device has SMs (more than one
// wave of the wgmma kernels' blocks): every output is still the mma.sync tiles' bits with the
// up GEMM's blocks alone or in clusters of 2 or 4 sharing weight tiles by multicast (experts
// here average 4 tiles, so clusters are on), and a second call gives the same again.
TEST_F(Moe, MoeExpertsWithMoreItemsThanSmsAreTheMmaSyncBits) {
  SEED_TRACE();
  if (!set_cuda_wgmma(*gpu, true)) GTEST_SKIP() << "no wgmma on this device";
  Rng rng;
  // 4096 rows over 8 experts: ~40 row tiles x 4 column tiles of 256 = ~160 down items (up:
  // 2 column tiles of 128 features, ~80); an uneven split so that experts end mid-tile and
  // some clusters span two experts.
  const int64_t M = 2048, D = 1024, I = 256, E = 8, k = 2;
  const Tensor x = to_dev(*gpu, rand_host(rng, {M, D}));
  const DeviceExperts ex = random_device_experts(*gpu, rng, E, I, D);
  std::vector<int32_t> id = random_ids(rng, M * k, E);
  for (int64_t i = 0; i < M * k; i += 3) id[i] = static_cast<int32_t>(i % 3);
  const Tensor idx = to_dev(*gpu, i32_host(id, {M, k}));
  const Tensor wts = to_dev(*gpu, rand_host(rng, {M, k}, 0.f, 1.f));
  auto run = [&] {
    Tensor out = to_dev(*gpu, zeros_host({M, D}));
    gpu->moe_experts(x, idx, wts, {ex.w1, ex.w3, ex.w2}, 3.f, TensorView(), out);
    return floats(to_host(*gpu, out));
  };
  set_cuda_wgmma(*gpu, false);
  const std::vector<float> want = run();
  set_cuda_wgmma(*gpu, true);
  const int was = set_cuda_expert_cluster(*gpu, 1);
  for (const int cluster : {1, 2, 4}) {
    SCOPED_TRACE(cluster);
    set_cuda_expert_cluster(*gpu, cluster);
    EXPECT_TRUE(run() == want) << "wgmma vs mma.sync";
    EXPECT_TRUE(run() == want) << "a second call";
  }
  set_cuda_expert_cluster(*gpu, was);
}

TEST_F(Moe, ExpertClusterSizeMustBeOneTwoOrFour) {
  const int was = set_cuda_expert_cluster(*gpu, 4);
  EXPECT_THROW(set_cuda_expert_cluster(*gpu, 3), Error);
  EXPECT_THROW(set_cuda_expert_cluster(*gpu, 0), Error);
  EXPECT_EQ(set_cuda_expert_cluster(*gpu, was), 4) << "a bad size leaves the setting";
}

// The down GEMM's own combine (batch-1 decode, DEEPINFER_CUDA_DOWN_COMBINE) gives the combine
// kernel's bits: into a non-zero out, a partial last column tile, tokens picking one expert twice;
// twice in a row (its tile counters reset); past kMoeDownCombineMaxTokens the kernel runs.
TEST_F(Moe, DownGemmCombinesAsTheCombineKernel) {
  SEED_TRACE();
  const bool was = set_cuda_down_combine(*gpu, true);
  for (const int64_t M :
       {cuda::kMoeDownCombineMaxTokens, cuda::kMoeDownCombineMaxTokens + 1, int64_t{5}}) {
    SCOPED_TRACE(M);
    Rng rng;
    const int64_t D = 200, I = 64, E = 8, k = 3;
    const Tensor x = to_dev(*gpu, rand_host(rng, {M, D}));
    const DeviceExperts ex = random_device_experts(*gpu, rng, E, I, D);
    const Tensor &dw1 = ex.w1, &dw3 = ex.w3, &dw2 = ex.w2;
    std::vector<int32_t> id = random_ids(rng, M * k, E);
    id[0] = id[1];  // one token's two slots on one expert
    const Tensor idx = to_dev(*gpu, i32_host(id, {M, k}));
    const Tensor wts = to_dev(*gpu, rand_host(rng, {M, k}, 0.f, 1.f));
    const Tensor init = rand_host(rng, {M, D});
    Tensor out[2];
    for (int on = 0; on < 2; ++on) {
      set_cuda_down_combine(*gpu, on == 1);
      const int64_t calls = cuda_down_combines(*gpu);
      out[on] = to_dev(*gpu, init);
      gpu->moe_experts(x, idx, wts, {dw1, dw3, dw2}, 3.f, TensorView(), out[on]);
      EXPECT_EQ(cuda_down_combines(*gpu) - calls,
                on && M <= cuda::kMoeDownCombineMaxTokens ? 1 : 0);
    }
    const std::vector<float> want = floats(to_host(*gpu, out[0]));
    EXPECT_TRUE(want == floats(to_host(*gpu, out[1])));
    Tensor again = to_dev(*gpu, init);
    gpu->moe_experts(x, idx, wts, {dw1, dw3, dw2}, 3.f, TensorView(), again);
    EXPECT_TRUE(want == floats(to_host(*gpu, again))) << "a second call";
  }
  set_cuda_down_combine(*gpu, was);
}

}  // namespace
}  // namespace deepinfer::cudatest
