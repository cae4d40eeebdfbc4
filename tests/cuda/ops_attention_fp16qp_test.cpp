// The attention kernels under set_attention_fp16_qp (DEEPINFER_CUDA_ATTENTION_FP16_QP): queries
// and probabilities as one fp16 operand each (two MMAs a product); and the wgmma indexer under
// set_indexer_fp16_q / set_indexer_fp16_k (DEEPINFER_CUDA_INDEXER_FP16_Q / _K): its queries, its
// keys or both so. The results stay within fp16 rounding of the CPU's, differ from the split
// operands' (the switch took), and keep the bits every kernel and call size gives a row: wgmma ==
// mma.sync, a prefill call's rows == the same rows called alone (decode-sized grids), the
// indexer's decode rows == its prefill rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "attention_cases.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace deepinfer::cudatest {
namespace {

// fp16 rounding of Q and P: relative 2^-11 per value at most, ~1e-4 on the outputs of these
// random inputs; the bound leaves ~10x.
constexpr double kTolFp16Qp = 2e-3;

class AttnFp16Qp : public CudaVsCpu {
 protected:
  void SetUp() override {
    CudaVsCpu::SetUp();
    switches_ = OperandSwitches{};  // as the backend's environment set them
  }
  // The process-wide switches back to what the test found, whatever it left them at.
  void TearDown() override {
    switches_.restore();
    cuda::set_attention_split_keys(cuda::kAttentionSplitKeys);
  }

