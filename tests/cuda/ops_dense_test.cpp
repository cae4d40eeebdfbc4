// CUDA vs CPU: memory ops, matmul / grouped_matmul (bf16 weights), embedding, add, rms_norm,
// rope, swiglu and the mHC ops, on random inputs with NaN-poisoned outputs.
#include <algorithm>
#include <array>
#include <cstring>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace deepinfer::cudatest {
namespace {

using Ops = CudaVsCpu;

TEST_F(Ops, UploadDownloadCopyRoundTrip) {
  SEED_TRACE();
  Rng rng;
  const Tensor h = rand_host(rng, {37, 129});
  Tensor d = to_dev(*gpu, h);
  EXPECT_EQ(d.view().device(), Device::kCuda);
  Tensor d2 = gpu->empty({37, 129});
  gpu->copy(d, d2);
  EXPECT_EQ(rel_err(to_host(*gpu, d2), h), 0.0);
  // Overlapping copy (memmove semantics): rows [0, 30) -> rows [5, 35).
  gpu->copy(d.view().slice_rows(0, 30), d.view().slice_rows(5, 35));
  const Tensor got = to_host(*gpu, d);
  for (int64_t i = 0; i < 30 * 129; ++i)
    ASSERT_EQ(got.data_as<float>()[5 * 129 + i], h.data_as<float>()[i]) << i;
  // Zero-sized tensors are given (non-null) and transfer nothing.
  Tensor z = gpu->empty({0, 16});
  EXPECT_FALSE(z.view().empty());
  gpu->upload(nullptr, z);
  // Host tensors are rejected with the op's name.
  Tensor out = gpu->empty({37, 129});
  try {
    gpu->add(h, h, out);
    FAIL() << "host input accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("add"), std::string::npos) << e.what();
  }
}

// copy_batch on the device: many row copies of mixed sizes and alignments (fp32 rows, bf16
// pieces of odd length, byte-aligned int8-sized ones via bf16 halves) land where the CPU puts them.
TEST_F(Ops, CopyBatchMatchesCpu) {
  SEED_TRACE();
  Rng rng;
  const int64_t rows = 300, width = 37;
  const Tensor h = rand_host(rng, {rows, width});
  Tensor d = to_dev(*gpu, h), out = dev_poisoned(*gpu, {rows, width});
  Tensor ref = host({rows, width});
  std::fill_n(ref.data_as<float>(), rows * width, kNaN);
  std::vector<TensorView> gs, gd, cs, cd;
  for (int64_t r = 0; r + 3 <= rows; r += 4) {
    const int64_t to = rows - r - 3, n = 1 + r % 3;  // pieces of 1-3 rows, reversed order
    gs.push_back(d.view().slice_rows(r, r + n));
    gd.push_back(out.view().slice_rows(to, to + n));
    cs.push_back(h.view().slice_rows(r, r + n));
    cd.push_back(ref.view().slice_rows(to, to + n));
  }
  gpu->copy_batch(gs, gd);
  cpu->copy_batch(cs, cd);
  const Tensor got = to_host(*gpu, out);
  EXPECT_EQ(0, std::memcmp(got.data_as<float>(), ref.data_as<float>(), rows * width * 4));
  // bf16 pieces of odd element counts (2-byte aligned ends).
  Tensor hb = to_dev(*gpu, rand_host(rng, {1, 4001}), true),
         ob = gpu->empty({1, 4001}, DType::kBF16);
  const TensorView fb = hb.view().reshape({4001}), fo = ob.view().reshape({4001});
  gpu->copy_batch(std::vector<TensorView>{fb.slice_rows(0, 1), fb.slice_rows(1, 4001)},
                  std::vector<TensorView>{fo.slice_rows(4000, 4001), fo.slice_rows(0, 4000)});
  std::vector<uint16_t> src(4001), dst(4001);
  gpu->download(hb, src.data());
  gpu->download(ob, dst.data());
  EXPECT_EQ(dst[4000], src[0]);
  EXPECT_TRUE(std::equal(src.begin() + 1, src.end(), dst.begin()));
  EXPECT_THROW(gpu->copy_batch(std::vector<TensorView>{d.view().slice_rows(0, 2)},
                               std::vector<TensorView>{d.view().slice_rows(1, 3)}),
               Error);
}

TEST_F(Ops, CopyColumnsMatchesCpu) {
  SEED_TRACE();
  Rng rng;
  const Tensor h = rand_host(rng, {70, 333});
  Tensor ref = host({70, 101});
  cpu->copy_columns(h, 117, ref);
  Tensor out = dev_poisoned(*gpu, {70, 101});
  gpu->copy_columns(to_dev(*gpu, h), 117, out);
  EXPECT_EQ(rel_err(to_host(*gpu, out), ref), 0.0);
}

TEST_F(Ops, MatmulBf16WeightsMatchCpu) {
  SEED_TRACE();
  EXPECT_EQ(gpu->weight_dtype(), DType::kBF16);
  for (auto [M, N, K] :
       std::vector<std::array<int64_t, 3>>{{1, 64, 32},
                                           {3, 100, 257},
                                           {37, 512, 300},
                                           {128, 1024, 512},
                                           {5, 7, 1},
                                           {8, 130, 4096},    // K split in 8 segments
                                           {20, 200, 264},    // Narrow: two 16-row tiles
                                           {40, 96, 1000},    // 2 segments, the last short
                                           {65, 96, 136},     // Wide: two 64-row tiles
                                           {200, 256, 2048},  // 64-row tiles, 4 segments
                                           {300, 64, 64},     // past them: cuBLASLt
                                           {301, 40, 37}}) {  // its cast with a tail
    for (bool acc : {false, true}) {
      Rng rng;
      const Tensor x = rand_host(rng, {M, K}), w = rand_host(rng, {N, K});
      const Tensor wr = round_bf16(w), init = rand_host(rng, {M, N});
      Tensor ref = host({M, N});
      std::copy_n(init.data_as<float>(), M * N, ref.data_as<float>());
      cpu->matmul(x, wr, ref, acc);
      Tensor out = acc ? to_dev(*gpu, init) : dev_poisoned(*gpu, {M, N});
      gpu->matmul(to_dev(*gpu, x), to_dev(*gpu, w, true), out, acc);
      EXPECT_LE(rel_err(to_host(*gpu, out), ref), kTolBf16) << M << "x" << N << "x" << K << acc;
    }
  }
}

TEST_F(Ops, MatmulF32WeightsMatchCpu) {
  SEED_TRACE();
  Rng rng;
  const int64_t M = 9, N = 130, K = 77;
  const Tensor x = rand_host(rng, {M, K}), w = rand_host(rng, {N, K});
  Tensor ref = host({M, N});
  cpu->matmul(x, w, ref);
  Tensor out = dev_poisoned(*gpu, {M, N});
  gpu->matmul(to_dev(*gpu, x), to_dev(*gpu, w), out);
  EXPECT_LE(rel_err(to_host(*gpu, out), ref), kTolF32);
}

// A row's product is bitwise the same whatever else shares the call (decode batches of any size
// up to 256 rows): what the engine's determinism per seq_seed rests on. Measured on an H200,
// cuBLASLt's kernels for 1-8 rows and for 64 or more differ in the last bits at model shapes.
TEST_F(Ops, MatmulRowsAreBatchInvariant) {
  SEED_TRACE();
  Rng rng;
  const int64_t N = 1000, K = 1024, G = 4, NG = 96;
  // Narrow enough that K is split: each segment's partial is summed by whichever block ends last.
  ASSERT_GT(cuda::dense_gemm_split(N, K, 1).splits, 1);
  const Tensor x = rand_host(rng, {256, K}), w = rand_host(rng, {N, K});
  const Tensor wg = rand_host(rng, {G * NG, K / G});
  const Tensor dx = to_dev(*gpu, x), dw = to_dev(*gpu, w, true), dwg = to_dev(*gpu, wg, true);
  Tensor alone = gpu->empty({1, N}), galone = gpu->empty({1, G, NG});
  gpu->matmul(dx.view().slice_rows(0, 1), dw, alone);
  gpu->grouped_matmul(dx.view().slice_rows(0, 1).reshape({1, G, K / G}), dwg, galone);
  const std::vector<float> want = floats(to_host(*gpu, alone)),
                           gwant = floats(to_host(*gpu, galone));
  for (int64_t M : {2, 16, 17, 32, 33, 64, 65, 200, 256}) {  // every tile shape and its edges
    Tensor out = gpu->empty({M, N}), gout = gpu->empty({M, G, NG});
    gpu->matmul(dx.view().slice_rows(0, M), dw, out);
    gpu->grouped_matmul(dx.view().slice_rows(0, M).reshape({M, G, K / G}), dwg, gout);
    const std::vector<float> got = floats(to_host(*gpu, out)), ggot = floats(to_host(*gpu, gout));
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin())) << "matmul, M " << M;
    EXPECT_TRUE(std::equal(gwant.begin(), gwant.end(), ggot.begin())) << "grouped, M " << M;
  }
}

