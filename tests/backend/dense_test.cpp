// matmul, grouped_matmul, embedding, add, memory ops and argument checking.
#include <cstring>

#include "test_util.h"

namespace deepinfer::test {
namespace {

class Dense : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
};

std::vector<double> ref_matmul(const Tensor& x, const Tensor& w, const Tensor* init) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  const float* xp = x.data_as<float>();
  const float* wp = w.data_as<float>();
  std::vector<double> r(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = init ? init->data_as<float>()[m * N + n] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += double(xp[m * K + k]) * wp[n * K + k];
      r[m * N + n] = s;
    }
  return r;
}

TEST_F(Dense, MatmulMatchesReference) {
  SEED_TRACE();
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 48, 64},     {1, 3000, 700}, {7, 33, 65},
                                                      {130, 257, 129}, {512, 96, 300}, {3, 1, 5}};
  for (auto [M, N, K] : shapes) {
    SCOPED_TRACE(testing::Message() << "M=" << M << " N=" << N << " K=" << K);
    Rng rng;
    Tensor x = rand_tensor(rng, {M, K}), w = rand_tensor(rng, {N, K});
    Tensor out = poisoned({M, N});
    be->matmul(x, w, out);
    EXPECT_CLOSE(out, ref_matmul(x, w, nullptr));
  }
}

TEST_F(Dense, MatmulAccumulates) {
  SEED_TRACE();
  for (auto [M, N, K] : std::vector<std::array<int64_t, 3>>{{1, 200, 64}, {65, 129, 77}}) {
    Rng rng;
    Tensor x = rand_tensor(rng, {M, K}), w = rand_tensor(rng, {N, K});
    Tensor out = rand_tensor(rng, {M, N}, -5.f, 5.f);
    Tensor init = make({M, N});
    std::memcpy(init.data_as<float>(), out.data_as<float>(), out.view().nbytes());
    be->matmul(x, w, out, /*accumulate=*/true);
    EXPECT_CLOSE(out, ref_matmul(x, w, &init));
  }
}

TEST_F(Dense, GroupedMatmulMatchesReference) {
  SEED_TRACE();
  const std::vector<std::array<int64_t, 4>> shapes = {
      {1, 8, 64, 32}, {5, 3, 33, 17}, {64, 4, 128, 96}, {1, 2, 1000, 300}, {1, 2, 2048, 1024}};
  for (auto [M, G, K, N] : shapes) {
    SCOPED_TRACE(testing::Message() << "M=" << M << " G=" << G << " K=" << K << " N=" << N);
    Rng rng;
    Tensor x = rand_tensor(rng, {M, G, K}), w = rand_tensor(rng, {G * N, K});
    Tensor out = poisoned({M, G, N});
    be->grouped_matmul(x, w, out);
    std::vector<double> ref(M * G * N);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += double(x.data_as<float>()[(m * G + g) * K + k]) *
                 w.data_as<float>()[(g * N + n) * K + k];
          ref[(m * G + g) * N + n] = s;
        }
    EXPECT_CLOSE(out, ref);
  }
}

TEST_F(Dense, EmbeddingGathersRowsAndChecksIds) {
  SEED_TRACE();
  Rng rng;
  const int64_t V = 1000, D = 129, M = 77;
  Tensor table = rand_tensor(rng, {V, D});
  std::vector<int32_t> idv(M);
  for (auto& i : idv) i = static_cast<int32_t>(rng.integer(0, V - 1));
  idv[0] = 0, idv[1] = V - 1;
  Tensor ids = int_tensor(idv, {M}), out = poisoned({M, D});
  be->embedding(ids, table, out);
  for (int64_t m = 0; m < M; ++m)
    ASSERT_EQ(0, std::memcmp(out.data_as<float>() + m * D, table.data_as<float>() + idv[m] * D,
                             D * sizeof(float)));
  EXPECT_THROW(be->embedding(int_tensor({3, int32_t(V)}, {2}), table, poisoned({2, D})), Error);
  EXPECT_THROW(be->embedding(int_tensor({-1}, {1}), table, poisoned({1, D})), Error);
}

TEST_F(Dense, AddIsElementwise) {
  SEED_TRACE();
  for (auto shape : std::vector<std::vector<int64_t>>{{3, 5, 7}, {200003}}) {
    Rng rng;
    Tensor a = rand_tensor(rng, shape), b = rand_tensor(rng, shape), out = poisoned(shape);
    be->add(a, b, out);
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_EQ(out.data_as<float>()[i], a.data_as<float>()[i] + b.data_as<float>()[i]);
    be->add(a, b, a);  // in place is allowed for elementwise ops
    EXPECT_EQ(0, std::memcmp(a.data_as<float>(), out.data_as<float>(), a.view().nbytes()));
  }
  EXPECT_THROW(be->add(make({3, 4}), make({4, 3}), make({3, 4})), Error);
}