 private:
  OperandSwitches switches_;
};

TEST_F(AttnFp16Qp, MatchesCpuToFp16RoundingAndDiffersFromSplitOperands) {
  SEED_TRACE();
  struct Case {
    int64_t M, H, hd, P, window, E, K;
  };
  // Decode-sized calls (one query with its keys split over many blocks, a few queries) and a
  // prefill-sized one (head-group pairs), comp_idx rows with -1 and duplicates.
  for (const Case& c :
       {Case{1, 64, 512, 127, 128, 2000, 512}, Case{24, 64, 512, 127, 128, 700, 512},
        Case{9, 4, 32, 5, 16, 12, 6}, Case{300, 64, 64, 0, 96, 200, 32}}) {
    Rng rng;
    const Tensor q = rand_host(rng, {c.M, c.H, c.hd}), win = rand_host(rng, {c.P + c.M, c.hd});
    const Tensor comp = rand_host(rng, {c.E, c.hd}), sinks = rand_host(rng, {c.H}, -2.f, 2.f);
    std::vector<int32_t> v(c.M * c.K);
    for (auto& e : v) e = static_cast<int32_t>(rng.integer(-1, c.E - 1));
    v[1] = v[0];
    const Tensor idx = i32_host(v, {c.M, c.K});
    const float scale = 1.f / std::sqrt(static_cast<float>(c.hd));
    Tensor ref = host({c.M, c.H, c.hd});
    cpu->attention(q, win, c.window, comp, idx, TensorView(), sinks, scale, ref);
    const Tensor dq = to_dev(*gpu, q), dwin = to_dev(*gpu, win), dcomp = to_dev(*gpu, comp);
    const Tensor didx = to_dev(*gpu, idx), dsinks = to_dev(*gpu, sinks);
    Tensor got[2];
    for (int fp16 = 0; fp16 < 2; ++fp16) {
      cuda::set_attention_fp16_qp(fp16 == 1);
      Tensor out = dev_poisoned(*gpu, {c.M, c.H, c.hd});
      gpu->attention(dq, dwin, c.window, dcomp, didx, TensorView(), dsinks, scale, out);
      got[fp16] = to_host(*gpu, out);
    }
    const std::string what = "M " + std::to_string(c.M) + " hd " + std::to_string(c.hd);
    EXPECT_LE(rel_err(got[0], ref), kTolAttention) << what;
    EXPECT_LE(rel_err(got[1], ref), kTolFp16Qp) << what;
    EXPECT_GT(floats_differing(got[0], got[1]), got[1].numel() / 2) << what;
  }
}

TEST_F(AttnFp16Qp, WgmmaIsTheMmaSyncKernel) {
  SEED_TRACE();
  if (!set_cuda_wgmma(*gpu, true)) GTEST_SKIP() << "no wgmma on this device";
  Rng rng;
  WgmmaBatch w(*gpu, rng);
  cuda::set_attention_fp16_qp(true);
  Tensor out[2];
  for (int on = 0; on < 2; ++on) {
    ASSERT_EQ(set_cuda_wgmma(*gpu, on == 1), on == 1);
    const int64_t calls = cuda_wgmma_attention_calls(*gpu);
    out[on] = dev_poisoned(*gpu, {w.M, w.H, w.hd});
    gpu->attention_batch(w.q, w.segs, w.window, w.sinks, w.scale, out[on]);
    EXPECT_EQ(cuda_wgmma_attention_calls(*gpu) - calls, on) << "wgmma " << on;
  }
  set_cuda_wgmma(*gpu, true);
  const Tensor a = to_host(*gpu, out[0]), b = to_host(*gpu, out[1]);
  EXPECT_EQ(floats_differing(a, b), 0) << "of " << a.numel() << " fp32 outputs";
  EXPECT_EQ(finite_count(b), b.numel());
  // The streaming wgmma kernel (each key staged twice, Q per super-chunk) gives the one-pass
  // kernel's bits.
  cuda::set_attention_onepass(false);
  Tensor streamed = dev_poisoned(*gpu, {w.M, w.H, w.hd});
  gpu->attention_batch(w.q, w.segs, w.window, w.sinks, w.scale, streamed);
  EXPECT_EQ(floats_differing(to_host(*gpu, streamed), b), 0) << "streaming kernel";
  // And the switch took in the wgmma kernel too.
  cuda::set_attention_fp16_qp(false);
  Tensor split = dev_poisoned(*gpu, {w.M, w.H, w.hd});
  gpu->attention_batch(w.q, w.segs, w.window, w.sinks, w.scale, split);
  EXPECT_GT(floats_differing(to_host(*gpu, split), b), b.numel() / 2);
}

// A prefill call's rows (head-group pairs, on wgmma where the device has it) are bitwise the
// same queries called alone (one-group blocks of two warps per dim quarter, keys converted per
// chunk), keys per query within one 128-key unit so that no call splits them.
TEST_F(AttnFp16Qp, PrefillRowsAreTheRowsCalledAlone) {
  SEED_TRACE();
  const int64_t M = 400, H = 64, hd = 512, window = 96, E = 300, K = 32;
  const int sms = cuda::list_devices().at(0).multiprocessors;
  cuda::set_attention_split_keys(128);
  cuda::set_attention_fp16_qp(true);
  ASSERT_EQ(2, cuda::attention_groups_per_block(M, H, sms));
  ASSERT_EQ(1, cuda::attention_splits(1, H, window + K, sms));
  ASSERT_EQ(2, cuda::attention_quarter_warps(1, hd, H / 16, sms));
  Rng rng;
  const Tensor q = to_dev(*gpu, rand_host(rng, {M, H, hd}));
  const Tensor win = to_dev(*gpu, rand_host(rng, {M, hd}));
  const Tensor comp = to_dev(*gpu, rand_host(rng, {E, hd}));
  const Tensor sinks = to_dev(*gpu, rand_host(rng, {H}, -2.f, 2.f));
  std::vector<int32_t> v(M * K);
  for (auto& e : v) e = static_cast<int32_t>(rng.integer(-1, E - 1));
  const Tensor idx = to_dev(*gpu, i32_host(v, {M, K}));
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  Tensor out = dev_poisoned(*gpu, {M, H, hd});
  gpu->attention(q, win, window, comp, idx, TensorView(), sinks, scale, out);
  const Tensor all = to_host(*gpu, out);
  for (int64_t r : {int64_t{0}, int64_t{150}, M - 1}) {
    Tensor one = dev_poisoned(*gpu, {1, H, hd});
    gpu->attention(q.view().slice_rows(r, r + 1), win.view().slice_rows(0, r + 1), window, comp,
                   idx.view().slice_rows(r, r + 1), TensorView(), sinks, scale, one);
    EXPECT_EQ(0, std::memcmp(to_host(*gpu, one).data_as<float>(), all.data_as<float>() + r * H * hd,
                             H * hd * sizeof(float)))
        << "row " << r << " alone differs from itself in the prefill call";
  }
}

// The indexer's scores under fp16 queries, fp16 keys and both (one plain fp16 MMA): within fp16
// rounding of the CPU's (relative to the scores' scale), bitwise different from the split
// operands' and from each other (each switch took, alone and together; prefill and decode kernels
// alike), and decode rows (each its own keys) bitwise the prefill call's rows.
TEST_F(AttnFp16Qp, IndexerFp16OperandsMatchCpuAndKeepDecodeRowsThePrefillRows) {
  SEED_TRACE();
  if (!set_cuda_wgmma(*gpu, true)) GTEST_SKIP() << "no wgmma on this device";
  for (auto [nh, d, E] : kIndexerRowShapes) {
    SCOPED_TRACE(testing::Message() << "nh " << nh << " d " << d << " E " << E);
    Rng rng;
    const IndexerRows c(rng, nh, d, E);
    const int64_t M = c.M;
    Tensor ref = host({M, E});
    cpu->indexer_scores(c.q, c.k, c.w, 0.3f, c.vis, ref);
    const Tensor dq = to_dev(*gpu, c.q), dk = to_dev(*gpu, c.k), dw = to_dev(*gpu, c.w);
    const Tensor dvis = to_dev(*gpu, c.vis);
    const auto segs = IndexerRows::one_row_segments(dk);
    // v: bit 0 fp16 queries, bit 1 fp16 keys.
    Tensor prefill[4], decode[4];
    for (int v = 0; v < 4; ++v) {
      cuda::set_indexer_fp16_q(v & 1);
      cuda::set_indexer_fp16_k(v & 2);
      Tensor p = dev_poisoned(*gpu, {M, E}), b = dev_poisoned(*gpu, {M, E});
      gpu->indexer_scores(dq, dk, dw, 0.3f, dvis, p);
      gpu->indexer_scores_batch(dq, segs, dw, 0.3f, dvis, b);
      prefill[v] = to_host(*gpu, p);
      decode[v] = to_host(*gpu, b);
    }
    EXPECT_LE(rel_err(prefill[0], ref), kTolF32);
    // Every finite score moves (-inf past visible stays), in both kernels, with each variant.
    const int64_t finite = finite_count(ref);
    for (int v = 1; v < 4; ++v) {
      SCOPED_TRACE(testing::Message() << "fp16 q " << (v & 1) << " k " << (v >> 1));
      EXPECT_LE(rel_err(prefill[v], ref), kTolFp16Qp);
      EXPECT_EQ(floats_differing(prefill[v], decode[v]), 0);
      for (int u = 0; u < v; ++u) {
        EXPECT_GT(floats_differing(prefill[u], prefill[v]), finite / 2) << "against " << u;
        EXPECT_GT(floats_differing(decode[u], decode[v]), finite / 2) << "against " << u;
      }
    }
  }
}

// Prefill calls under fp16 queries and keys (the four-query kernel: a producer warpgroup's ring
// shared by four queries) at many shapes: one and several entry ranges a block, queries short of
// a quad, causal and random visible counts, nh below 64, d = 64; within fp16 rounding of the CPU,
// bitwise the decode rows (the row kernel, one row a block), and a visible count outside [0, E]
// reported.
TEST_F(AttnFp16Qp, IndexerFp16PrefillCallsAreTheDecodeRowsAtEveryShape) {
  SEED_TRACE();
  if (!set_cuda_wgmma(*gpu, true)) GTEST_SKIP() << "no wgmma on this device";
  cuda::set_indexer_fp16_q(true);
  cuda::set_indexer_fp16_k(true);
  struct Case {
    int64_t M, nh, d, E;
    bool causal;
  };
  for (const Case& c : std::vector<Case>{{1, 64, 128, 5000, false},
                                         {5, 64, 128, 257, false},
                                         {33, 37, 64, 300, false},
                                         {301, 64, 128, 4100, false},
                                         {256, 64, 128, 4100, true},
                                         {4, 64, 128, 3, false}}) {
    SCOPED_TRACE(::testing::Message() << c.M << " " << c.nh << " " << c.d << " " << c.E);
    Rng rng;
    const Tensor q = rand_host(rng, {c.M, c.nh, c.d}), k = rand_host(rng, {c.E, c.d});
    const Tensor w = rand_host(rng, {c.M, c.nh});
    std::vector<int32_t> v(c.M);
    for (int64_t m = 0; m < c.M; ++m)
      v[m] =
          static_cast<int32_t>(c.causal ? std::min(c.E, (m + 1) * c.E / c.M) : rng.integer(0, c.E));
    v[0] = static_cast<int32_t>(c.causal ? 0 : c.E);
    const Tensor vis = i32_host(v, {c.M});
    Tensor ref = host({c.M, c.E});
    cpu->indexer_scores(q, k, w, 0.25f, vis, ref);
    const Tensor dq = to_dev(*gpu, q), dk = to_dev(*gpu, k), dw = to_dev(*gpu, w);
    const Tensor dvis = to_dev(*gpu, vis);
    Tensor prefill = dev_poisoned(*gpu, {c.M, c.E}), rows = dev_poisoned(*gpu, {c.M, c.E});
    gpu->indexer_scores(dq, dk, dw, 0.25f, dvis, prefill);
    std::vector<Backend::IndexerSegment> segs;
    for (int64_t m = 0; m < c.M; ++m) segs.push_back({m, 1, dk.view()});
    gpu->indexer_scores_batch(dq, segs, dw, 0.25f, dvis, rows);
    const Tensor got = to_host(*gpu, prefill);
    EXPECT_LE(rel_err(got, ref), kTolFp16Qp);
    EXPECT_EQ(floats_differing(got, to_host(*gpu, rows)), 0);
    // -inf exactly where the CPU has it (past each query's visible entries).
    for (int64_t i = 0; i < c.M * c.E; ++i)
      ASSERT_EQ(std::isinf(got.data_as<float>()[i]), std::isinf(ref.data_as<float>()[i])) << i;
    v[c.M - 1] = static_cast<int32_t>(c.E + 1);
    EXPECT_THROW(
        {
          gpu->indexer_scores(dq, dk, dw, 0.25f, to_dev(*gpu, i32_host(v, {c.M})), prefill);
          to_host(*gpu, prefill);
        },
        Error);
  }
}

}  // namespace
}  // namespace deepinfer::cudatest