// Products of a few rows read fp32 x themselves (each block rounds its rows to bf16 once,
// kernels.h launch_dense_gemm_f32): bitwise the cast-then-product path, split or not, with K
// tails, accumulating, and grouped; past the resident size the cast path takes over.
TEST_F(Ops, MatmulFromFp32MatchesTheCastPath) {
  SEED_TRACE();
  Rng rng;
  struct Shape {
    int64_t M, N, K;
    bool resident;  // dense_gemm_f32_supported
  };
  for (const Shape& sh : std::vector<Shape>{{1, 4096, 4096, true},  // K split in 3
                                            {1, 300, 8192, true},   // in 16
                                            {4, 2000, 1024, true},
                                            {4, 100, 456, true},  // unsplit, a k tail of 8
                                            {3, 50, 200, true},
                                            {2, 12800, 72, true},
                                            {1, 8192, 2048, true},    // unsplit, all of K
                                            {1, 12800, 4096, true},   // two load batches
                                            {2, 4352, 4096, true},    // two rows of 2048
                                            {1, 12800, 8192, false},  // past the size
                                            {16, 6400, 1024, false}}) {
    const int64_t M = sh.M, N = sh.N, K = sh.K;
    Tensor w = gpu->empty({N, K}, DType::kBF16);
    gpu->fill_random(w, 3, -0.05f, 0.05f);
    const Tensor x = to_dev(*gpu, rand_host(rng, {M, K})), init = rand_host(rng, {M, N});
    EXPECT_EQ(cuda::dense_gemm_f32_supported(M, N, K, 1, K, K, x.view().data_as<float>(),
                                             w.view().data()),
              sh.resident)
        << M << "x" << N << "x" << K;
    for (bool acc : {false, true}) {
      std::vector<float> got[2];
      for (int f32 = 0; f32 < 2; ++f32) {
        cuda::set_dense_gemm_f32(f32 == 1);
        Tensor out = acc ? to_dev(*gpu, init) : dev_poisoned(*gpu, {M, N});
        gpu->matmul(x, w, out, acc);
        got[f32] = floats(to_host(*gpu, out));
      }
      EXPECT_TRUE(got[0] == got[1]) << M << "x" << N << "x" << K << " acc " << acc;
    }
  }
  // grouped: 8 groups of 128 x 512, one row
  Tensor wg = gpu->empty({8 * 128, 512}, DType::kBF16);
  gpu->fill_random(wg, 4, -0.05f, 0.05f);
  const Tensor xg = to_dev(*gpu, rand_host(rng, {1, 8, 512}));
  std::vector<float> got[2];
  for (int f32 = 0; f32 < 2; ++f32) {
    cuda::set_dense_gemm_f32(f32 == 1);
    Tensor out = dev_poisoned(*gpu, {1, 8, 128});
    gpu->grouped_matmul(xg, wg, out);
    got[f32] = floats(to_host(*gpu, out));
  }
  cuda::set_dense_gemm_f32(true);
  EXPECT_TRUE(got[0] == got[1]) << "grouped";
}

