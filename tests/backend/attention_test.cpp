// window_pool, attention (window / compressed by index / compressed by prefix), indexer_scores,
// topk.
#include <algorithm>
#include <numeric>
#include <set>

#include "test_util.h"

namespace deepinfer::test {
namespace {

class Attn : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
};

// With and without the slot bias (the position bias of each slot, added to every window's
// gates); a bias of the wrong shape is refused.
TEST_F(Attn, WindowPoolSoftmaxOverSlots) {
  SEED_TRACE();
  for (auto [N, S, d] :
       std::vector<std::array<int64_t, 3>>{{1, 8, 512}, {37, 4, 65}, {500, 16, 32}}) {
    for (const bool with_bias : {false, true}) {
      Rng rng;
      Tensor kv = rand_tensor(rng, {N, S, d}), gate = rand_tensor(rng, {N, S, d}, -4.f, 4.f);
      Tensor bias = rand_tensor(rng, {S, d}, -3.f, 3.f);
      float* g = gate.data_as<float>();
      const float* bp = bias.data_as<float>();
      // Some -inf slots (no weight), and in the first token a fully -inf channel (output 0).
      for (int64_t i = 0; i < N * S * d; i += 7) g[i] = -kInf;
      for (int64_t s = 0; s < S; ++s) g[s * d + 1] = -kInf;
      Tensor out = poisoned({N, d});
      be->window_pool(kv, gate, with_bias ? bias.view() : TensorView(), out);
      auto gate_at = [&](int64_t n, int64_t s, int64_t c) {
        return double(g[(n * S + s) * d + c]) + (with_bias ? double(bp[s * d + c]) : 0.0);
      };
      std::vector<double> ref(N * d, 0.0);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < d; ++c) {
          double mx = -kInf, den = 0, num = 0;
          for (int64_t s = 0; s < S; ++s) mx = std::max(mx, gate_at(n, s, c));
          if (mx == -kInf) continue;
          for (int64_t s = 0; s < S; ++s) {
            const double w = std::exp(gate_at(n, s, c) - mx);
            den += w;
            num += w * kv.data_as<float>()[(n * S + s) * d + c];
          }
          ref[n * d + c] = num / den;
        }
      EXPECT_CLOSE(out, ref);
      EXPECT_EQ(out.data_as<float>()[1], 0.f);
      if (with_bias)
        EXPECT_THROW(be->window_pool(kv, gate, rand_tensor(rng, {S + 1, d}), out), Error);
    }
  }
}

enum class Comp { kNone, kIdx, kVisible };

struct AttnCase {
  int64_t M, H, hd, P, window, E, K;
  Comp comp;
};

// Double-precision attention straight from the definition in backend.h.
std::vector<double> ref_attention(const Tensor& q, const Tensor& win, int64_t window,
                                  const Tensor& comp, const std::vector<int32_t>& idx, int64_t K,
                                  const std::vector<int32_t>& vis, Comp mode, const Tensor& sinks,
                                  double scale) {
  const int64_t M = q.dim(0), H = q.dim(1), hd = q.dim(2), P = win.dim(0) - M;
  std::vector<double> out(M * H * hd, 0.0);
  for (int64_t m = 0; m < M; ++m) {
    std::vector<const float*> keys;
    for (int64_t r = 0; r < win.dim(0); ++r)
      if (m + P - window < r && r <= m + P) keys.push_back(win.data_as<float>() + r * hd);
    std::set<int32_t> entries;
    if (mode == Comp::kIdx)
      for (int64_t j = 0; j < K; ++j)
        if (idx[m * K + j] >= 0) entries.insert(idx[m * K + j]);
    if (mode == Comp::kVisible)
      for (int32_t e = 0; e < vis[m]; ++e) entries.insert(e);
    for (int32_t e : entries) keys.push_back(comp.data_as<float>() + e * hd);
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = q.data_as<float>() + (m * H + h) * hd;
      std::vector<double> s(keys.size());
      double mx = sinks.data_as<float>()[h];
      for (size_t j = 0; j < keys.size(); ++j) {
        double d = 0;
        for (int64_t c = 0; c < hd; ++c) d += double(qh[c]) * keys[j][c];
        mx = std::max(mx, s[j] = d * scale);
      }
      double den = std::exp(sinks.data_as<float>()[h] - mx);
      for (auto& v : s) den += v = std::exp(v - mx);
      for (size_t j = 0; j < keys.size(); ++j)
        for (int64_t c = 0; c < hd; ++c) out[(m * H + h) * hd + c] += s[j] / den * keys[j][c];
    }
  }
  return out;
}

