// Dense ops: GEMM helpers over OpenBLAS, matmul, grouped_matmul, embedding, add.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "backend/cpu/cpu_backend.h"

namespace deepinfer {

namespace cpu {

namespace {

// Below this many flops per chunk, thread hand-off costs more than it saves.
constexpr double kMinFlopsPerChunk = 2e6;
// Up to this many rows, GEMMs run as sgemv per row over slices of B of about this size.
constexpr int64_t kGemvMaxRows = 3;
constexpr int64_t kGemvSliceBytes = 256 << 10;

void check_blas_dims(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  DI_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX &&
               ldc <= INT_MAX,
           ErrorCode::kUnsupported, "GEMM of {}x{}x{} exceeds the 32-bit BLAS interface", M, N, K);
}

// C = beta * C for the K == 0 corner (BLAS would do the same; keep it explicit).
void scale_c(int64_t M, int64_t N, float* C, int64_t ldc, float beta) {
  for (int64_t m = 0; m < M; ++m) {
    float* c = C + m * ldc;
    if (beta == 0.f) {
      std::fill(c, c + N, 0.f);
    } else {
      for (int64_t n = 0; n < N; ++n) c[n] *= beta;
    }
  }
}

}  // namespace

void sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
              int64_t ldb, float* C, int64_t ldc, float beta) {
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_c(M, N, C, ldc, beta);
  check_blas_dims(M, N, K, lda, ldb, ldc);
  if (M <= kGemvMaxRows) {
    // Decode shapes: OpenBLAS's sgemm packs all of B for a handful of rows (measured 2-4x
    // slower than sgemv at M = 1-2). Run sgemv per row over L2-sized slices of B instead, so
    // that B is streamed from memory once.
    if (beta == 0.f) scale_c(M, N, C, ldc, 0.f);  // sgemv's beta = 0 need not clear NaNs
    const int64_t nb = std::max<int64_t>(16, kGemvSliceBytes / (K * int64_t{sizeof(float)}));
    for (int64_t n0 = 0; n0 < N; n0 += nb) {
      const int64_t n = std::min(nb, N - n0);
      for (int64_t m = 0; m < M; ++m)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(K), 1.f,
                    B + n0 * ldb, static_cast<int>(ldb), A + m * lda, 1, beta, C + m * ldc + n0, 1);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M), static_cast<int>(N),
              static_cast<int>(K), 1.f, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta, C,
              static_cast<int>(ldc));
}

void sgemm_nn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
              int64_t ldb, float* C, int64_t ldc, float beta) {
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_c(M, N, C, ldc, beta);
  check_blas_dims(M, N, K, lda, ldb, ldc);
  if (M <= kGemvMaxRows) {  // as in sgemm_nt: avoid packing B for a handful of rows
    if (beta == 0.f) scale_c(M, N, C, ldc, 0.f);
    for (int64_t m = 0; m < M; ++m)
      cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(K), static_cast<int>(N), 1.f, B,
                  static_cast<int>(ldb), A + m * lda, 1, beta, C + m * ldc, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
              static_cast<int>(K), 1.f, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta, C,
              static_cast<int>(ldc));
}

void parallel_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                       int64_t ldb, float* C, int64_t ldc, float beta) {
  if (M == 0 || N == 0) return;
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * K;
  const int64_t chunks = std::min<int64_t>(
      pool().size(), std::max<int64_t>(1, static_cast<int64_t>(flops / kMinFlopsPerChunk)));
  if (chunks <= 1 || K == 0) return sgemm_nt(M, N, K, A, lda, B, ldb, C, ldc, beta);
  // Split the weight rows (N) so each thread streams a disjoint slice of w; split the
  // activation rows (M) only when w is too narrow to share out.
  if (N >= 16 * chunks || M < chunks) {
    int64_t nb = (N + chunks - 1) / chunks;
    if (N >= 16 * chunks) nb = (nb + 15) / 16 * 16;
    const int64_t blocks = (N + nb - 1) / nb;
    pool().parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t n0 = b * nb, n1 = std::min(N, n0 + nb);
        sgemm_nt(M, n1 - n0, K, A, lda, B + n0 * ldb, ldb, C + n0, ldc, beta);
      }
    });
  } else {
    const int64_t mb = (M + chunks - 1) / chunks;
    const int64_t blocks = (M + mb - 1) / mb;
    pool().parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t m0 = b * mb, m1 = std::min(M, m0 + mb);
        sgemm_nt(m1 - m0, N, K, A + m0 * lda, lda, B, ldb, C + m0 * ldc, ldc, beta);
      }
    });
  }
}

}  // namespace cpu