// bf16 x (a product's input made in its weights' dtype, as the attention output is) gives what
// fp32 x does, which the product rounds to bf16 itself: the resident-A and staged tiles, split
// or not, grouped, and cuBLASLt past the tiles' rows; bf16 x with fp32 weights is refused.
TEST_F(Ops, MatmulFromBf16XMatchesFp32X) {
  SEED_TRACE();
  Rng rng;
  for (auto [M, N, K] : std::vector<std::array<int64_t, 3>>{
           {1, 4096, 4096}, {3, 300, 8192}, {16, 1000, 1024}, {100, 512, 2048}, {300, 256, 512}}) {
    Tensor w = gpu->empty({N, K}, DType::kBF16);
    gpu->fill_random(w, 5, -0.05f, 0.05f);
    const Tensor xh = rand_host(rng, {M, K}), init = rand_host(rng, {M, N});
    const Tensor x32 = to_dev(*gpu, xh), x16 = to_dev(*gpu, xh, true);
    for (bool acc : {false, true}) {
      std::vector<float> got[2];
      for (int b = 0; b < 2; ++b) {
        Tensor out = acc ? to_dev(*gpu, init) : dev_poisoned(*gpu, {M, N});
        gpu->matmul(b ? x16 : x32, w, out, acc);
        got[b] = floats(to_host(*gpu, out));
      }
      EXPECT_TRUE(got[0] == got[1]) << M << "x" << N << "x" << K << " acc " << acc;
    }
  }
  for (int64_t M : {1, 5, 400}) {  // V4's wo_a: 8 groups of 4096 -> 1024 (smaller K here)
    Tensor wg = gpu->empty({8 * 1024, 1024}, DType::kBF16);
    gpu->fill_random(wg, 6, -0.05f, 0.05f);
    const Tensor xh = rand_host(rng, {M, 8, 1024});
    std::vector<float> got[2];
    for (int b = 0; b < 2; ++b) {
      Tensor out = dev_poisoned(*gpu, {M, 8, 1024});
      gpu->grouped_matmul(to_dev(*gpu, xh, b == 1), wg, out);
      got[b] = floats(to_host(*gpu, out));
    }
    EXPECT_TRUE(got[0] == got[1]) << "grouped, " << M << " rows";
  }
  const Tensor w32 = to_dev(*gpu, rand_host(rng, {64, 128})),
               x16 = to_dev(*gpu, rand_host(rng, {2, 128}), true);
  Tensor out = dev_poisoned(*gpu, {2, 64});
  EXPECT_THROW(gpu->matmul(x16, w32, out), Error);
}

