// CUDA vs CPU: window_pool, attention (window only, comp_idx with -1 / duplicates, comp_visible),
// indexer_scores and topk (ties -> lower index, -inf -> -1). These hold the attention and the
// indexer with every operand split into fp16 hi + lo (~fp32 products) to the CPU at fp32-sized
// tolerances; their fp16-operand defaults are ops_attention_fp16qp_test.cpp's.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "attention_cases.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace deepinfer::cudatest {
namespace {

// Every operand split (the fp16 switches off), whatever the environment's defaults.
class Attn : public CudaVsCpu {
 protected:
  void SetUp() override {
    CudaVsCpu::SetUp();
    if (!IsSkipped()) switches_.set(false, false, false);
  }
  void TearDown() override { switches_.restore(); }

 private:
  OperandSwitches switches_;
};

TEST_F(Attn, WindowPoolMatchesCpu) {
  SEED_TRACE();
  for (auto [N, S, d] :
       std::vector<std::array<int64_t, 3>>{{1, 8, 512}, {37, 4, 65}, {500, 16, 32}}) {
    Rng rng;
    Tensor kv = rand_host(rng, {N, S, d}), gate = rand_host(rng, {N, S, d}, -4.f, 4.f);
    float* g = gate.data_as<float>();
    for (int64_t i = 0; i < N * S * d; i += 7) g[i] = -kInf;
    for (int64_t s = 0; s < S; ++s) g[s * d + 1] = -kInf;  // channel 1 of row 0: no weights
    const Tensor bias = rand_host(rng, {S, d}, -3.f, 3.f);
    for (const bool with_bias : {false, true}) {
      const TensorView b = with_bias ? bias.view() : TensorView();
      Tensor ref = host({N, d});
      cpu->window_pool(kv, gate, b, ref);
      Tensor out = dev_poisoned(*gpu, {N, d});
      const Tensor dev_bias = to_dev(*gpu, bias);
      gpu->window_pool(to_dev(*gpu, kv), to_dev(*gpu, gate),
                       with_bias ? dev_bias.view() : TensorView(), out);
      const Tensor got = to_host(*gpu, out);
      EXPECT_LE(rel_err(got, ref), kTolF32);
      EXPECT_EQ(got.data_as<float>()[1], 0.f);
    }
  }
}

enum class Comp { kNone, kIdx, kVisible };

struct AttnCase {
  int64_t M, H, hd, P, window, E, K;
  Comp comp;
};

// The fp16 hi / lo split every fp32-accurate tensor-core kernel stages its operands with
// (half_split.cuh, here through launch_split_keys): hi = fp16(clamp(x, +-65504)) rounded to
// nearest even, lo = fp16(x - hi), bit for bit, at the range's edges (the largest half, ties
// just past it, overflow, infinities, NaN, subnormal halves) and over many magnitudes.
TEST_F(Attn, Fp16HiLoSplitIsExact) {
  SEED_TRACE();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {
      0.f,        -0.f,    1.f,     -1.f,     65504.f, -65504.f,
      65505.f,    65519.f, 65520.f, -65520.f, 1e6f,    -3e9f,
      inf,        -inf,    6.1e-5f, 5.9e-8f,  3e-8f,   -2.98e-8f,
      1.0009765f, 2047.5f, 2048.5f, 0.33333f, 1e-20f,  std::numeric_limits<float>::quiet_NaN()};
  Rng rng;
  while (x.size() % 4 != 0 || x.size() < 4096) {
    x.push_back(rng.uniform() * std::exp2(rng.uniform(-30.f, 20.f)));
  }
  const int64_t hd = 64, rows = static_cast<int64_t>(x.size()) / hd;
  x.resize(rows * hd);
  Tensor src = gpu->empty({rows, hd}), dst = gpu->empty({rows, 2 * hd}, DType::kF16);
  gpu->upload(x.data(), src);
  ASSERT_EQ(cuda::launch_split_keys(src.view().data_as<float>(), rows, hd,
                                    static_cast<uint16_t*>(dst.view().data()), cuda_stream(*gpu)),
            cudaSuccess);
  std::vector<uint16_t> got(rows * 2 * hd);
  gpu->download(dst, got.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < hd; ++d) {
      const float v = x[r * hd + d];
      const uint16_t hi = f32_to_f16(std::fmin(std::fmax(v, -65504.f), 65504.f));
      const float lo = v - f16_to_f32(hi);
      const uint16_t g_hi = got[r * 2 * hd + d], g_lo = got[r * 2 * hd + hd + d];
      ASSERT_EQ(g_hi, hi) << "hi of " << v;
      if (std::isnan(lo))
        ASSERT_TRUE(std::isnan(f16_to_f32(g_lo))) << "lo of " << v;
      else
        ASSERT_EQ(g_lo, f32_to_f16(lo)) << "lo of " << v;
    }
}

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
      {3, 2, 32, 2, 8, 41000, 40, Comp::kIdx},  // more entries than the dedup table: pairwise
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

// Prefill-sized calls (1100 queries of 64 heads) run blocks of two 16-head groups, or for hd
// 512 the wgmma kernel where the device has it: their rows are bitwise what a 200-row call gives
// them (one group per block; both many enough not to split keys) and what a one-row call gives
// (a decode-sized grid, two warps per dim quarter), whether their keys were split to fp16 once
// for the call (prefill segments) or per chunk (decode rows beside them), and match the CPU (hd
// 64; 512 is the V4-Flash shape, GPU only: the CPU reference would take minutes).
TEST_F(Attn, PrefillSizedCallsMatchSmallerCalls) {
  SEED_TRACE();
  // Keys per query <= 128 in units of 128: one pass over the keys at every call size, so the rows
  // can match bitwise (a one-row call splits keys past a unit; restored at the end).
  const int64_t M = 1100, H = 64, window = 96, E = 300, K = 32, S = 200;
  const int sms = cuda::list_devices().at(0).multiprocessors;
  cuda::set_attention_split_keys(128);
  // Pairs from 32 one-group blocks per SM on (1056 rows here), so that the 200-row calls run one
  // group per block; restored at the end.
  cuda::set_attention_pair_blocks(32);
  ASSERT_EQ(2, cuda::attention_groups_per_block(M, H, sms));
  ASSERT_EQ(1, cuda::attention_groups_per_block(S, H, sms));
  ASSERT_EQ(1, cuda::attention_splits(S, H, window + K, sms));
  ASSERT_EQ(1, cuda::attention_splits(1, H, window + K, sms));
  // The 200-row calls' one-group blocks (800) fill more than a wave: one warp per dim quarter;
  // the one-row calls' (4) two, splitting each chunk's keys (hd 512; hd 64 keeps one).
  ASSERT_EQ(1, cuda::attention_quarter_warps(1, 512, S * H / 16, sms));
  ASSERT_EQ(2, cuda::attention_quarter_warps(1, 512, H / 16, sms));
  ASSERT_EQ(1, cuda::attention_quarter_warps(1, 64, H / 16, sms));
  for (int64_t hd : {64, 512}) {
    Rng rng;
    const Tensor q = rand_host(rng, {M, H, hd}), win = rand_host(rng, {M, hd});
    const Tensor comp = rand_host(rng, {E, hd}), sinks = rand_host(rng, {H}, -2.f, 2.f);
    std::vector<int32_t> v(M * K);
    for (auto& e : v) e = static_cast<int32_t>(rng.integer(-1, E - 1));
    const Tensor idx = i32_host(v, {M, K});
    const float scale = 1.f / std::sqrt(static_cast<float>(hd));
    Tensor dq = to_dev(*gpu, q), dwin = to_dev(*gpu, win), dcomp = to_dev(*gpu, comp);
    Tensor didx = to_dev(*gpu, idx), dsinks = to_dev(*gpu, sinks);
    Tensor out = dev_poisoned(*gpu, {M, H, hd});
    const bool wgmma = set_cuda_wgmma(*gpu, true);  // the default; false where none
    const int64_t calls = cuda_wgmma_attention_calls(*gpu);
    gpu->attention(dq, dwin, window, dcomp, didx, TensorView(), dsinks, scale, out);
    // 64 heads of 512 take the wgmma kernel where the device has it (the rows below compare
    // its bits with the mma.sync kernel's); other shapes the mma.sync kernel.
    EXPECT_EQ(cuda_wgmma_attention_calls(*gpu) - calls, wgmma && hd == 512 ? 1 : 0);
    const Tensor got = to_host(*gpu, out);
    if (hd == 64) {
      Tensor ref = host({M, H, hd});
      cpu->attention(q, win, window, comp, idx, TensorView(), sinks, scale, ref);
      EXPECT_LE(rel_err(got, ref), kTolAttention) << "hd " << hd;
    }
    for (int64_t r0 : {int64_t{0}, int64_t{450}, M - S}) {
      // Rows [r0, r0 + S) after r0 rows of context: window rows win[0, r0 + S).
      Tensor part = dev_poisoned(*gpu, {S, H, hd});
      gpu->attention(dq.view().slice_rows(r0, r0 + S), dwin.view().slice_rows(0, r0 + S), window,
                     dcomp, didx.view().slice_rows(r0, r0 + S), TensorView(), dsinks, scale, part);
      EXPECT_EQ(0, std::memcmp(to_host(*gpu, part).data_as<float>(),
                               got.data_as<float>() + r0 * H * hd, S * H * hd * sizeof(float)))
          << "hd " << hd << ": rows from " << r0 << " differ from theirs in the full call";
    }
    for (int64_t r : {int64_t{0}, int64_t{450}, M - 1}) {
      Tensor one = dev_poisoned(*gpu, {1, H, hd});
      gpu->attention(dq.view().slice_rows(r, r + 1), dwin.view().slice_rows(0, r + 1), window,
                     dcomp, didx.view().slice_rows(r, r + 1), TensorView(), dsinks, scale, one);
      EXPECT_EQ(0, std::memcmp(to_host(*gpu, one).data_as<float>(),
                               got.data_as<float>() + r * H * hd, H * hd * sizeof(float)))
          << "hd " << hd << ": row " << r << " alone differs from itself in the full call";
    }
    // One call of the prefill segment (its keys split to fp16 once) and a decode-like row of
    // its own (fp32 keys converted per chunk, in the same two-group blocks): the same bits.
    const int64_t r = 450;
    Tensor q2 = host({M + 1, H, hd});
    std::memcpy(q2.data_as<float>(), q.data_as<float>(), M * H * hd * sizeof(float));
    std::memcpy(q2.data_as<float>() + M * H * hd, q.data_as<float>() + r * H * hd,
                H * hd * sizeof(float));
    const Tensor dq2 = to_dev(*gpu, q2);
    const std::vector<Backend::AttentionSegment> segs{
        {0, M, dwin, dcomp, didx, TensorView()},
        {M, 1, dwin.view().slice_rows(0, r + 1), dcomp, didx.view().slice_rows(r, r + 1),
         TensorView()}};
    Tensor out2 = dev_poisoned(*gpu, {M + 1, H, hd});
    gpu->attention_batch(dq2, segs, window, dsinks, scale, out2);
    const Tensor got2 = to_host(*gpu, out2);
    EXPECT_EQ(0,
              std::memcmp(got2.data_as<float>(), got.data_as<float>(), M * H * hd * sizeof(float)))
        << "hd " << hd << ": the prefill rows differ beside a decode row";
    EXPECT_EQ(0, std::memcmp(got2.data_as<float>() + M * H * hd, got.data_as<float>() + r * H * hd,
                             H * hd * sizeof(float)))
        << "hd " << hd << ": the decode row differs from the same query in the prefill";
  }
  cuda::set_attention_pair_blocks(cuda::kAttentionPairBlocksPerSm);
  cuda::set_attention_split_keys(cuda::kAttentionSplitKeys);
}

// Several sequences in one attention_batch call (a decode step's batch, plus a prefill-like
// segment): each segment's rows match the CPU's attention of that segment, and are bitwise what
// the GPU gives the segment alone (a sequence's numbers do not depend on its companions), and
// what blocks of head-group pairs give them (rows with key splits included).
TEST_F(Attn, AttentionBatchMatchesEachSegmentAlone) {
  SEED_TRACE();
  Rng rng;
  const int64_t H = 64, hd = 512, window = 128;
  struct Shape {
    int64_t S, P, E, K;
    Comp comp;
  };
  struct Seg : Shape {
    explicit Seg(const Shape& s) : Shape(s) {}
    Tensor win, comp_kv, idx, vis;  // host
  };
  const std::vector<Shape> shapes = {
      {1, 127, 300, 512, Comp::kIdx},  {1, 20, 0, 0, Comp::kNone},
      {1, 127, 33, 0, Comp::kVisible}, {5, 60, 40, 16, Comp::kIdx},
      {1, 127, 2000, 512, Comp::kIdx}, {1, 3, 9, 0, Comp::kVisible},
      {0, 4, 0, 0, Comp::kNone},       {1, 127, 700, 64, Comp::kIdx}};
  std::vector<Seg> segs;
  for (const Shape& sh : shapes) segs.emplace_back(sh);
  int64_t M = 0;
  for (Seg& g : segs) {
    g.win = rand_host(rng, {g.P + g.S, hd});
    if (g.E > 0) g.comp_kv = rand_host(rng, {g.E, hd});
    if (g.comp == Comp::kIdx) {
      std::vector<int32_t> v(g.S * g.K);
      for (auto& e : v) e = static_cast<int32_t>(rng.integer(-1, g.E - 1));
      g.idx = i32_host(v, {g.S, g.K});
    } else if (g.comp == Comp::kVisible) {
      std::vector<int32_t> v(g.S);
      for (auto& e : v) e = static_cast<int32_t>(rng.integer(0, g.E));
      g.vis = i32_host(v, {g.S});
    }
    M += g.S;
  }
  const Tensor q = rand_host(rng, {M, H, hd}), sinks = rand_host(rng, {H}, -2.f, 2.f);
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  Tensor dq = to_dev(*gpu, q), dsinks = to_dev(*gpu, sinks);
  std::vector<Tensor> keep;  // device copies of every segment's tensors
  auto dev = [&](const Tensor& t) {
    if (!t.defined()) return TensorView();
    keep.push_back(to_dev(*gpu, t));
    return keep.back().view();
  };
  std::vector<Backend::AttentionSegment> dsegs;
  int64_t row0 = 0;
  for (const Seg& g : segs) {
    dsegs.push_back({row0, g.S, dev(g.win), dev(g.comp_kv), dev(g.idx), dev(g.vis)});
    row0 += g.S;
  }
  Tensor out = dev_poisoned(*gpu, {M, H, hd});
  gpu->attention_batch(dq, dsegs, window, dsinks, scale, out);
  const Tensor got = to_host(*gpu, out);
  const int sms = cuda::list_devices().at(0).multiprocessors;
  ASSERT_EQ(1, cuda::attention_groups_per_block(M, H, sms));
  cuda::set_attention_pair_blocks(0);  // pairs for any call
  Tensor paired = dev_poisoned(*gpu, {M, H, hd});
  gpu->attention_batch(dq, dsegs, window, dsinks, scale, paired);
  cuda::set_attention_pair_blocks(cuda::kAttentionPairBlocksPerSm);
  EXPECT_TRUE(floats(got) == floats(to_host(*gpu, paired))) << "one group per block vs pairs";
  for (size_t i = 0; i < segs.size(); ++i) {
    const Seg& g = segs[i];
    if (g.S == 0) continue;
    const int64_t r0 = dsegs[i].row0, n = g.S * H * hd;
    Tensor ref = host({g.S, H, hd});
    cpu->attention(q.view().slice_rows(r0, r0 + g.S), g.win, window, g.comp_kv.view(), g.idx.view(),
                   g.vis.view(), sinks, scale, ref);
    Tensor got_seg = host({g.S, H, hd});
    std::copy_n(got.data_as<float>() + r0 * H * hd, n, got_seg.data_as<float>());
    EXPECT_LE(rel_err(got_seg, ref), kTolAttention) << "segment " << i;
    Tensor alone = dev_poisoned(*gpu, {g.S, H, hd});
    gpu->attention(dq.view().slice_rows(r0, r0 + g.S), dsegs[i].win_kv, window, dsegs[i].comp_kv,
                   dsegs[i].comp_idx, dsegs[i].comp_visible, dsinks, scale, alone);
    EXPECT_EQ(0, std::memcmp(to_host(*gpu, alone).data_as<float>(), got_seg.data_as<float>(),
                             n * sizeof(float)))
        << "segment " << i << " alone differs from its rows in the batch";
  }
  // Segments must tile q's rows in order.
  std::vector<Backend::AttentionSegment> gap = dsegs;
  gap[1].row0 += 1;
  EXPECT_THROW(gpu->attention_batch(dq, gap, window, dsinks, scale, out), Error);
}

Tensor bf16_poisoned(Backend& gpu, std::vector<int64_t> shape) {
  Tensor poison = host(std::move(shape), DType::kBF16);
  std::fill_n(poison.data_as<uint16_t>(), poison.numel(), uint16_t{0x7fc1});
  return to_dev(gpu, poison);
}

// Decode rows' key units fold alike however a launch schedules them (attention_unit_plan): a
// batch of enough rows to fold every row's units in its own blocks, a batch of 16 (several units
// per block, partials merged), and each row alone (a unit per block) give the same bits, fp32
// and de-rotated into bf16, and match the CPU. Rows of 20 keys (one unit), up to 168 (a window
// and a visible prefix: 3 units of 64, the last partial or empty) and up to 128 + 512 (comp_idx
// with -1 and duplicates: units past the row's distinct keys stay empty); head dims 512 (two
// warps per quarter) and 64.
TEST_F(Attn, DecodeUnitsFoldAlikeInEveryPlan) {
  SEED_TRACE();
  const int sms = cuda::list_devices().at(0).multiprocessors;
  const int64_t H = 64, window = 128, R = 16;
  // Rows r % 3 == 0 see one unit of keys; the others split (4 one-group blocks a row): enough of
  // them for a block per SM. The first 16 have 5 rows of 10 units and 5 of 3 (168 keys at most).
  ASSERT_EQ(64, cuda::attention_split_keys());
  const int64_t rows = (sms + 3) / 4 * 3 / 2 + 6, split_rows = rows - (rows + 2) / 3;
  ASSERT_TRUE(cuda::attention_unit_plan(split_rows, split_rows * 3, H, sms).fold);
  ASSERT_FALSE(cuda::attention_unit_plan(10, 5 * 10 + 5 * 3, H, sms).fold);
  ASSERT_GT(cuda::attention_unit_plan(10, 5 * 10 + 5 * 3, H, sms).units_per_block, 1);
  ASSERT_EQ(1, cuda::attention_unit_plan(1, 10, H, sms).units_per_block);
  for (int64_t hd : {512, 64}) {
    SCOPED_TRACE(testing::Message() << "hd " << hd);
    Rng rng;
    const Tensor sinks = rand_host(rng, {H}, -2.f, 2.f), dsinks = to_dev(*gpu, sinks);
    const float scale = 1.f / std::sqrt(static_cast<float>(hd));
    const Tensor dfreq = rope_freqs_dev(*gpu, R);
    struct Row {
      Tensor win, comp, idx, vis;  // host
    };
    std::vector<Row> host_rows(static_cast<size_t>(rows));
    std::vector<Backend::AttentionSegment> segs;
    std::vector<Tensor> keep;
    auto dev = [&](const Tensor& t) {
      if (!t.defined()) return TensorView();
      keep.push_back(to_dev(*gpu, t));
      return keep.back().view();
    };
    for (int64_t r = 0; r < rows; ++r) {
      Row& h = host_rows[r];
      const int kind = static_cast<int>(r % 3);
      h.win = rand_host(rng, {kind == 0 ? 20 : 128 + rng.integer(0, 60), hd});
      if (kind == 1) {
        h.comp = rand_host(rng, {40, hd});
        h.vis = i32_host({static_cast<int32_t>(rng.integer(0, 40))}, {1});
      } else if (kind == 2) {
        const int64_t E = rng.integer(300, 2000);
        h.comp = rand_host(rng, {E, hd});
        std::vector<int32_t> v(512);
        for (auto& e : v) e = static_cast<int32_t>(rng.integer(-1, E - 1));
        v[1] = v[0];
        h.idx = i32_host(v, {1, 512});
      }
      segs.push_back({r, 1, dev(h.win), dev(h.comp), dev(h.idx), dev(h.vis)});
    }
    const Tensor q = rand_host(rng, {rows, H, hd}), dq = to_dev(*gpu, q);
    std::vector<int32_t> pos(rows);
    for (auto& e : pos) e = static_cast<int32_t>(rng.integer(0, 200000));
    const Tensor dpos = to_dev(*gpu, i32_host(pos, {rows}));
    // The rows [r0, r0 + n) as one call: fp32, and de-rotated bf16.
    auto run = [&](int64_t r0, int64_t n, bool derotated) {
      std::vector<Backend::AttentionSegment> part(segs.begin() + r0, segs.begin() + r0 + n);
      for (auto& g : part) g.row0 -= r0;
      const TensorView qv = dq.view().slice_rows(r0, r0 + n);
      if (!derotated) {
        Tensor out = dev_poisoned(*gpu, {n, H, hd});
        gpu->attention_batch(qv, part, window, dsinks, scale, out);
        return to_host(*gpu, out);
      }
      Tensor out = bf16_poisoned(*gpu, {n, H, hd});
      gpu->attention_batch_derotated(qv, part, window, dsinks, scale,
                                     dpos.view().slice_rows(r0, r0 + n), dfreq, out);
      return to_host(*gpu, out);
    };
    for (bool derotated : {false, true}) {
      SCOPED_TRACE(derotated ? "de-rotated bf16" : "fp32");
      const Tensor all = run(0, rows, derotated);
      const size_t row_bytes = static_cast<size_t>(H * hd) * (derotated ? 2 : 4);
      const auto* all_bytes = static_cast<const unsigned char*>(all.view().data());
      const Tensor sixteen = run(0, 16, derotated);
      EXPECT_EQ(0, std::memcmp(sixteen.view().data(), all_bytes, 16 * row_bytes))
          << "a batch of 16 differs from the folding batch";
      for (int64_t r = 0; r < rows; ++r) {
        const Tensor one = run(r, 1, derotated);
        EXPECT_EQ(0, std::memcmp(one.view().data(), all_bytes + r * row_bytes, row_bytes))
            << "row " << r << " alone differs from its row in the folding batch";
        if (derotated || r >= 9) continue;
        const Row& h = host_rows[r];
        Tensor ref = host({1, H, hd});
        cpu->attention(q.view().slice_rows(r, r + 1), h.win, window, h.comp.view(), h.idx.view(),
                       h.vis.view(), sinks, scale, ref);
        Tensor got = host({1, H, hd});
        std::memcpy(got.data_as<float>(), all_bytes + r * row_bytes, row_bytes);
        EXPECT_LE(rel_err(got, ref), kTolAttention) << "row " << r;
      }
    }
  }
}

// attention_batch_derotated: bitwise attention_batch then rope(inverse) on the GPU into fp32, and
// those values rounded to nearest even into bf16, for rows the main kernel writes (a prefill
// segment in two-group blocks, one-split rows in one-group blocks) and rows the merge writes
// (decode rows with key splits); an odd head dim goes the two ops' way. Bad rope inputs and a
// bf16 output without the rotation are refused.
TEST_F(Attn, AttentionDerotatedIsAttentionThenInverseRope) {
  SEED_TRACE();
  const int sms = cuda::list_devices().at(0).multiprocessors;
  const int64_t H = 64, window = 128, Mp = 1100;
  ASSERT_EQ(2, cuda::attention_groups_per_block(Mp + 3, H, sms));
  ASSERT_EQ(1, cuda::attention_groups_per_block(3, H, sms));
  ASSERT_GT(cuda::attention_splits(1, H, window + 512, sms), 1);
  ASSERT_EQ(1, cuda::attention_splits(1, H, 21, sms));
  for (auto [hd, R] : std::vector<std::array<int64_t, 2>>{{512, 32}, {65, 16}}) {
    SCOPED_TRACE(testing::Message() << "hd " << hd);
    Rng rng;
    const Tensor sinks = rand_host(rng, {H}, -2.f, 2.f), dsinks = to_dev(*gpu, sinks);
    const float scale = 1.f / std::sqrt(static_cast<float>(hd));
    const Tensor dfreq = rope_freqs_dev(*gpu, R);
    std::vector<Tensor> keep;
    auto dev = [&](const Tensor& t) {
      keep.push_back(to_dev(*gpu, t));
      return keep.back().view();
    };
    auto idx = [&](int64_t S, int64_t K, int64_t E) {
      std::vector<int32_t> v(S * K);
      for (auto& e : v) e = static_cast<int32_t>(rng.integer(-1, E - 1));
      return dev(i32_host(v, {S, K}));
    };
    // A prefill segment, a decode row with key splits (640 keys), one of 21 keys.
    const TensorView win_p = dev(rand_host(rng, {Mp, hd})), comp_p = dev(rand_host(rng, {300, hd}));
    const TensorView win_d = dev(rand_host(rng, {128, hd})),
                     comp_d = dev(rand_host(rng, {2000, hd}));
    const TensorView win_s = dev(rand_host(rng, {21, hd}));
    const std::vector<Backend::AttentionSegment> decode{
        {0, 1, win_d, comp_d, idx(1, 512, 2000), TensorView()},
        {1, 1, win_s, TensorView(), TensorView(), TensorView()}};
    std::vector<Backend::AttentionSegment> all{
        {0, Mp, win_p, comp_p, idx(Mp, 32, 300), TensorView()}};
    for (Backend::AttentionSegment g : decode) {
      g.row0 += Mp;
      all.push_back(g);
    }
    using Segs = std::vector<Backend::AttentionSegment>;
    for (const Segs* segs : std::initializer_list<const Segs*>{&all, &decode}) {
      const int64_t M = segs->back().row0 + 1;
      const Tensor dq = to_dev(*gpu, rand_host(rng, {M, H, hd}));
      std::vector<int32_t> pos(M);
      for (auto& p : pos) p = static_cast<int32_t>(rng.integer(0, 200000));
      const Tensor dpos = to_dev(*gpu, i32_host(pos, {M}));
      Tensor want = dev_poisoned(*gpu, {M, H, hd});
      gpu->attention_batch(dq, *segs, window, dsinks, scale, want);
      gpu->rope(want, dpos, dfreq, true);
      const Tensor ref = to_host(*gpu, want);
      Tensor got = dev_poisoned(*gpu, {M, H, hd});
      gpu->attention_batch_derotated(dq, *segs, window, dsinks, scale, dpos, dfreq, got);
      EXPECT_TRUE(floats(ref) == floats(to_host(*gpu, got))) << M << " rows, fp32";
      Tensor poison = host({M, H, hd}, DType::kBF16);
      std::fill_n(poison.data_as<uint16_t>(), poison.numel(), uint16_t{0x7fc1});
      Tensor got16 = to_dev(*gpu, poison);
      gpu->attention_batch_derotated(dq, *segs, window, dsinks, scale, dpos, dfreq, got16);
      const Tensor h16 = to_host(*gpu, got16);
      int64_t bad = 0;
      for (int64_t i = 0; i < ref.numel(); ++i)
        bad += h16.data_as<uint16_t>()[i] != f32_to_bf16(ref.data_as<float>()[i]);
      EXPECT_EQ(bad, 0) << M << " rows, bf16";
      if (segs != &decode) continue;
      EXPECT_THROW(gpu->attention_batch(dq, *segs, window, dsinks, scale, got16), Error);
      EXPECT_THROW(gpu->attention_batch_derotated(dq, *segs, window, dsinks, scale,
                                                  dpos.view().slice_rows(0, 1), dfreq, got),
                   Error);
      Tensor long_freq = to_dev(*gpu, rand_host(rng, {hd}));
      EXPECT_THROW(
          gpu->attention_batch_derotated(dq, *segs, window, dsinks, scale, dpos, long_freq, got),
          Error);
    }
  }
}

// Prefill-sized calls (WgmmaBatch) on Hopper's wgmma kernels give bitwise what the mma.sync
// kernel gives; fp32 out, and de-rotated into bf16; with every operand split (the streaming
// kernel) and with Q and P in fp16 (set_attention_fp16_qp: the one-pass kernel, persistent
// blocks of several rows each). Skips where the device has no wgmma.
TEST_F(Attn, AttentionWgmmaIsTheMmaSyncKernel) {
  SEED_TRACE();
  if (!set_cuda_wgmma(*gpu, true)) GTEST_SKIP() << "no wgmma on this device";
  Rng rng;
  WgmmaBatch w(*gpu, rng);
  const int64_t M = w.M, H = w.H, hd = w.hd;
  const int sms = cuda::list_devices().at(0).multiprocessors;
  ASSERT_EQ(2, cuda::attention_groups_per_block(M, H, sms));
  ASSERT_EQ(1, cuda::attention_splits(150, H, w.window + 512, sms));
  for (const bool fp16_qp : {false, true}) {
    SCOPED_TRACE(testing::Message() << "fp16 Q and P " << fp16_qp);
    cuda::set_attention_fp16_qp(fp16_qp);
    Tensor out[2], out16[2];
    for (int on = 0; on < 2; ++on) {
      ASSERT_EQ(set_cuda_wgmma(*gpu, on == 1), on == 1);
      const int64_t calls = cuda_wgmma_attention_calls(*gpu);
      out[on] = dev_poisoned(*gpu, {M, H, hd});
      gpu->attention_batch(w.q, w.segs, w.window, w.sinks, w.scale, out[on]);
      out16[on] = bf16_poisoned(*gpu, {M, H, hd});
      gpu->attention_batch_derotated(w.q, w.segs, w.window, w.sinks, w.scale, w.pos, w.freq,
                                     out16[on]);
      // Both calls took the kernel the setting names (else the comparison below proves nothing).
      EXPECT_EQ(cuda_wgmma_attention_calls(*gpu) - calls, on ? 2 : 0) << "wgmma " << on;
    }
    set_cuda_wgmma(*gpu, true);
    const Tensor a = to_host(*gpu, out[0]), b = to_host(*gpu, out[1]);
    EXPECT_EQ(floats_differing(a, b), 0) << "of " << a.numel() << " fp32 outputs";
    EXPECT_EQ(finite_count(b), a.numel());
    EXPECT_TRUE(same_bytes(*gpu, out16[0], out16[1])) << "bf16 de-rotated";
  }
}

// attention_batch_raw_q is bitwise rms_norm_rope then attention_batch_derotated: on the wgmma
// kernel, whose query halves are made normalised and rotated (counted), on the mma.sync
// kernel and for decode-sized rows (the queries normalised into a copy first), fp32 and bf16
// out, with every operand split and with Q and P in fp16. Queries of a wide range of scales, so
// that a wrong per-head factor cannot hide.
TEST_F(Attn, RawQueriesAreNormRopeThenAttention) {
  SEED_TRACE();
  Rng rng;
  WgmmaBatch w(*gpu, rng);
  const int64_t M = w.M, H = w.H, hd = w.hd;
  {
    Tensor qh = to_host(*gpu, w.q);
    for (int64_t r = 0; r < M * H; ++r)
      for (int64_t d = 0; d < hd; ++d) qh.data_as<float>()[r * hd + d] *= 0.01f + (r % 97);
    w.q = to_dev(*gpu, qh);
  }
  const float eps = 1e-6f;
  // The decode-sized call: three rows of their own keys.
  const Tensor small_kv = to_dev(*gpu, rand_host(rng, {40, hd}));
  const std::vector<Backend::AttentionSegment> small{
      {0, 3, small_kv.view(), TensorView(), TensorView(), TensorView()}};
  for (const bool fp16_qp : {false, true})
    for (int on = 0; on < 2; ++on) {
      cuda::set_attention_fp16_qp(fp16_qp);
      if (set_cuda_wgmma(*gpu, on == 1) != (on == 1)) continue;
      for (DType dt : {DType::kF32, DType::kBF16})
        for (int decode = 0; decode < 2; ++decode) {
          SCOPED_TRACE(testing::Message()
                       << "fp16 Q and P " << fp16_qp << " wgmma " << on << " bf16 "
                       << (dt == DType::kBF16) << " decode " << decode);
          const int64_t rows = decode ? 3 : M;
          const TensorView q = w.q.view().slice_rows(0, rows),
                           pos = w.pos.view().slice_rows(0, rows);
          const auto& segs = decode ? small : w.segs;
          auto out = [&] {
            return dt == DType::kBF16 ? bf16_poisoned(*gpu, {rows, H, hd})
                                      : dev_poisoned(*gpu, {rows, H, hd});
          };
          Tensor normed = dev_poisoned(*gpu, {rows, H, hd}), ref = out(), got = out();
          gpu->rms_norm_rope(q, TensorView(), eps, pos, w.freq, normed);
          gpu->attention_batch_derotated(normed, segs, w.window, w.sinks, w.scale, pos, w.freq,
                                         ref);
          EXPECT_EQ(gpu->attention_normalises_raw_q(rows, H, hd, w.R), on && !decode);
          const int64_t fused = cuda_fused_q_norm_attention_calls(*gpu);
          gpu->attention_batch_raw_q(q, segs, w.window, w.sinks, w.scale, eps, pos, w.freq, got);
          EXPECT_EQ(cuda_fused_q_norm_attention_calls(*gpu) - fused, on && !decode ? 1 : 0);
          EXPECT_TRUE(same_bytes(*gpu, ref, got));
        }
    }
  set_cuda_wgmma(*gpu, true);
}

// indexer_scores_batch on the GPU (one launch for many sequences' decode rows, each against its
// own keys) matches the CPU's, -inf padding included; V4-Flash indexer shapes (64 heads x 128).
// Decode and chunk rows, each segment its own keys (some empty, a visible count short of E,
// segments of several rows sharing keys), on the wgmma kernel where the device has it (its
// blocks split the keys as they stage them) and on the fp32 kernel, against the CPU.
TEST_F(Attn, IndexerScoresBatchMatchesCpu) {
  SEED_TRACE();
  for (auto [nh, d] : std::vector<std::array<int64_t, 2>>{{64, 128}, {37, 64}})
    for (const bool wgmma : {true, false}) {
      if (set_cuda_wgmma(*gpu, wgmma) != wgmma) continue;
      SCOPED_TRACE(testing::Message() << "nh " << nh << " d " << d << " wgmma " << wgmma);
      Rng rng;
      const int64_t M = 15, N = 1100;
      const Tensor q = rand_host(rng, {M, nh, d}), w = rand_host(rng, {M, nh});
      std::vector<Tensor> keys, dkeys;
      std::vector<int32_t> vis(M);
      std::vector<Backend::IndexerSegment> hsegs, dsegs;
      int64_t R = 0;
      for (int64_t i = 0, row0 = 0; row0 < M; ++i) {  // every other row skipped, some shared
        const int64_t count = i % 3 == 2 ? 3 : 1;
        const int64_t E = i == 0 ? N : (i == 1 ? 0 : rng.integer(1, N));
        keys.push_back(rand_host(rng, {E, d}));
        dkeys.push_back(E > 0 ? to_dev(*gpu, keys.back()) : Tensor());
        const int64_t rows = std::min(count, M - row0);
        for (int64_t r = 0; r < rows; ++r)
          vis[row0 + r] = static_cast<int32_t>(i == 3 ? E / 2 : std::max<int64_t>(E - r, 0));
        hsegs.push_back({row0, rows, E > 0 ? keys.back().view() : TensorView()});
        dsegs.push_back({row0, rows, dkeys.back().view()});
        R += rows;
        row0 += rows + 1;
      }
      const Tensor visible = i32_host(vis, {M});
      Tensor ref = host({R, N});
      cpu->indexer_scores_batch(q, hsegs, w, 0.3f, visible, ref);
      Tensor out = dev_poisoned(*gpu, {R, N});
      gpu->indexer_scores_batch(to_dev(*gpu, q), dsegs, to_dev(*gpu, w), 0.3f,
                                to_dev(*gpu, visible), out);
      const Tensor got = to_host(*gpu, out);
      int64_t finite = 0;
      for (int64_t i = 0; i < R * N; ++i) {
        const float r = ref.data_as<float>()[i], g = got.data_as<float>()[i];
        if (std::isinf(r)) {
          ASSERT_EQ(g, r) << i;
        } else {
          ++finite;
          ASSERT_NEAR(g, r, 1e-4f * (1.f + std::fabs(r))) << i;
        }
      }
      EXPECT_GT(finite, N);
    }
  set_cuda_wgmma(*gpu, true);
}

// A decode row's scores (indexer_scores_batch: its block splits the keys as it stages them) are
// bitwise the row's scores in a prefill call over the same keys (indexer_scores: the keys split
// by a pass before): the indexer's picks do not depend on how a row was batched.
TEST_F(Attn, IndexerDecodeRowsAreThePrefillCallsRows) {
  SEED_TRACE();
  if (!set_cuda_wgmma(*gpu, true)) GTEST_SKIP() << "no wgmma on this device";
  for (auto [nh, d, E] : kIndexerRowShapes) {
    SCOPED_TRACE(testing::Message() << "nh " << nh << " d " << d << " E " << E);
    Rng rng;
    const IndexerRows c(rng, nh, d, E);
    const int64_t M = c.M;
    const Tensor q = to_dev(*gpu, c.q), w = to_dev(*gpu, c.w), k = to_dev(*gpu, c.k);
    const Tensor vis = to_dev(*gpu, c.vis);
    Tensor prefill = dev_poisoned(*gpu, {M, E}), decode = dev_poisoned(*gpu, {M, E});
    gpu->indexer_scores(q, k, w, 0.3f, vis, prefill);
    gpu->indexer_scores_batch(q, IndexerRows::one_row_segments(k), w, 0.3f, vis, decode);
    EXPECT_TRUE(same_bytes(*gpu, prefill, decode));
  }
}

TEST_F(Attn, IndexerScoresMatchCpu) {
  SEED_TRACE();
  struct Case {
    int64_t M, nh, d, E;
    bool causal;
  };
  for (bool wgmma : wgmma_settings(*gpu))
    for (const Case& c : std::vector<Case>{{1, 8, 16, 6, false},
                                           {9, 4, 32, 100, false},
                                           {33, 64, 128, 257, false},
                                           {1, 64, 128, 5000, false},
                                           {301, 64, 128, 1100, false},
                                           {256, 64, 128, 4100, true},
                                           {131, 37, 64, 300, false},
                                           {4, 64, 128, 3, false}}) {
      SCOPED_TRACE(::testing::Message() << (wgmma ? "wgmma " : "gemm ") << c.M << " " << c.nh << " "
                                        << c.d << " " << c.E);
      set_cuda_wgmma(*gpu, wgmma);
      Rng rng;
      const Tensor q = rand_host(rng, {c.M, c.nh, c.d}), k = rand_host(rng, {c.E, c.d});
      const Tensor w = rand_host(rng, {c.M, c.nh});
      std::vector<int32_t> v(c.M);
      for (int64_t m = 0; m < c.M; ++m)
        v[m] = static_cast<int32_t>(c.causal ? std::min(c.E, (m + 1) * c.E / c.M)
                                             : rng.integer(0, c.E));
      v[0] = static_cast<int32_t>(c.causal ? 0 : c.E);
      const Tensor vis = i32_host(v, {c.M});
      const float scale = 0.25f;
      Tensor ref = host({c.M, c.E});
      cpu->indexer_scores(q, k, w, scale, vis, ref);
      Tensor out = dev_poisoned(*gpu, {c.M, c.E});
      const Tensor dq = to_dev(*gpu, q), dk = to_dev(*gpu, k), dw = to_dev(*gpu, w);
      gpu->indexer_scores(dq, dk, dw, scale, to_dev(*gpu, vis), out);
      EXPECT_LE(rel_err(to_host(*gpu, out), ref), kTolF32);
      // A visible count outside [0, E]: found on the device, reported at the next sync.
      v[c.M - 1] = static_cast<int32_t>(c.E + 1);
      EXPECT_THROW(
          {
            gpu->indexer_scores(dq, dk, dw, scale, to_dev(*gpu, i32_host(v, {c.M})), out);
            to_host(*gpu, out);
          },
          Error);
    }
}

TEST_F(Attn, TopkMatchesCpuWithTiesAndInfinities) {
  SEED_TRACE();
  for (auto [M, N, k] : std::vector<std::array<int64_t, 3>>{{1, 6, 6},
                                                            {4, 10, 1},
                                                            {7, 100, 17},
                                                            {3, 5000, 512},
                                                            {2, 70000, 2048},
                                                            {2, 3000, 1000},
                                                            {1, 20000, 8192},
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
