// CUDA vs CPU: the mHC ops (hc_pre, hc_post, hc_head) on random inputs with NaN-poisoned
// outputs, and their fused forms bit for bit against the ops in turn (hc_pre_norm,
// hc_post_pre_norm, hc_post_head_norm), one launch or not.
#include <array>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"

namespace deepinfer::cudatest {
namespace {

using Ops = CudaVsCpu;

struct HcInputs {
  Tensor X, fn, base, scale;
};

HcInputs hc_inputs(Rng& rng, int64_t M, int64_t hc, int64_t D, int64_t nmix) {
  return {rand_host(rng, {M, hc, D}, -2.f, 2.f), rand_host(rng, {nmix, hc * D}, -0.1f, 0.1f),
          rand_host(rng, {nmix}), rand_host(rng, {nmix == hc ? 1 : 3}, 0.5f, 2.f)};
}

HcInputs hc_on_device(Backend& gpu, const HcInputs& in) {
  return {to_dev(gpu, in.X), to_dev(gpu, in.fn), to_dev(gpu, in.base), to_dev(gpu, in.scale)};
}

TEST_F(Ops, HcPrePostHeadMatchCpu) {
  SEED_TRACE();
  for (auto [M, hc, D] : std::vector<std::array<int64_t, 3>>{
           {1, 4, 64},
           {5, 4, 200},
           {33, 2, 96},
           {3, 4, 4096},
           {37, 4, 4096},
           {3, 6, 64},
           {300, 4, 4096},  // prefill-sized: 256-row mixing blocks, a partial last one
           {260, 2, 200},   // ... a short last chunk of the row
           {513, 3, 4096},  // ... fn groups part full and empty, a one-row last block
           {600, 1, 301},   // ... rows not 16-byte aligned: plain loads
           {300, 6, 64},    // more fn rows than the wide kernel's lanes: small blocks
           {280, 10, 32}}) {
    Rng rng;
    const int64_t nmix = (2 + hc) * hc;
    const HcInputs in = hc_inputs(rng, M, hc, D, nmix);
    Tensor rc = host({M, D}), rp = host({M, hc}), rk = host({M, hc, hc});
    cpu->hc_pre(in.X, in.fn, in.base, in.scale, 20, 1e-6f, 1e-6f, rc, rp, rk);
    Tensor dX = to_dev(*gpu, in.X);
    Tensor c = dev_poisoned(*gpu, {M, D}), p = dev_poisoned(*gpu, {M, hc}),
           k = dev_poisoned(*gpu, {M, hc, hc});
    gpu->hc_pre(dX, to_dev(*gpu, in.fn), to_dev(*gpu, in.base), to_dev(*gpu, in.scale), 20, 1e-6f,
                1e-6f, c, p, k);
    EXPECT_LE(rel_err(to_host(*gpu, c), rc), kTolF32) << "collapsed " << M << " " << hc << " " << D;
    EXPECT_LE(rel_err(to_host(*gpu, p), rp), kTolF32) << "post";
    EXPECT_LE(rel_err(to_host(*gpu, k), rk), kTolF32) << "comb";
    // A row alone (the decode blocks) gets exactly what it got in the batch (batch invariance):
    // the first, one in the middle (a prefill batch's second warp or block) and the last.
    const Tensor all = to_host(*gpu, c);
    for (const int64_t r : {int64_t{0}, M / 2 + 33, M - 1}) {
      if (M == 1 || r >= M) continue;
      Tensor c1 = dev_poisoned(*gpu, {1, D}), p1 = dev_poisoned(*gpu, {1, hc}),
             k1 = dev_poisoned(*gpu, {1, hc, hc});
      gpu->hc_pre(dX.view().slice_rows(r, r + 1), to_dev(*gpu, in.fn), to_dev(*gpu, in.base),
                  to_dev(*gpu, in.scale), 20, 1e-6f, 1e-6f, c1, p1, k1);
      const Tensor one = to_host(*gpu, c1);
      EXPECT_EQ(0, std::memcmp(all.data_as<float>() + r * D, one.data_as<float>(), D * 4))
          << "hc_pre row " << r << " alone vs in a batch of " << M;
    }

    const Tensor y = rand_host(rng, {M, D});
    Tensor ro = host({M, hc, D});
    cpu->hc_post(in.X, y, rp, rk, ro);
    Tensor o = dev_poisoned(*gpu, {M, hc, D});
    gpu->hc_post(dX, to_dev(*gpu, y), to_dev(*gpu, rp), to_dev(*gpu, rk), o);
    EXPECT_LE(rel_err(to_host(*gpu, o), ro), kTolF32) << "hc_post";
    if (M > 1) {
      // Prefill rows' kernel (a block per row, float4 columns) against the one-row call's.
      Tensor o1 = dev_poisoned(*gpu, {1, hc, D});
      gpu->hc_post(dX.view().slice_rows(M - 1, M), to_dev(*gpu, y).view().slice_rows(M - 1, M),
                   to_dev(*gpu, rp).view().slice_rows(M - 1, M),
                   to_dev(*gpu, rk).view().slice_rows(M - 1, M), o1);
      const Tensor all = to_host(*gpu, o), one = to_host(*gpu, o1);
      EXPECT_EQ(
          0, std::memcmp(all.data_as<float>() + (M - 1) * hc * D, one.data_as<float>(), hc * D * 4))
          << "hc_post row " << M - 1 << " alone vs in a batch of " << M;
    }

    const HcInputs head = hc_inputs(rng, M, hc, D, hc);
    Tensor rh = host({M, D});
    cpu->hc_head(head.X, head.fn, head.base, head.scale, 1e-6f, 1e-6f, rh);
    Tensor h = dev_poisoned(*gpu, {M, D});
    gpu->hc_head(to_dev(*gpu, head.X), to_dev(*gpu, head.fn), to_dev(*gpu, head.base),
                 to_dev(*gpu, head.scale), 1e-6f, 1e-6f, h);
    EXPECT_LE(rel_err(to_host(*gpu, h), rh), kTolF32) << "hc_head";
    if (M > 1) {
      Tensor h1 = dev_poisoned(*gpu, {1, D});
      gpu->hc_head(to_dev(*gpu, head.X).view().slice_rows(M - 1, M), to_dev(*gpu, head.fn),
                   to_dev(*gpu, head.base), to_dev(*gpu, head.scale), 1e-6f, 1e-6f, h1);
      const Tensor all = to_host(*gpu, h), one = to_host(*gpu, h1);
      EXPECT_EQ(0, std::memcmp(all.data_as<float>() + (M - 1) * D, one.data_as<float>(), D * 4))
          << "hc_head row " << M - 1 << " alone vs in a batch of " << M;
    }
  }
}

// hc_pre_norm is hc_pre then rms_norm, bit for bit, whether it runs as one kernel (a cluster of
// column parts per row at decode sizes, one block per row at prefill sizes) or falls back to the
// two (more than 5 streams, rows over 4096 columns, no norm weight is fused too); and near the CPU.
TEST_F(Ops, HcPreNormIsHcPreThenRmsNorm) {
  SEED_TRACE();
  struct Case {
    int64_t M, hc, D;
    bool weighted, fused;
  };
  for (const Case& k : std::vector<Case>{{1, 4, 4096, true, true},      // 8 parts
                                         {3, 4, 4096, true, true},      // 8 parts
                                         {16, 4, 4096, true, true},     // 8 parts
                                         {40, 4, 4096, true, true},     // 4 (of 7) parts
                                         {130, 4, 4096, true, true},    // 2 parts
                                         {300, 4, 4096, true, true},    // 1 part, wide mixing
                                         {2, 4, 1000, true, true},      // 1 part: 500-col slices
                                         {5, 4, 200, false, true},      // unweighted, short warp
                                         {1, 2, 64, true, true},        // 1 part
                                         {3, 6, 64, true, false},       // 36 comb lanes
                                         {2, 4, 4100, true, false}}) {  // over 4096 columns
    Rng rng;
    const int64_t M = k.M, hc = k.hc, D = k.D, nmix = (2 + hc) * hc;
    const HcInputs in = hc_inputs(rng, M, hc, D, nmix);
    const Tensor w = k.weighted ? rand_host(rng, {D}, 0.5f, 1.5f) : Tensor();
    const HcInputs d = hc_on_device(*gpu, in);
    const Tensor &dX = d.X, &dfn = d.fn, &dbase = d.base, &dscale = d.scale;
    const Tensor dw = k.weighted ? to_dev(*gpu, w) : Tensor();
    // The two ops in turn on the GPU.
    Tensor c = dev_poisoned(*gpu, {M, D}), p = dev_poisoned(*gpu, {M, hc}),
           cb = dev_poisoned(*gpu, {M, hc, hc}), n = dev_poisoned(*gpu, {M, D});
    gpu->hc_pre(dX, dfn, dbase, dscale, 20, 1e-6f, 1e-6f, c, p, cb);
    gpu->rms_norm(c, dw, 1e-6f, n);
    // The one op.
    Tensor fp = dev_poisoned(*gpu, {M, hc}), fcb = dev_poisoned(*gpu, {M, hc, hc}),
           fused = dev_poisoned(*gpu, {M, D});
    const int64_t calls = cuda_fused_hc_pre_norm_calls(*gpu);
    gpu->hc_pre_norm(dX, dfn, dbase, dscale, 20, 1e-6f, 1e-6f, dw, fused, fp, fcb);
    EXPECT_EQ(cuda_fused_hc_pre_norm_calls(*gpu) - calls, k.fused ? 1 : 0) << M << " " << D;
    auto same = [&](const Tensor& a, const Tensor& b, const char* what) {
      const Tensor ha = to_host(*gpu, a), hb = to_host(*gpu, b);
      EXPECT_EQ(0, std::memcmp(ha.data_as<float>(), hb.data_as<float>(), ha.numel() * 4))
          << what << " " << M << " " << hc << " " << D;
    };
    same(fused, n, "normed");
    same(fp, p, "post");
    same(fcb, cb, "comb");
    Tensor rn = host({M, D}), rp = host({M, hc}), rk = host({M, hc, hc});
    cpu->hc_pre_norm(in.X, in.fn, in.base, in.scale, 20, 1e-6f, 1e-6f, w, rn, rp, rk);
    EXPECT_LE(rel_err(to_host(*gpu, fused), rn), kTolF32) << "normed vs cpu " << M << " " << D;
    if (M > 1) {  // the last row alone gets what it got in the batch
      Tensor n1 = dev_poisoned(*gpu, {1, D}), p1 = dev_poisoned(*gpu, {1, hc}),
             k1 = dev_poisoned(*gpu, {1, hc, hc});
      gpu->hc_pre_norm(dX.view().slice_rows(M - 1, M), dfn, dbase, dscale, 20, 1e-6f, 1e-6f, dw, n1,
                       p1, k1);
      const Tensor all = to_host(*gpu, fused), one = to_host(*gpu, n1);
      EXPECT_EQ(0, std::memcmp(all.data_as<float>() + (M - 1) * D, one.data_as<float>(), D * 4))
          << "hc_pre_norm row " << M - 1 << " alone vs in a batch of " << M;
    }
  }
}

// hc_post_pre_norm is hc_post then hc_pre_norm of its output, bit for bit, whether the expansion
// forms the mixing sums itself (decode rows: up to 8, 128-column chunks, up to 4 streams), in
// one cluster kernel with the next site's norm as well (those rows and 256-column blocks), or
// the two run in turn (more rows, other widths, more streams, or the switches off).
TEST_F(Ops, HcPostPreNormIsHcPostThenHcPreNorm) {
  SEED_TRACE();
  struct Case {
    int64_t M, hc, D;
    bool weighted, fused, one_launch;
  };
  for (const Case& k : std::vector<Case>{{1, 4, 4096, true, true, true},
                                         {8, 4, 4096, true, true, true},
                                         {9, 4, 4096, true, false, false},  // past the fused rows
                                         {3, 4, 256, false, true, true},
                                         {2, 2, 512, true, true, true},
                                         {1, 4, 384, true, true, false},   // not 256-column blocks
                                         {2, 4, 200, true, false, false},  // not 128-column chunks
                                         {1, 6, 128, true, false, false}}) {  // six streams
    for (const auto& [allow, one] : {std::pair{true, true}, {true, false}, {false, true}}) {
      Rng rng;
      const int64_t M = k.M, hc = k.hc, D = k.D, nmix = (2 + hc) * hc;
      const HcInputs in = hc_inputs(rng, M, hc, D, nmix);
      const Tensor w = k.weighted ? rand_host(rng, {D}, 0.5f, 1.5f) : Tensor();
      const HcInputs d = hc_on_device(*gpu, in);
      const Tensor &dX = d.X, &dfn = d.fn, &dbase = d.base, &dscale = d.scale;
      const Tensor dw = k.weighted ? to_dev(*gpu, w) : Tensor();
      Tensor dy = to_dev(*gpu, rand_host(rng, {M, D})),
             dpost = to_dev(*gpu, rand_host(rng, {M, hc}, 0.f, 2.f)),
             dcomb = to_dev(*gpu, rand_host(rng, {M, hc, hc}, 0.f, 1.f));
      // The two ops in turn.
      Tensor o = dev_poisoned(*gpu, {M, hc, D}), n = dev_poisoned(*gpu, {M, D}),
             p = dev_poisoned(*gpu, {M, hc}), cb = dev_poisoned(*gpu, {M, hc, hc});
      gpu->hc_post(dX, dy, dpost, dcomb, o);
      gpu->hc_pre_norm(o, dfn, dbase, dscale, 20, 1e-6f, 1e-6f, dw, n, p, cb);
      // The one op.
      const bool was = set_cuda_hc_post_mix(*gpu, allow);
      const bool was_one = set_cuda_hc_one_launch(*gpu, one);
      Tensor fo = dev_poisoned(*gpu, {M, hc, D}), fnormed = dev_poisoned(*gpu, {M, D}),
             fp = dev_poisoned(*gpu, {M, hc}), fcb = dev_poisoned(*gpu, {M, hc, hc});
      const int64_t calls = cuda_hc_post_mix_calls(*gpu), ones = cuda_hc_one_launch_calls(*gpu);
      gpu->hc_post_pre_norm(dX, dy, dpost, dcomb, fo, dfn, dbase, dscale, 20, 1e-6f, 1e-6f, dw,
                            fnormed, fp, fcb);
      set_cuda_hc_post_mix(*gpu, was);
      set_cuda_hc_one_launch(*gpu, was_one);
      const std::string how =
          fmt::format("{} x {} x {}, post mix {}, one launch {}", M, hc, D, allow, one);
      EXPECT_EQ(cuda_hc_post_mix_calls(*gpu) - calls, allow && k.fused ? 1 : 0) << how;
      EXPECT_EQ(cuda_hc_one_launch_calls(*gpu) - ones, allow && one && k.one_launch ? 1 : 0) << how;
      auto same = [&](const Tensor& a, const Tensor& b, const char* what) {
        const Tensor ha = to_host(*gpu, a), hb = to_host(*gpu, b);
        EXPECT_EQ(0, std::memcmp(ha.data_as<float>(), hb.data_as<float>(), ha.numel() * 4))
            << what << " " << how;
      };
      same(fo, o, "streams");
      same(fnormed, n, "normed");
      same(fp, p, "post");
      same(fcb, cb, "comb");
    }
  }
}

TEST_F(Ops, HcPreNormRejectsBadShapes) {
  Rng rng;
  const HcInputs in = hc_inputs(rng, 2, 4, 64, 24);
  Tensor dX = to_dev(*gpu, in.X), p = gpu->empty({2, 4}), cb = gpu->empty({2, 4, 4});
  auto run = [&](const Tensor& w, const Tensor& normed) {
    gpu->hc_pre_norm(dX, to_dev(*gpu, in.fn), to_dev(*gpu, in.base), to_dev(*gpu, in.scale), 20,
                     1e-6f, 1e-6f, w, normed, p, cb);
  };
  EXPECT_THROW(run(to_dev(*gpu, rand_host(rng, {63})), gpu->empty({2, 64})), Error);
  EXPECT_THROW(run(Tensor(), gpu->empty({2, 65})), Error);
  EXPECT_THROW(run(Tensor(), gpu->empty({128})), Error);
}

// hc_post_head_norm is hc_post, hc_head of its streams, then rms_norm, bit for bit, whether it
// runs as one cluster kernel (up to 8 rows, 256-column blocks, up to 4 streams) or as the three
// (more rows, other widths, or a switch off), and near the CPU's.
TEST_F(Ops, HcPostHeadNormIsHcPostHcHeadRmsNorm) {
  SEED_TRACE();
  struct Case {
    int64_t M, hc, D;
    bool one_launch;
  };
  for (const Case& k : std::vector<Case>{{1, 4, 4096, true},
                                         {8, 4, 4096, true},
                                         {9, 4, 4096, false},  // past the fused rows
                                         {3, 4, 256, true},
                                         {2, 2, 512, true},
                                         {1, 4, 384, false},  // not 256-column blocks
                                         {1, 6, 128, false}}) {
    for (const auto& [allow, one] : {std::pair{true, true}, {true, false}, {false, true}}) {
      Rng rng;
      const int64_t M = k.M, hc = k.hc, D = k.D;
      const HcInputs in = hc_inputs(rng, M, hc, D, hc);
      const HcInputs d = hc_on_device(*gpu, in);
      const Tensor w = rand_host(rng, {D}, 0.5f, 1.5f), dw = to_dev(*gpu, w);
      const Tensor y = rand_host(rng, {M, D}), post = rand_host(rng, {M, hc}, 0.f, 2.f),
                   comb = rand_host(rng, {M, hc, hc}, 0.f, 1.f);
      const Tensor dy = to_dev(*gpu, y), dpost = to_dev(*gpu, post), dcomb = to_dev(*gpu, comb);
      // The three ops in turn.
      Tensor s = dev_poisoned(*gpu, {M, hc, D}), h = dev_poisoned(*gpu, {M, D}),
             n = dev_poisoned(*gpu, {M, D});
      gpu->hc_post(d.X, dy, dpost, dcomb, s);
      gpu->hc_head(s, d.fn, d.base, d.scale, 1e-6f, 1e-6f, h);
      gpu->rms_norm(h, dw, 1e-6f, n);
      // The one op.
      const bool was = set_cuda_hc_post_mix(*gpu, allow);
      const bool was_one = set_cuda_hc_one_launch(*gpu, one);
      const int64_t ones = cuda_hc_one_launch_calls(*gpu);
      Tensor got = dev_poisoned(*gpu, {M, D});
      gpu->hc_post_head_norm(d.X, dy, dpost, dcomb, d.fn, d.base, d.scale, 1e-6f, 1e-6f, dw, got);
      set_cuda_hc_post_mix(*gpu, was);
      set_cuda_hc_one_launch(*gpu, was_one);
      const std::string how =
          fmt::format("{} x {} x {}, post mix {}, one launch {}", M, hc, D, allow, one);
      EXPECT_EQ(cuda_hc_one_launch_calls(*gpu) - ones, allow && one && k.one_launch ? 1 : 0) << how;
      const Tensor want = to_host(*gpu, n), got_h = to_host(*gpu, got);
      EXPECT_EQ(0, std::memcmp(got_h.data_as<float>(), want.data_as<float>(), M * D * 4)) << how;
      Tensor ref = host({M, D});
      cpu->hc_post_head_norm(in.X, y, post, comb, in.fn, in.base, in.scale, 1e-6f, 1e-6f, w, ref);
      EXPECT_LE(rel_err(got_h, ref), kTolF32) << how;
    }
  }
}

}  // namespace
}  // namespace deepinfer::cudatest
