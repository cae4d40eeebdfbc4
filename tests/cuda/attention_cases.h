// Attention inputs shared by the CUDA attention tests (ops_attention_test.cpp,
// ops_attention_fp16qp_test.cpp).
#pragma once

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace deepinfer::cudatest {

// The process-wide operand switches (set_attention_fp16_qp, set_indexer_fp16_q / _k) and the
// one-pass kernel's (set_attention_onepass) as a test found them after its backend applied the
// environment's values; restored in TearDown, so a test's settings never leak into the next.
struct OperandSwitches {
  bool qp = cuda::attention_fp16_qp(), q = cuda::indexer_fp16_q(), k = cuda::indexer_fp16_k();
  bool onepass = cuda::attention_onepass();
  void set(bool attention_qp, bool indexer_q, bool indexer_k) const {
    cuda::set_attention_fp16_qp(attention_qp);
    cuda::set_indexer_fp16_q(indexer_q);
    cuda::set_indexer_fp16_k(indexer_k);
  }
  void restore() const {
    set(qp, q, k);
    cuda::set_attention_onepass(onepass);
  }
};

// The RoPE frequencies of R pairs (theta 10000) on the device.
inline Tensor rope_freqs_dev(Backend& gpu, int64_t R) {
  Tensor freq = host({R});
  for (int64_t i = 0; i < R; ++i) freq.data_as<float>()[i] = std::pow(10000.f, -2.f * i / (2 * R));
  return to_dev(gpu, freq);
}

// A prefill-sized batch of the V4-Flash attention shape (64 heads of 512): window-only rows (the
// first ones seeing fewer than a chunk of keys), a visible prefix of up to 700 entries (several
// 128-key super-chunks, the last one partial), comp_idx rows of 512 picks (-1 and duplicates)
// over 2000 entries; positions and RoPE frequencies of 32 pairs for its rows.
struct WgmmaBatch {
  static constexpr int64_t H = 64, hd = 512, window = 128, R = 32, M = 650;
  std::vector<Tensor> keep;
  std::vector<Backend::AttentionSegment> segs;
  Tensor q, sinks, pos, freq;
  float scale = 1.f / std::sqrt(static_cast<float>(hd));

  WgmmaBatch(Backend& gpu, Rng& rng) {
    auto dev = [&](const Tensor& t) {
      keep.push_back(to_dev(gpu, t));
      return keep.back().view();
    };
    std::vector<int32_t> vis(200), picks(150 * 512);
    for (auto& e : vis) e = static_cast<int32_t>(rng.integer(0, 700));
    for (auto& e : picks) e = static_cast<int32_t>(rng.integer(-1, 1999));
    for (int64_t r = 0; r < 150; ++r) picks[r * 512 + 1] = picks[r * 512];  // a duplicate
    segs = {{0, 300, dev(rand_host(rng, {300, hd})), TensorView(), TensorView(), TensorView()},
            {300, 200, dev(rand_host(rng, {1200, hd})), dev(rand_host(rng, {700, hd})),
             TensorView(), dev(i32_host(vis, {200}))},
            {500, 150, dev(rand_host(rng, {277, hd})), dev(rand_host(rng, {2000, hd})),
             dev(i32_host(picks, {150, 512})), TensorView()}};
    q = to_dev(gpu, rand_host(rng, {M, H, hd}));
    sinks = to_dev(gpu, rand_host(rng, {H}, -2.f, 2.f));
    std::vector<int32_t> p(M);
    for (auto& e : p) e = static_cast<int32_t>(rng.integer(0, 200000));
    freq = rope_freqs_dev(gpu, R);
    pos = to_dev(gpu, i32_host(p, {M}));
  }
};

// The indexer's decode-rows case: M queries of nh heads of d dims over E keys (host tensors),
// row 0 seeing them all, the others a random prefix; each row a segment of its own over the
// same keys for indexer_scores_batch.
struct IndexerRows {
  static constexpr int64_t M = 9;
  Tensor q, w, k, vis;
  IndexerRows(Rng& rng, int64_t nh, int64_t d, int64_t E) {
    q = rand_host(rng, {M, nh, d});
    w = rand_host(rng, {M, nh});
    k = rand_host(rng, {E, d});
    std::vector<int32_t> v(M);
    for (int64_t m = 0; m < M; ++m) v[m] = static_cast<int32_t>(m == 0 ? E : rng.integer(0, E));
    vis = i32_host(v, {M});
  }
  static std::vector<Backend::IndexerSegment> one_row_segments(const TensorView& dk) {
    std::vector<Backend::IndexerSegment> segs;
    for (int64_t m = 0; m < M; ++m) segs.push_back({m, 1, dk});
    return segs;
  }
};
// (nh, d, E): V4's indexer heads, and a shape of neither power of two nor full MMA rows.
inline const std::vector<std::array<int64_t, 3>> kIndexerRowShapes = {{64, 128, 1100},
                                                                      {37, 64, 300}};

// How many of two host fp32 tensors' values differ bitwise, and how many of t's are finite.
inline int64_t floats_differing(const Tensor& a, const Tensor& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    n += std::memcmp(a.data_as<float>() + i, b.data_as<float>() + i, 4) != 0;
  return n;
}
inline int64_t finite_count(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += std::isfinite(t.data_as<float>()[i]);
  return n;
}

inline bool same_bytes(Backend& gpu, const Tensor& a, const Tensor& b) {
  const Tensor x = to_host(gpu, a), y = to_host(gpu, b);
  return x.view().nbytes() == y.view().nbytes() &&
         std::memcmp(x.view().data(), y.view().data(), x.view().nbytes()) == 0;
}

}  // namespace deepinfer::cudatest