TEST_F(Attn, AttentionMatchesReference) {
  SEED_TRACE();
  const std::vector<AttnCase> cases = {
      // decode: one query over a full ring, alone / + compressed entries by index / by prefix
      {1, 8, 64, 127, 128, 0, 0, Comp::kNone},
      {1, 16, 64, 127, 128, 40, 8, Comp::kIdx},
      {1, 8, 64, 10, 128, 40, 0, Comp::kVisible},
      // prefill from position 0 with a short window
      {37, 4, 32, 0, 16, 0, 0, Comp::kNone},
      {37, 4, 32, 0, 16, 9, 5, Comp::kIdx},
      {37, 4, 32, 5, 16, 9, 0, Comp::kVisible},
      // odd sizes, window wider than the history, big enough to spread over threads
      {64, 16, 128, 31, 1000, 300, 64, Comp::kIdx},
      {50, 3, 17, 3, 4, 13, 0, Comp::kVisible},
      // so many selected entries that the queries are processed in several gather chunks
      {10, 2, 512, 0, 8, 5000, 4096, Comp::kIdx},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << "M=" << c.M << " H=" << c.H << " hd=" << c.hd << " P=" << c.P
                                    << " window=" << c.window << " E=" << c.E << " K=" << c.K
                                    << " mode=" << int(c.comp));
    Rng rng;
    const float scale = 1.f / std::sqrt(float(c.hd));
    Tensor q = rand_tensor(rng, {c.M, c.H, c.hd}, -2.f, 2.f);
    Tensor win = rand_tensor(rng, {c.P + c.M, c.hd}, -2.f, 2.f);
    Tensor comp = rand_tensor(rng, {c.E, c.hd}, -2.f, 2.f);
    Tensor sinks = rand_tensor(rng, {c.H}, -2.f, 2.f);
    std::vector<int32_t> idx(c.M * c.K), vis(c.M);
    for (int64_t m = 0; m < c.M; ++m) {
      for (int64_t j = 0; j < c.K; ++j)  // -1 (invalid) about a quarter of the time
        idx[m * c.K + j] = static_cast<int32_t>(rng.integer(-c.E / 3, c.E - 1));
      if (c.K > 1) idx[m * c.K + 1] = idx[m * c.K];  // a duplicate counts once
      for (auto& v : idx) v = std::max(v, -1);
      vis[m] = static_cast<int32_t>(rng.integer(0, c.E));
    }
    Tensor idx_t = int_tensor(idx, {c.M, c.K}), vis_t = int_tensor(vis, {c.M});
    Tensor out = poisoned({c.M, c.H, c.hd});
    be->attention(q, win, c.window, c.E > 0 ? comp.view() : TensorView(),
                  c.comp == Comp::kIdx ? idx_t.view() : TensorView(),
                  c.comp == Comp::kVisible ? vis_t.view() : TensorView(), sinks, scale, out);
    EXPECT_CLOSE(out, ref_attention(q, win, c.window, comp, idx, c.K, vis, c.comp, sinks, scale));
  }
}

// attention_batch is attention() per segment: same numbers, and the segments must tile q.
TEST_F(Attn, AttentionBatchIsAttentionPerSegment) {
  SEED_TRACE();
  Rng rng;
  const int64_t H = 3, hd = 8;
  Tensor q = rand_tensor(rng, {6, H, hd}), sinks = rand_tensor(rng, {H});
  Tensor win_a = rand_tensor(rng, {5, hd}), win_b = rand_tensor(rng, {7, hd});
  Tensor comp_b = rand_tensor(rng, {4, hd});
  std::vector<int32_t> vis{1, 4, 0, 2, 3};
  Tensor vis_b = Tensor::empty({5}, DType::kI32);
  std::copy(vis.begin(), vis.end(), vis_b.data_as<int32_t>());
  const std::vector<Backend::AttentionSegment> segs{
      {0, 1, win_a.view(), {}, {}, {}}, {1, 5, win_b.view(), comp_b.view(), {}, vis_b.view()}};
  Tensor out = poisoned({6, H, hd}), ref = poisoned({6, H, hd});
  be->attention_batch(q, segs, 4, sinks, 0.5f, out);
  be->attention(q.view().slice_rows(0, 1), win_a, 4, {}, {}, {}, sinks, 0.5f,
                ref.view().slice_rows(0, 1));
  be->attention(q.view().slice_rows(1, 6), win_b, 4, comp_b, {}, vis_b, sinks, 0.5f,
                ref.view().slice_rows(1, 6));
  EXPECT_EQ(0, std::memcmp(out.data_as<float>(), ref.data_as<float>(), 6 * H * hd * 4));
  std::vector<Backend::AttentionSegment> bad = segs;
  bad[1].count = 4;  // rows 5.. not covered
  EXPECT_THROW(be->attention_batch(q, bad, 4, sinks, 0.5f, out), Error);
}