// Split products sum their segments inside a thread block cluster on sm_90 where they have 2-8
// segments and the clusters are resident at once: bitwise the workspace path's sums (up to 16
// rows) and the in-turn sums of wider tiles, from bf16 and fp32 x, accumulating or not, grouped.
TEST_F(Ops, MatmulSplitSumsAgreeInClustersAndTheWorkspace) {
  SEED_TRACE();
  Rng rng;
  struct Shape {
    int64_t M, N, K, batch;
    int cluster;  // on sm_90: 1 sums in clusters, 0 in the workspace, -1 the occupancy decides
  };
  const bool sm90 = cuda::cluster_launch_supported();
  for (const Shape& sh : std::vector<Shape>{{1, 2560, 4096, 1, 1},   // 4 segments, fp32 x read
                                            {1, 4096, 8192, 1, -1},  // 3, a wave through the cast
                                            {2, 1000, 4096, 1, 1},   // 8
                                            {16, 256, 4000, 1, 1},   // 7, 16 rows, a k tail
                                            {1, 300, 8192, 1, 0},    // 16: the workspace
                                            {1, 128, 2048, 8, 1},    // grouped, 4 per group
                                            {20, 128, 4096, 1, 1},   // 16-row tiles, 8
                                            {100, 256, 2048, 1, 1},  // 64-row tiles, 4
                                            {128, 4096, 4096, 1, -1}}) {  // 64-row, a wave
    const int64_t M = sh.M, N = sh.N, K = sh.K, G = sh.batch;
    const int splits = cuda::dense_gemm_split(N, K, G).splits;
    ASSERT_GT(splits, 1) << N << "x" << K;
    Tensor w = gpu->empty({G * N, K}, DType::kBF16);
    gpu->fill_random(w, 5, -0.05f, 0.05f);
    const Tensor x = to_dev(*gpu, rand_host(rng, {M, G * K})), init = rand_host(rng, {M, G * N});
    const bool fp32_x = cuda::dense_gemm_f32_supported(M, N, K, G, G * K, K,
                                                       x.view().data_as<float>(), w.view().data());
    for (bool acc : {false, true}) {
      if (acc && G > 1) continue;  // grouped products do not accumulate
      std::vector<float> got[2];
      for (int cl = 0; cl < 2; ++cl) {
        cuda::set_cluster_reductions(cl == 1);
        const bool in_cluster = cuda::dense_split_in_cluster(M, N, K, G, fp32_x);
        if (cl == 0 || !sm90) {
          EXPECT_FALSE(in_cluster);
        } else if (sh.cluster >= 0) {
          EXPECT_EQ(in_cluster, sh.cluster == 1) << N << "x" << K;
        }
        Tensor out = acc ? to_dev(*gpu, init) : dev_poisoned(*gpu, {M, G * N});
        if (G == 1)
          gpu->matmul(x, w, out, acc);
        else
          gpu->grouped_matmul(x.view().reshape({M, G, K}), w, out.view().reshape({M, G, N}));
        got[cl] = floats(to_host(*gpu, out));
      }
      EXPECT_TRUE(got[0] == got[1])
          << M << "x" << N << "x" << K << " batch " << G << " acc " << acc << " splits " << splits;
    }
  }
  cuda::set_cluster_reductions(true);
}

