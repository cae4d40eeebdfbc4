// fill_random on CUDA is the CPU's bit for bit; synthetic context and random weights built on
// the GPU are the CPU's (weights: rounded to bf16) and the model decodes on them. Skips without
// a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "bench/random_weights.h"
#include "cuda_test_util.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::cudatest {
namespace {

using FillRandomCuda = CudaVsCpu;

void expect_same_bytes(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.view().nbytes(), b.view().nbytes()) << what;
  const auto* x = static_cast<const uint8_t*>(a.view().data());
  const auto* y = static_cast<const uint8_t*>(b.view().data());
  size_t first = 0;
  while (first < a.view().nbytes() && x[first] == y[first]) ++first;
  EXPECT_EQ(first, a.view().nbytes()) << what << ": first differing byte " << first;
}

TEST_F(FillRandomCuda, MatchesTheCpuBitForBit) {
  // Odd sizes (a lone last element), and one large enough for the grid-stride loop.
  for (const int64_t n :
       {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000003}, int64_t{3} * 1024 * 1024 * 4 + 1}) {
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      for (const uint64_t seed : {uint64_t{0}, uint64_t{0x123456789ABCDEFull}}) {
        const float lo = -0.0270633f, hi = 0.0311f;
        Tensor c = cpu->empty({n}, dtype);
        cpu->fill_random(c, seed, lo, hi);
        Tensor g = gpu->empty({n}, dtype);
        gpu->fill_random(g, seed, lo, hi);
        expect_same_bytes(to_host(*gpu, g), c,
                          "n " + std::to_string(n) + " " + std::string(dtype_name(dtype)) +
                              " seed " + std::to_string(seed));
      }
    }
  }
}

TEST_F(FillRandomCuda, Fp4MatchesTheCpuBitForBit) {
  for (const int64_t n : {int64_t{2}, int64_t{4002}, int64_t{3} * 1024 * 1024 * 4 * 2}) {
    Tensor c = cpu->empty({n}, DType::kFP4E2M1);
    cpu->fill_random(c, 99, -6.f, 6.f);
    Tensor g = gpu->empty({n}, DType::kFP4E2M1);
    gpu->fill_random(g, 99, -6.f, 6.f);
    expect_same_bytes(to_host(*gpu, g), c, "fp4 n " + std::to_string(n));
  }
}

TEST_F(FillRandomCuda, UnalignedBf16ViewsMatchTheCpu) {
  // A bf16 view starting at an odd element (2-byte aligned only) of a 3-column matrix.
  Tensor c = cpu->empty({9, 3}, DType::kBF16);
  Tensor g = gpu->empty({9, 3}, DType::kBF16);
  cpu->fill_random(c, 1, -1.0f, 1.0f);
  gpu->fill_random(g, 1, -1.0f, 1.0f);
  cpu->fill_random(c.view().slice_rows(1, 6), 77, 2.0f, 3.0f);
  gpu->fill_random(g.view().slice_rows(1, 6), 77, 2.0f, 3.0f);
  expect_same_bytes(to_host(*gpu, g), c, "unaligned view");
  EXPECT_THROW(gpu->fill_random(gpu->empty({4}, DType::kI32), 0, 0.0f, 1.0f), Error);
}

TEST_F(FillRandomCuda, SyntheticContextIsTheCpusAndDecodes) {
  const std::string dir = std::string(DEEPINFER_SOURCE_DIR) + "/models/deepseek-v4-tiny-en";
  auto mc = deepseek_v4::Model::load(dir, *cpu);
  auto mg = deepseek_v4::Model::load(dir, *gpu);
  const ModelConfig& c = mc->config();
  for (const int64_t n : {int64_t{0}, int64_t{5}, int64_t{1234}}) {
    auto sc = mc->new_state();
    auto sg = mg->new_state();
    sc.fill_synthetic(c, *cpu, n, 99, 8);
    sg.fill_synthetic(c, *gpu, n, 99, 8);
    for (size_t l = 0; l < sc.layers.size(); ++l) {
      const auto& a = sc.layers[l];
      const auto& b = sg.layers[l];
      ASSERT_EQ(a.ring_rows, b.ring_rows);
      if (a.ring_rows > 0) {
        Tensor ring = host({a.ring_rows, c.head_dim});
        gpu->download(b.ring_view(), ring.view().data());
        EXPECT_EQ(std::memcmp(ring.view().data(), a.ring_view().data(), ring.view().nbytes()), 0)
            << "layer " << l;
      }
      ASSERT_EQ(a.comp.entries.rows(), b.comp.entries.rows());
      ASSERT_EQ(a.comp.pending, b.comp.pending);
      ASSERT_EQ(a.indexer.entries.rows(), b.indexer.entries.rows());
      if (a.comp.entries.rows() > 0)
        expect_same_bytes(to_host(*gpu, b.comp.entries.view()),
                          Tensor(to_host(*cpu, a.comp.entries.view())), "entries");
    }
    const std::vector<int32_t> next{17, 3};
    const Tensor lc = mc->forward(next, sc);
    const Tensor lg = mg->forward(next, sg);
    EXPECT_LE(rel_err(lg, lc), 3e-2) << "context " << n;
  }
}

TEST_F(FillRandomCuda, RandomWeightsAreTheCpusInBf16) {
  bench::PresetOptions o;
  o.preset = "tiny";
  auto mc = bench::make_random_model(o, 5, *cpu);
  auto mg = bench::make_random_model(o, 5, *gpu);
  std::vector<int32_t> ids;
  for (int i = 0; i < 70; ++i) ids.push_back((i * 131 + 7) % mc->config().vocab_size);
  auto sc = mc->new_state();
  auto sg = mg->new_state();
  const Tensor lc = mc->forward(ids, sc);
  const Tensor lg = mg->forward(ids, sg);
  // Uniform random weights make near-tie routing and indexer choices common, and the CUDA
  // backend's bf16 GEMM inputs flip some of them (the fp32 CPU does not), so a few rows move a
  // lot: the 3e-2 accuracy bound belongs to the golden tests on the reference's fixtures. Here:
  // same weights (fill_random is bit-identical, tested above) give the same model, so the
  // confident predictions agree and the logits stay close overall.
  const int64_t V = lc.dim(1);
  int confident = 0;
  for (int64_t r = 0; r < lc.dim(0); ++r) {
    const float* c = lc.data_as<float>() + r * V;
    const float* g = lg.data_as<float>() + r * V;
    int64_t best = 0;
    float second = -INFINITY;
    for (int64_t v = 1; v < V; ++v)
      if (c[v] > c[best]) best = v;
    for (int64_t v = 0; v < V; ++v)
      if (v != best) second = std::max(second, c[v]);
    for (int64_t v = 0; v < V; ++v) ASSERT_TRUE(std::isfinite(g[v])) << r << " " << v;
    if (c[best] - second < 0.5f) continue;
    ++confident;
    EXPECT_EQ(std::max_element(g, g + V) - g, best) << "row " << r;
  }
  EXPECT_GT(confident, 0);
  EXPECT_LE(rel_err(lg, lc), 1e-1);
}

}  // namespace
}  // namespace deepinfer::cudatest