TEST_F(Attn, AttentionWithNothingVisibleIsZero) {
  Rng rng;
  Tensor q = rand_tensor(rng, {3, 2, 8}), win = rand_tensor(rng, {3, 8}),
         sinks = rand_tensor(rng, {2});
  Tensor out = poisoned({3, 2, 8});
  be->attention(q, win, /*window=*/0, TensorView(), TensorView(), TensorView(), sinks, 0.3f, out);
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.data_as<float>()[i], 0.f);
}

TEST_F(Attn, AttentionRejectsBadInputs) {
  Tensor q = make({2, 4, 8}), win = make({5, 8}), sinks = make({4}), out = make({2, 4, 8});
  Tensor comp = make({3, 8});
  EXPECT_THROW(
      be->attention(q, make({1, 8}), 4, TensorView(), TensorView(), TensorView(), sinks, 1.f, out),
      Error);  // fewer window rows than queries
  EXPECT_THROW(
      be->attention(q, make({5, 7}), 4, TensorView(), TensorView(), TensorView(), sinks, 1.f, out),
      Error);  // head dim mismatch
  EXPECT_THROW(
      be->attention(q, win, 4, comp, int_tensor({0, 3}, {2, 1}), TensorView(), sinks, 1.f, out),
      Error);  // index past comp_kv
  EXPECT_THROW(
      be->attention(q, win, 4, comp, TensorView(), int_tensor({0, 4}, {2}), sinks, 1.f, out),
      Error);  // prefix longer than comp_kv
  EXPECT_THROW(
      be->attention(q, win, 4, TensorView(), TensorView(), TensorView(), make({3}), 1.f, out),
      Error);  // sinks per head
  EXPECT_THROW(be->attention(q, win, 4, TensorView(), TensorView(), TensorView(), sinks, 1.f, q),
               Error);  // out aliases q
}

// indexer_scores_batch: each segment's rows (taken from anywhere in q) scored against its own
// keys, packed in segment order, padded with -inf past each segment's keys.
TEST_F(Attn, IndexerScoresBatchIsIndexerScoresPerSegment) {
  SEED_TRACE();
  Rng rng;
  const int64_t M = 6, nh = 4, d = 16, N = 9;
  Tensor q = rand_tensor(rng, {M, nh, d}), w = rand_tensor(rng, {M, nh});
  Tensor k0 = rand_tensor(rng, {9, d}), k1 = rand_tensor(rng, {3, d});
  const std::vector<int32_t> vis{9, 2, 3, 1, 0, 5};
  Tensor visible = int_tensor(vis, {M});
  // Rows 4 (k0) and 1..2 (k1), in that order; rows 0, 3, 5 not scored.
  const std::vector<Backend::IndexerSegment> segs{{4, 1, k0.view()}, {1, 2, k1.view()}};
  Tensor got = poisoned({3, N});
  be->indexer_scores_batch(q, segs, w, 0.5f, visible, got);
  Tensor a = poisoned({1, 9}), b = poisoned({2, 3});
  be->indexer_scores(q.view().slice_rows(4, 5), k0, w.view().slice_rows(4, 5), 0.5f,
                     visible.view().slice_rows(4, 5), a);
  be->indexer_scores(q.view().slice_rows(1, 3), k1, w.view().slice_rows(1, 3), 0.5f,
                     visible.view().slice_rows(1, 3), b);
  const float* g = got.data_as<float>();
  EXPECT_EQ(0, std::memcmp(g, a.data_as<float>(), 9 * 4));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(0, std::memcmp(g + (1 + r) * N, b.data_as<float>() + r * 3, 3 * 4)) << r;
    for (int64_t e = 3; e < N; ++e) EXPECT_EQ(g[(1 + r) * N + e], -kInf) << r << " " << e;
  }
  EXPECT_THROW(be->indexer_scores_batch(q, segs, w, 0.5f, visible, poisoned({2, N})), Error);
  EXPECT_THROW(be->indexer_scores_batch(q, segs, w, 0.5f, visible, poisoned({3, 8})), Error)
      << "fewer columns than a segment's keys";
  const std::vector<Backend::IndexerSegment> outside{{5, 2, k1.view()}};
  EXPECT_THROW(be->indexer_scores_batch(q, outside, w, 0.5f, visible, poisoned({2, N})), Error);
}