TEST_F(Ops, GroupedMatmulMatchesCpu) {
  SEED_TRACE();
  for (auto [M, G, K, N] : std::vector<std::array<int64_t, 4>>{
           {1, 2, 64, 16},
           {5, 8, 128, 32},
           {33, 4, 96, 40},
           {2, 1, 512, 1024},
           {3, 4, 1024, 64},     // K split in 2 segments per group
           {300, 2, 64, 48}}) {  // past the tile kernel's 256 rows: cuBLASLt
    Rng rng;
    const Tensor x = rand_host(rng, {M, G, K}), w = rand_host(rng, {G * N, K});
    Tensor ref = host({M, G, N});
    cpu->grouped_matmul(x, round_bf16(w), ref);
    Tensor out = dev_poisoned(*gpu, {M, G, N});
    gpu->grouped_matmul(to_dev(*gpu, x), to_dev(*gpu, w, true), out);
    EXPECT_LE(rel_err(to_host(*gpu, out), ref), kTolBf16) << M << " " << G << " " << K << " " << N;
  }
}

// Rows by 16-byte loads (D % 8 == 0: one pass of the block's loads, and several for 16000
// columns) and by columns (D = 4100), bf16 and fp32 tables, exactly the CPU's rows.
TEST_F(Ops, EmbeddingGathersBf16AndF32Rows) {
  SEED_TRACE();
  Rng rng;
  const int64_t V = 300, D = 96, M = 41;
  std::vector<int32_t> id(M);
  for (auto& v : id) v = static_cast<int32_t>(rng.integer(0, V - 1));
  id[0] = 0;
  id[1] = V - 1;
  const Tensor ids = i32_host(id, {M});
  const Tensor table = rand_host(rng, {V, D});
  for (const int64_t width : {D, int64_t{4100}, int64_t{16000}}) {
    const Tensor t = width == D ? table : rand_host(rng, {V, width});
    for (bool bf16 : {true, false}) {
      Tensor ref = host({M, width});
      cpu->embedding(ids, bf16 ? round_bf16(t) : t, ref);
      Tensor out = dev_poisoned(*gpu, {M, width});
      gpu->embedding(to_dev(*gpu, ids), to_dev(*gpu, t, bf16), out);
      EXPECT_EQ(rel_err(to_host(*gpu, out), ref), 0.0) << bf16 << " " << width;
    }
  }
  // An id outside the table is found on the device and reported at the next sync.
  id[3] = static_cast<int32_t>(V);
  Tensor out = gpu->empty({M, D});
  gpu->embedding(to_dev(*gpu, i32_host(id, {M})), to_dev(*gpu, table, true), out);
  try {
    to_host(*gpu, out);
    FAIL() << "out-of-range id not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("embedding"), std::string::npos) << e.what();
  }
  // The error is cleared once reported.
  EXPECT_NO_THROW(to_host(*gpu, out));
}