void CpuBackend::matmul(const TensorView& x, const TensorView& w, const TensorView& out,
                        bool accumulate) {
  using cpu::kAny;
  cpu::expect("matmul", "x", x, DType::kF32, {kAny, kAny});
  const int64_t M = x.dim(0), K = x.dim(1);
  cpu::expect("matmul", "w", w, DType::kF32, {kAny, K});
  const int64_t N = w.dim(0);
  cpu::expect("matmul", "out", out, DType::kF32, {M, N});
  cpu::expect_no_alias("matmul", "out", out, "x", x);
  cpu::expect_no_alias("matmul", "out", out, "w", w);
  cpu::parallel_sgemm_nt(M, N, K, x.data_as<float>(), K, w.data_as<float>(), K,
                         out.data_as<float>(), N, accumulate ? 1.f : 0.f);
}

void CpuBackend::grouped_matmul(const TensorView& x, const TensorView& w, const TensorView& out) {
  using cpu::kAny;
  cpu::expect("grouped_matmul", "x", x, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = x.dim(0), G = x.dim(1), K = x.dim(2);
  cpu::expect("grouped_matmul", "out", out, DType::kF32, {M, G, kAny});
  const int64_t N = out.dim(2);
  cpu::expect("grouped_matmul", "w", w, DType::kF32, {G * N, K});
  cpu::expect_no_alias("grouped_matmul", "out", out, "x", x);
  cpu::expect_no_alias("grouped_matmul", "out", out, "w", w);
  if (M == 0 || G == 0 || N == 0) return;
  // Tasks are (group, slice of N): enough of them to feed every thread even at M = 1.
  const double flops = 2.0 * static_cast<double>(M) * G * N * K;
  const int64_t target = std::min<int64_t>(cpu::pool().size(),
                                           std::max<int64_t>(1, static_cast<int64_t>(flops / 2e6)));
  const int64_t nsplit = std::clamp<int64_t>((target + G - 1) / G, 1, std::max<int64_t>(1, N / 16));
  const int64_t nb = (N + nsplit - 1) / nsplit;
  const int64_t splits = (N + nb - 1) / nb;
  const float* xp = x.data_as<float>();
  const float* wp = w.data_as<float>();
  float* op = out.data_as<float>();
  cpu::pool().parallel_for(G * splits, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t g = t / splits, n0 = (t % splits) * nb, n1 = std::min(N, n0 + nb);
      cpu::sgemm_nt(M, n1 - n0, K, xp + g * K, G * K, wp + (g * N + n0) * K, K, op + g * N + n0,
                    G * N, 0.f);
    }
  });
}

void CpuBackend::embedding(const TensorView& ids, const TensorView& table, const TensorView& out) {
  using cpu::kAny;
  cpu::expect("embedding", "ids", ids, DType::kI32, {kAny});
  cpu::expect("embedding", "table", table, DType::kF32, {kAny, kAny});
  const int64_t M = ids.dim(0), V = table.dim(0), D = table.dim(1);
  cpu::expect("embedding", "out", out, DType::kF32, {M, D});
  const int32_t* id = ids.data_as<int32_t>();
  for (int64_t m = 0; m < M; ++m)
    DI_CHECK(id[m] >= 0 && id[m] < V, ErrorCode::kInvalidArgument,
             "embedding: ids[{}] = {} is outside the table of {} rows", m, id[m], V);
  const float* tp = table.data_as<float>();
  float* op = out.data_as<float>();
  cpu::pool().parallel_for(M, std::max<int64_t>(1, 16384 / std::max<int64_t>(D, 1)),
                           [&](int64_t b, int64_t e) {
                             for (int64_t m = b; m < e; ++m)
                               std::memcpy(op + m * D, tp + id[m] * D, D * sizeof(float));
                           });
}

void CpuBackend::add(const TensorView& a, const TensorView& b, const TensorView& out) {
  DI_CHECK(a.dtype() == DType::kF32 && a.device() == Device::kCpu && a.is_contiguous() &&
               (a.data() != nullptr || a.numel() == 0),
           ErrorCode::kInvalidArgument, "add: a is {} {}, expected a contiguous F32 host tensor",
           dtype_name(a.dtype()), a.shape_str());
  cpu::expect_like("add", "b", b, "a", a);
  cpu::expect_like("add", "out", out, "a", a);
  const float* ap = a.data_as<float>();
  const float* bp = b.data_as<float>();
  float* op = out.data_as<float>();
  cpu::pool().parallel_for(a.numel(), 1 << 15, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) op[i] = ap[i] + bp[i];
  });
}

}  // namespace deepinfer