TEST_F(Attn, IndexerScores) {
  SEED_TRACE();
  for (auto [M, nh, d, E] : std::vector<std::array<int64_t, 4>>{
           {1, 64, 128, 1000}, {19, 4, 33, 70}, {128, 8, 64, 600}, {3, 2, 16, 0}}) {
    SCOPED_TRACE(testing::Message() << "M=" << M << " nh=" << nh << " d=" << d << " E=" << E);
    Rng rng;
    Tensor q = rand_tensor(rng, {M, nh, d}), k = rand_tensor(rng, {E, d}),
           w = rand_tensor(rng, {M, nh});
    std::vector<int32_t> vis(M);
    for (auto& v : vis) v = static_cast<int32_t>(rng.integer(0, E));
    vis[0] = static_cast<int32_t>(E);
    Tensor scores = poisoned({M, E});
    const float scale = 1.f / std::sqrt(float(d));
    be->indexer_scores(q, k, w, scale, int_tensor(vis, {M}), scores);
    std::vector<double> ref(M * E), got(M * E);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t e = 0; e < E; ++e) {
        const float s = scores.data_as<float>()[m * E + e];
        if (e >= vis[m]) {
          ASSERT_EQ(s, -kInf) << m << " " << e;
          continue;
        }
        double acc = 0;
        for (int64_t h = 0; h < nh; ++h) {
          double dd = 0;
          for (int64_t c = 0; c < d; ++c)
            dd += double(q.data_as<float>()[(m * nh + h) * d + c]) * k.data_as<float>()[e * d + c];
          acc += w.data_as<float>()[m * nh + h] * std::max(dd, 0.0) * scale;
        }
        ref[m * E + e] = acc;
        got[m * E + e] = s;
      }
    Tensor got_t = make({M * E});
    std::copy(got.begin(), got.end(), got_t.data_as<float>());
    EXPECT_CLOSE(got_t, ref);
  }
  EXPECT_THROW(be->indexer_scores(make({2, 4, 8}), make({5, 8}), make({2, 4}), 1.f,
                                  int_tensor({1, 6}, {2}), make({2, 5})),
               Error);
}

// Stable descending order by value, NaN / -inf mapped to -1.
std::vector<int32_t> ref_topk(const float* v, int64_t n, int k) {
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t i) { return std::isnan(v[i]) ? -kInf : v[i]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return key(a) > key(b); });
  order.resize(k);
  for (auto& i : order)
    if (!(v[i] > -kInf)) i = -1;
  return order;
}

TEST_F(Attn, TopkOrderTiesAndInf) {
  SEED_TRACE();
  struct Case {
    int64_t M, N;
    int k;
    bool ties;
  };
  for (auto c : std::vector<Case>{{1, 100000, 512, false},
                                  {64, 5000, 64, true},
                                  {7, 10, 10, true},
                                  {5, 9, 0, false},
                                  {300, 33, 5, true}}) {
    SCOPED_TRACE(testing::Message() << "M=" << c.M << " N=" << c.N << " k=" << c.k);
    Rng rng;
    Tensor s = rand_tensor(rng, {c.M, c.N});
    float* v = s.data_as<float>();
    for (int64_t i = 0; i < c.M * c.N; ++i) {
      if (c.ties) v[i] = float(rng.integer(-3, 3));  // plenty of equal values
      if (rng.integer(0, 4) == 0) v[i] = -kInf;
    }
    // A row with fewer finite values than k.
    for (int64_t j = 1; j < c.N; ++j) v[j] = -kInf;
    Tensor idx = poisoned({c.M, c.k}, DType::kI32);
    be->topk(s, c.k, idx);
    for (int64_t m = 0; m < c.M; ++m) {
      const auto ref = ref_topk(v + m * c.N, c.N, c.k);
      ASSERT_TRUE(std::equal(ref.begin(), ref.end(), idx.data_as<int32_t>() + m * c.k))
          << "row " << m;
    }
  }
  EXPECT_THROW(be->topk(make({2, 5}), 6, make({2, 6}, DType::kI32)), Error);
  EXPECT_THROW(be->topk(make({2, 5}), 3, make({2, 3})), Error);  // F32 idx
}

TEST_F(Attn, TopkExplicitTies) {
  Tensor s = make({1, 6});
  const float vals[] = {1.f, 3.f, 3.f, -kInf, 1.f, 3.f};
  std::copy(vals, vals + 6, s.data_as<float>());
  Tensor idx = poisoned({1, 6}, DType::kI32);
  be->topk(s, 6, idx);
  const std::vector<int32_t> want = {1, 2, 5, 0, 4, -1};
  EXPECT_TRUE(std::equal(want.begin(), want.end(), idx.data_as<int32_t>()));
}

}  // namespace
}  // namespace deepinfer::test