TEST_F(Ops, AddAndSwigluMatchCpu) {
  SEED_TRACE();
  Rng rng;
  const Tensor a = rand_host(rng, {17, 333}, -6.f, 6.f), b = rand_host(rng, {17, 333}, -6.f, 6.f);
  Tensor ref = host({17, 333});
  cpu->add(a, b, ref);
  Tensor da = to_dev(*gpu, a);
  Tensor out = dev_poisoned(*gpu, {17, 333});
  gpu->add(da, to_dev(*gpu, b), out);
  EXPECT_EQ(rel_err(to_host(*gpu, out), ref), 0.0);
  gpu->add(da, to_dev(*gpu, b), da);  // out may be a
  EXPECT_EQ(rel_err(to_host(*gpu, da), ref), 0.0);
  for (float limit : {0.f, 4.f}) {
    cpu->swiglu(a, b, limit, ref);
    Tensor o = dev_poisoned(*gpu, {17, 333});
    gpu->swiglu(to_dev(*gpu, a), to_dev(*gpu, b), limit, o);
    EXPECT_LE(rel_err(to_host(*gpu, o), ref), kTolF32) << limit;
  }
}

TEST_F(Ops, RmsNormMatchesCpu) {
  SEED_TRACE();
  for (auto shape : std::vector<std::vector<int64_t>>{{1, 64}, {7, 3, 100}, {300, 4096}, {2, 1}}) {
    for (bool weighted : {true, false}) {
      Rng rng;
      const Tensor x = rand_host(rng, shape, -3.f, 3.f), w = rand_host(rng, {shape.back()});
      Tensor ref = host(shape);
      cpu->rms_norm(x, weighted ? w.view() : TensorView(), 1e-6f, ref);
      Tensor dw = to_dev(*gpu, w);
      Tensor out = dev_poisoned(*gpu, shape);
      gpu->rms_norm(to_dev(*gpu, x), weighted ? dw.view() : TensorView(), 1e-6f, out);
      EXPECT_LE(rel_err(to_host(*gpu, out), ref), kTolF32);
      Tensor inplace = to_dev(*gpu, x);  // out may be x
      gpu->rms_norm(inplace, weighted ? dw.view() : TensorView(), 1e-6f, inplace);
      EXPECT_LE(rel_err(to_host(*gpu, inplace), ref), kTolF32);
    }
  }
}