TEST_F(Dense, MemoryOps) {
  SEED_TRACE();
  Rng rng;
  Tensor t = be->empty({4, 9});
  EXPECT_EQ(t.shape_str(), "[4, 9]");
  std::vector<float> host(36), back(36, kNaN);
  for (auto& v : host) v = rng.uniform();
  be->upload(host.data(), t);
  Tensor u = poisoned({36});
  be->copy(t, u);
  be->download(u, back.data());
  EXPECT_EQ(host, back);
  EXPECT_THROW(be->copy(t, make({35})), Error);
  EXPECT_THROW(be->copy(t, make({36}, DType::kI32)), Error);
}

TEST_F(Dense, CopyBatchCopiesEveryPairAndRejectsOverlaps) {
  SEED_TRACE();
  Rng rng;
  Tensor a = rand_tensor(rng, {10, 6}), b = poisoned({10, 6}), c = rand_tensor(rng, {3, 5});
  const TensorView av = a.view(), bv = b.view();
  // Rows of a scattered into b in another order, an odd-sized piece, a no-op pair (src == dst).
  std::vector<TensorView> src{av.slice_rows(0, 2), av.slice_rows(7, 10), av.slice_rows(2, 3),
                              c.view()};
  std::vector<TensorView> dst{bv.slice_rows(8, 10), bv.slice_rows(0, 3), bv.slice_rows(5, 6),
                              c.view()};
  be->copy_batch(src, dst);
  auto row = [](const Tensor& t, int64_t r) { return t.data_as<float>() + r * 6; };
  EXPECT_EQ(0, std::memcmp(row(b, 8), row(a, 0), 2 * 6 * 4));
  EXPECT_EQ(0, std::memcmp(row(b, 0), row(a, 7), 3 * 6 * 4));
  EXPECT_EQ(0, std::memcmp(row(b, 5), row(a, 2), 6 * 4));
  EXPECT_TRUE(std::isnan(row(b, 3)[0])) << "a row no pair wrote changed";
  be->copy_batch({}, {});  // nothing to do

  auto rejects = [&](std::vector<TensorView> s, std::vector<TensorView> d, const char* what) {
    try {
      be->copy_batch(s, d);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what;
      EXPECT_NE(std::string(e.what()).find("copy_batch"), std::string::npos) << e.what();
    }
  };
  rejects({av.slice_rows(0, 2), av.slice_rows(2, 4)}, {bv.slice_rows(0, 2), bv.slice_rows(1, 3)},
          "two destinations overlap");
  rejects({av.slice_rows(0, 2), bv.slice_rows(1, 2)}, {bv.slice_rows(0, 2), av.slice_rows(5, 6)},
          "a source overlaps another pair's destination");
  rejects({av.slice_rows(0, 3)}, {av.slice_rows(1, 4)}, "a pair overlaps itself");
  rejects({av.slice_rows(0, 2)}, {bv.slice_rows(0, 3)}, "sizes differ");
  rejects({av.slice_rows(0, 2)}, {}, "counts differ");
  // Sources may overlap each other.
  be->copy_batch(std::vector<TensorView>{av.slice_rows(0, 2), av.slice_rows(1, 3)},
                 std::vector<TensorView>{bv.slice_rows(0, 2), bv.slice_rows(2, 4)});
  EXPECT_EQ(0, std::memcmp(row(b, 2), row(a, 1), 2 * 6 * 4));
}

TEST_F(Dense, CopyColumnsTakesABlockOfEveryRow) {
  SEED_TRACE();
  Rng rng;
  Tensor a = rand_tensor(rng, {5, 9}), b = poisoned({5, 4});
  be->copy_columns(a, 3, b);
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t c = 0; c < 4; ++c)
      ASSERT_EQ(b.data_as<float>()[r * 4 + c], a.data_as<float>()[r * 9 + 3 + c]) << r << " " << c;
  EXPECT_THROW(be->copy_columns(a, 6, b), Error) << "columns past the end";
  EXPECT_THROW(be->copy_columns(a, 0, poisoned({4, 4})), Error) << "row count differs";
  EXPECT_THROW(be->copy_columns(a, 0, a.view().reshape({45}).slice_rows(0, 20).reshape({5, 4})),
               Error)
      << "dst overlaps src";
}

TEST_F(Dense, BadInputsNameTheOpAndShapes) {
  Tensor x = make({4, 8}), w = make({5, 9}), out = make({4, 5});
  try {
    be->matmul(x, w, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(msg.find("matmul"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[5, 9]"), std::string::npos) << msg;
  }
  EXPECT_THROW(be->matmul(x, make({5, 8}), make({4, 6})), Error);       // wrong out
  EXPECT_THROW(be->matmul(x, make({5, 8}, DType::kI32), out), Error);   // wrong dtype
  EXPECT_THROW(be->matmul(x, TensorView(), out), Error);                // missing
  EXPECT_THROW(be->matmul(make({4, 8, 1}), make({5, 8}), out), Error);  // wrong rank
  EXPECT_THROW(be->matmul(x, make({8, 8}), x), Error);                  // aliased output
  EXPECT_THROW(be->grouped_matmul(make({2, 3, 4}), make({3 * 5 + 1, 4}), make({2, 3, 5})), Error);
}

}  // namespace
}  // namespace deepinfer::test
