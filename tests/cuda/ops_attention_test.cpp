// CUDA vs CPU: window_pool, attention (window only, comp_idx with -1 / duplicates, comp_visible),
// indexer_scores and topk (ties -> lower index, -inf -> -1).
#include <array>

#include "cuda_test_util.h"

namespace deepinfer::cudatest {
namespace {

using Attn = CudaVsCpu;

TEST_F(Attn, WindowPoolMatchesCpu) {
  SEED_TRACE();
  for (auto [N, S, d] :
       std::vector<std::array<int64_t, 3>>{{1, 8, 512}, {37, 4, 65}, {500, 16, 32}}) {
    Rng rng;
    Tensor kv = rand_host(rng, {N, S, d}), gate = rand_host(rng, {N, S, d}, -4.f, 4.f);
    float* g = gate.data_as<float>();
    for (int64_t i = 0; i < N * S * d; i += 7) g[i] = -kInf;
    for (int64_t s = 0; s < S; ++s) g[s * d + 1] = -kInf;  // channel 1 of row 0: no weights
    Tensor ref = host({N, d});
    cpu->window_pool(kv, gate, ref);
    Tensor out = dev_poisoned(*gpu, {N, d});
    gpu->window_pool(to_dev(*gpu, kv), to_dev(*gpu, gate), out);
    const Tensor got = to_host(*gpu, out);
    EXPECT_LE(rel_err(got, ref), kTolF32);
    EXPECT_EQ(got.data_as<float>()[1], 0.f);
  }
}

enum class Comp { kNone, kIdx, kVisible };

struct AttnCase {
  int64_t M, H, hd, P, window, E, K;
  Comp comp;
};

TEST_F(Attn, AttentionMatchesCpu) {
  SEED_TRACE();
  const std::vector<AttnCase> cases = {
      {1, 4, 32, 0, 16, 0, 0, Comp::kNone},
      {6, 4, 32, 10, 8, 0, 0, Comp::kNone},
      {1, 8, 512, 127, 128, 40, 16, Comp::kIdx},
      {9, 4, 32, 5, 16, 12, 6, Comp::kIdx},
      {33, 2, 64, 0, 4, 70, 70, Comp::kIdx},
      {7, 3, 32, 3, 16, 5, 0, Comp::kVisible},
      {40, 16, 128, 20, 32, 10, 0, Comp::kVisible},
      {3, 2, 48, 0, 8, 4, 0, Comp::kIdx},
      // V4-Flash shapes: one query (the keys split over many blocks) and a batch of queries.
      {1, 64, 512, 127, 128, 2000, 512, Comp::kIdx},
      {24, 64, 512, 127, 128, 700, 512, Comp::kIdx},
      {2, 20, 256, 50, 64, 900, 0, Comp::kVisible},
  };
  for (const AttnCase& c : cases) {
    Rng rng;
    const Tensor q = rand_host(rng, {c.M, c.H, c.hd}), win = rand_host(rng, {c.P + c.M, c.hd});
    const Tensor sinks = rand_host(rng, {c.H}, -2.f, 2.f);
    Tensor comp = c.E > 0 ? rand_host(rng, {c.E, c.hd}) : Tensor();
    Tensor idx, vis;
    if (c.comp == Comp::kIdx) {
      std::vector<int32_t> v(c.M * c.K);
      for (auto& e : v) e = static_cast<int32_t>(rng.integer(-1, c.E - 1));  // -1: skipped
      if (c.K >= 2) v[1] = v[0];                                             // a duplicate
      idx = i32_host(v, {c.M, c.K});
    } else if (c.comp == Comp::kVisible) {
      std::vector<int32_t> v(c.M);
      for (auto& e : v) e = static_cast<int32_t>(rng.integer(0, c.E));
      vis = i32_host(v, {c.M});
    }
    const float scale = 1.f / std::sqrt(static_cast<float>(c.hd));
    Tensor ref = host({c.M, c.H, c.hd});
    cpu->attention(q, win, c.window, comp.view(), idx.view(), vis.view(), sinks, scale, ref);
    Tensor dcomp = c.E > 0 ? to_dev(*gpu, comp) : Tensor();
    Tensor didx = idx.defined() ? to_dev(*gpu, idx) : Tensor();
    Tensor dvis = vis.defined() ? to_dev(*gpu, vis) : Tensor();
    Tensor out = dev_poisoned(*gpu, {c.M, c.H, c.hd});
    gpu->attention(to_dev(*gpu, q), to_dev(*gpu, win), c.window, dcomp.view(), didx.view(),
                   dvis.view(), to_dev(*gpu, sinks), scale, out);
    EXPECT_LE(rel_err(to_host(*gpu, out), ref), kTolAttention)
        << "M " << c.M << " H " << c.H << " hd " << c.hd << " P " << c.P << " E " << c.E;
  }
}

TEST_F(Attn, IndexerScoresMatchCpu) {
  SEED_TRACE();
  for (auto [M, nh, d, E] :
       std::vector<std::array<int64_t, 4>>{{1, 8, 16, 6}, {9, 4, 32, 100}, {33, 64, 128, 257}}) {
    Rng rng;
    const Tensor q = rand_host(rng, {M, nh, d}), k = rand_host(rng, {E, d});
    const Tensor w = rand_host(rng, {M, nh});
    std::vector<int32_t> v(M);
    for (auto& x : v) x = static_cast<int32_t>(rng.integer(0, E));
    v[0] = static_cast<int32_t>(E);
    const Tensor vis = i32_host(v, {M});
    const float scale = 0.25f;
    Tensor ref = host({M, E});
    cpu->indexer_scores(q, k, w, scale, vis, ref);
    Tensor out = dev_poisoned(*gpu, {M, E});
    gpu->indexer_scores(to_dev(*gpu, q), to_dev(*gpu, k), to_dev(*gpu, w), scale, to_dev(*gpu, vis),
                        out);
    EXPECT_LE(rel_err(to_host(*gpu, out), ref), kTolF32) << M << " " << nh << " " << d << " " << E;
  }
}

TEST_F(Attn, TopkMatchesCpuWithTiesAndInfinities) {
  SEED_TRACE();
  for (auto [M, N, k] : std::vector<std::array<int64_t, 3>>{{1, 6, 6},
                                                            {4, 10, 1},
                                                            {7, 100, 17},
                                                            {3, 5000, 512},
                                                            {2, 70000, 2048},
                                                            {5, 33, 33},
                                                            {2, 1, 1}}) {
    Rng rng;
    Tensor s = host({M, N});
    float* p = s.data_as<float>();
    for (int64_t i = 0; i < M * N; ++i) {
      // Few distinct values (many ties), some -inf (unpickable), a NaN, both signs of zero.
      const int64_t r = rng.integer(0, 19);
      p[i] = r == 0 ? -kInf : r == 1 ? 0.f : r == 2 ? -0.f : static_cast<float>(rng.integer(-8, 8));
    }
    p[0] = kNaN;
    if (M > 1)
      for (int64_t i = 0; i < N; ++i) p[N + i] = -kInf;  // a row with nothing pickable
    Tensor ref = host({M, k}, DType::kI32);
    cpu->topk(s, static_cast<int>(k), ref);
    Tensor out = dev_poisoned(*gpu, {M, k}, DType::kI32);
    gpu->topk(to_dev(*gpu, s), static_cast<int>(k), out);
    EXPECT_EQ(ints(to_host(*gpu, out)), ints(ref)) << M << " " << N << " " << k;
  }
}

TEST_F(Attn, TopkOfDistinctRandomScores) {
  SEED_TRACE();
  Rng rng;
  const int64_t M = 16, N = 16384, k = 512;
  const Tensor s = rand_host(rng, {M, N}, -100.f, 100.f);
  Tensor ref = host({M, k}, DType::kI32);
  cpu->topk(s, static_cast<int>(k), ref);
  Tensor out = dev_poisoned(*gpu, {M, k}, DType::kI32);
  gpu->topk(to_dev(*gpu, s), static_cast<int>(k), out);
  EXPECT_EQ(ints(to_host(*gpu, out)), ints(ref));
}

}  // namespace
}  // namespace deepinfer::cudatest