TEST_F(Ops, RopeAndInverseMatchCpu) {
  SEED_TRACE();
  for (auto [M, H, hd, R] : std::vector<std::array<int64_t, 4>>{
           {5, 4, 32, 8}, {17, 1, 512, 32}, {3, 64, 128, 32}, {2, 2, 16, 8}}) {
    for (bool inverse : {false, true}) {
      Rng rng;
      Tensor x = rand_host(rng, {M, H, hd});
      std::vector<int32_t> pos(M);
      for (auto& p : pos) p = static_cast<int32_t>(rng.integer(0, 200000));
      pos[0] = 0;
      Tensor freq = host({R});
      for (int64_t i = 0; i < R; ++i)
        freq.data_as<float>()[i] = std::pow(10000.f, -2.f * i / (2 * R));
      Tensor dx = to_dev(*gpu, x);
      gpu->rope(dx, to_dev(*gpu, i32_host(pos, {M})), to_dev(*gpu, freq), inverse);
      cpu->rope(x, i32_host(pos, {M}), freq, inverse);
      EXPECT_LE(rel_err(to_host(*gpu, dx), x), kTolF32) << M << " " << H << " " << hd;
    }
  }
}

// rms_norm_rope in one pass (rms_norm_rope_fused shapes): bitwise rms_norm then rope on the GPU,
// weighted or not, in place or not; other shapes run the two (a tail pair straddling a float4,
// a head wider than 4096); and the CPU's values within tolerance.
TEST_F(Ops, RmsNormRopeIsNormThenRope) {
  SEED_TRACE();
  struct Case {
    int64_t M, H, hd, R;
    bool weighted, fused;
  };
  for (const Case& c : std::vector<Case>{{1, 64, 512, 32, false, true},  // V4 queries
                                         {3, 1, 512, 32, true, true},    // V4 keys
                                         {5, 4, 128, 16, true, true},
                                         {2, 3, 36, 9, true, false},  // 36 - 18: pairs split
                                         {2, 1, 8192, 32, false, false}}) {
    Rng rng;
    const Tensor x = rand_host(rng, {c.M, c.H, c.hd}, -3.f, 3.f);
    const Tensor w = rand_host(rng, {c.hd}, 0.5f, 1.5f);
    std::vector<int32_t> pos(c.M);
    for (auto& p : pos) p = static_cast<int32_t>(rng.integer(0, 70000));
    Tensor freq = host({c.R});
    for (int64_t i = 0; i < c.R; ++i)
      freq.data_as<float>()[i] = std::pow(10000.f, -2.f * i / (2 * c.R));
    const Tensor dx = to_dev(*gpu, x), dpos = to_dev(*gpu, i32_host(pos, {c.M}));
    const Tensor dfreq = to_dev(*gpu, freq), dw = to_dev(*gpu, w);
    const TensorView wv = c.weighted ? dw.view() : TensorView();
    Tensor want = dev_poisoned(*gpu, {c.M, c.H, c.hd});
    gpu->rms_norm(dx, wv, 1e-6f, want);
    gpu->rope(want, dpos, dfreq, false);
    EXPECT_EQ(cuda::rms_norm_rope_fused(dx.view().data_as<float>(),
                                        c.weighted ? dw.view().data_as<float>() : nullptr, c.hd,
                                        c.R, want.view().data_as<float>()),
              c.fused)
        << c.hd << " " << c.R;
    Tensor got = dev_poisoned(*gpu, {c.M, c.H, c.hd});
    gpu->rms_norm_rope(dx, wv, 1e-6f, dpos, dfreq, got);
    const std::vector<float> a = floats(to_host(*gpu, want)), b = floats(to_host(*gpu, got));
    EXPECT_TRUE(a == b) << c.M << " " << c.H << " " << c.hd << " " << c.R;
    Tensor inplace = to_dev(*gpu, x);
    gpu->rms_norm_rope(inplace, wv, 1e-6f, dpos, dfreq, inplace);
    EXPECT_TRUE(floats(to_host(*gpu, inplace)) == a) << "in place, " << c.hd;
    Tensor ref = host({c.M, c.H, c.hd});
    cpu->rms_norm_rope(x, c.weighted ? w.view() : TensorView(), 1e-6f, i32_host(pos, {c.M}), freq,
                       ref);
    EXPECT_LE(rel_err(to_host(*gpu, got), ref), kTolF32) << c.hd;
  }
}

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
// forms the mixing sums itself (decode rows: up to 8, 128-column chunks, up to 4 streams) or the
// two run in turn (more rows, other widths, more streams, or the switch off).
TEST_F(Ops, HcPostPreNormIsHcPostThenHcPreNorm) {
  SEED_TRACE();
  struct Case {
    int64_t M, hc, D;
    bool weighted, fused;
  };
  for (const Case& k : std::vector<Case>{{1, 4, 4096, true, true},
                                         {8, 4, 4096, true, true},
                                         {9, 4, 4096, true, false},  // past the fused rows
                                         {3, 4, 256, false, true},
                                         {2, 2, 512, true, true},
                                         {2, 4, 200, true, false},     // not 128-column chunks
                                         {1, 6, 128, true, false}}) {  // six streams
    for (bool allow : {true, false}) {
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
      Tensor fo = dev_poisoned(*gpu, {M, hc, D}), fnormed = dev_poisoned(*gpu, {M, D}),
             fp = dev_poisoned(*gpu, {M, hc}), fcb = dev_poisoned(*gpu, {M, hc, hc});
      const int64_t calls = cuda_hc_post_mix_calls(*gpu);
      gpu->hc_post_pre_norm(dX, dy, dpost, dcomb, fo, dfn, dbase, dscale, 20, 1e-6f, 1e-6f, dw,
                            fnormed, fp, fcb);
      set_cuda_hc_post_mix(*gpu, was);
      EXPECT_EQ(cuda_hc_post_mix_calls(*gpu) - calls, allow && k.fused ? 1 : 0) << M << " " << D;
      auto same = [&](const Tensor& a, const Tensor& b, const char* what) {
        const Tensor ha = to_host(*gpu, a), hb = to_host(*gpu, b);
        EXPECT_EQ(0, std::memcmp(ha.data_as<float>(), hb.data_as<float>(), ha.numel() * 4))
            << what << " " << M << " " << hc << " " << D << " allowed " << allow;
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

// Inside a sync-free region a download (a host wait) is a loud error naming the region; uploads
// and launches are fine; outside it the same download works.
TEST_F(Ops, SyncGuardRejectsHostWaitsInsideARegion) {
  Rng rng;
  const Tensor x = rand_host(rng, {4, 8});
  Tensor d = gpu->empty({4, 8});
  Tensor out = gpu->empty({4, 8});
  {
    SyncFreeRegion region(*gpu, "the test region");
    gpu->upload(x.data_as<float>(), d);
    gpu->add(d, d, out);
    try {
      to_host(*gpu, out);
      ADD_FAILURE() << "download inside a sync-free region did not throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the test region"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("DEEPINFER_DISABLE_SYNC_GUARD"), std::string::npos);
    }
  }
  const Tensor got = to_host(*gpu, out);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got.data_as<float>()[i], 2 * x.data_as<float>()[i]);
}

// Many small uploads in a row (more than the pinned ring holds) arrive intact and in order.
TEST_F(Ops, AsyncUploadsThroughThePinnedRingArriveIntact) {
  const int64_t n = 3 << 20;  // 12 MiB of floats per upload: the 64 MiB ring wraps
  Tensor acc = gpu->empty({n});
  std::vector<float> h(n);
  std::vector<double> expect(n, 0.0);
  Tensor sum = gpu->empty({n});
  Tensor zero = gpu->empty({n});
  std::vector<float> zeros(n, 0.f);
  gpu->upload(zeros.data(), sum);
  for (int round = 0; round < 12; ++round) {
    for (int64_t i = 0; i < n; ++i) h[i] = static_cast<float>((i * 7 + round * 13) % 101);
    gpu->upload(h.data(), acc);  // h is overwritten right after: the ring holds the copy
    for (int64_t i = 0; i < n; ++i) expect[i] += h[i];
    gpu->add(sum, acc, zero);
    gpu->copy(zero, sum);
  }
  const Tensor got = to_host(*gpu, sum);
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(got.data_as<float>()[i], expect[i]) << i;
}

}  // namespace
}  // namespace deepinfer::cudatest
