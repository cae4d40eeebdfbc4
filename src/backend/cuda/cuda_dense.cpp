// Dense ops through cuBLAS (matmul, grouped_matmul: bf16 x bf16 with fp32 accumulation and fp32
// output) and the row / elementwise ops: embedding, add, rms_norm, rope, swiglu.
#include <climits>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/kernels.h"

namespace deepinfer::cuda {

namespace {

void check_dims(const char* op, std::initializer_list<int64_t> dims) {
  for (int64_t d : dims)
    DI_CHECK(d <= INT_MAX, ErrorCode::kUnsupported, "{}: extent {} exceeds cuBLAS's 32-bit sizes",
             op, d);
}

// bf16 x (a product's input kept in its weights' dtype) takes bf16 weights only.
void expect_x_matches(const char* op, const TensorView& x, const TensorView& w) {
  DI_CHECK(x.dtype() == DType::kF32 || w.dtype() == DType::kBF16, ErrorCode::kInvalidArgument,
           "{}: x is {} but w is {}: bf16 x takes bf16 weights", op, dtype_name(x.dtype()),
           dtype_name(w.dtype()));
}

}  // namespace

std::shared_ptr<void> CudaBackend::to_bf16(const char* op, const float* x, int64_t n) {
  std::shared_ptr<void> buf = scratch(static_cast<size_t>(n) * 2);
  check(launch_f32_to_bf16(x, static_cast<uint16_t*>(buf.get()), n, ctx_->stream()), op);
  return buf;
}

void CudaBackend::gemm(const char* op, DType dtype, const void* x, int64_t ldx, int64_t sx,
                       const void* w, int64_t ldw, int64_t sw, float* out, int64_t ldo, int64_t so,
                       int64_t M, int64_t N, int64_t K, int64_t batch, float beta) {
  if (M == 0 || N == 0 || batch == 0) return;
  if (K == 0) {
    // Nothing to accumulate: out = beta * out; only beta = 0 (clear) and 1 (keep) occur.
    if (beta == 0.f)
      for (int64_t b = 0; b < batch; ++b)
        check(cudaMemset2DAsync(out + b * so, ldo * sizeof(float), 0, N * sizeof(float), M,
                                ctx_->stream()),
              op);
    return;
  }
  check_dims(op, {M, N, K, ldx, ldw, ldo, batch});
  if (dtype == DType::kBF16) {
    lt_.run(op, x, w, out, {M, N, K, ldx, ldw, ldo, sx, sw, so, batch, beta != 0.f}, ctx_->stream(),
            ctx_->on_side() ? 1 : 0);
    return;
  }
  // fp32 weights (the accuracy reference path): cublasGemmEx. Row-major out[M, N] is column-major
  // out^T[N, M] = w[N, K] x^T: A = w (transposed), B = x.
  const cudaDataType_t t = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
  const float alpha = 1.f;
  check(cublasGemmStridedBatchedEx(
            ctx_->cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
            static_cast<int>(K), &alpha, w, t, static_cast<int>(ldw), sw, x, t,
            static_cast<int>(ldx), sx, &beta, out, CUDA_R_32F, static_cast<int>(ldo), so,
            static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        op);
}

bool CudaBackend::tile_gemm(const char* op, const void* x, int64_t ldx, int64_t sx, const void* w,
                            int64_t ldw, int64_t sw, float* out, int64_t ldo, int64_t so, int64_t M,
                            int64_t N, int64_t K, int64_t batch, bool accumulate) {
  if (!dense_gemm_supported(M, N, K, ldx, ldw, x, w)) return false;
  std::shared_ptr<void> partials;
  if (const int64_t n = dense_gemm_partials(M, N, K, batch); n > 0)
    partials = scratch(static_cast<size_t>(n) * sizeof(float));
  check(launch_dense_gemm(static_cast<const uint16_t*>(x), ldx, sx, static_cast<const uint16_t*>(w),
                          ldw, sw, out, ldo, so, M, N, K, batch, accumulate,
                          static_cast<float*>(partials.get()), ctx_->split_counters(),
                          ctx_->stream()),
        op);
  return true;
}

bool CudaBackend::tile_gemm_f32(const char* op, const float* x, int64_t ldx, int64_t sx,
                                const void* w, int64_t ldw, int64_t sw, float* out, int64_t ldo,
                                int64_t so, int64_t M, int64_t N, int64_t K, int64_t batch,
                                bool accumulate) {
  if (!dense_gemm_f32_supported(M, N, K, batch, ldx, ldw, x, w)) return false;
  std::shared_ptr<void> partials;
  if (const int64_t n = dense_gemm_partials(M, N, K, batch); n > 0)
    partials = scratch(static_cast<size_t>(n) * sizeof(float));
  check(launch_dense_gemm_f32(x, ldx, sx, static_cast<const uint16_t*>(w), ldw, sw, out, ldo, so, M,
                              N, K, batch, accumulate, static_cast<float*>(partials.get()),
                              ctx_->split_counters(), ctx_->stream()),
        op);
  return true;
}

void CudaBackend::matmul(const TensorView& x, const TensorView& w, const TensorView& out,
                         bool accumulate) {
  const char* op = "matmul";
  OpScope s(*this, op);
  expect2(op, "x", x, DType::kF32, DType::kBF16, {kAny, kAny});
  const int64_t M = x.dim(0), K = x.dim(1);
  expect2(op, "w", w, DType::kBF16, DType::kF32, {kAny, K});
  expect_x_matches(op, x, w);
  const int64_t N = w.dim(0);
  expect(op, "out", out, DType::kF32, {M, N});
  expect_no_alias(op, "out", out, "x", x);
  expect_no_alias(op, "out", out, "w", w);
  if (M == 0 || N == 0) return;
  std::shared_ptr<void> xb;
  const void* xa = x.data();
  if (w.dtype() == DType::kBF16) {
    // Decode-sized products on the batch-invariant tensor-core kernel (kernels.h), a few rows
    // straight from fp32 x; larger ones (prefill) through cuBLASLt. bf16 x goes as it is.
    if (x.dtype() == DType::kF32) {
      if (tile_gemm_f32(op, x.data_as<float>(), K, 0, w.data(), K, 0, out.data_as<float>(), N, 0, M,
                        N, K, 1, accumulate))
        return;
      xb = to_bf16(op, x.data_as<float>(), M * K);
      xa = xb.get();
    }
    if (tile_gemm(op, xa, K, 0, w.data(), K, 0, out.data_as<float>(), N, 0, M, N, K, 1, accumulate))
      return;
  }
  gemm(op, w.dtype(), xa, K, 0, w.data(), K, 0, out.data_as<float>(), N, 0, M, N, K, 1,
       accumulate ? 1.f : 0.f);
}

void CudaBackend::grouped_matmul(const TensorView& x, const TensorView& w, const TensorView& out) {
  const char* op = "grouped_matmul";
  OpScope s(*this, op);
  expect2(op, "x", x, DType::kF32, DType::kBF16, {kAny, kAny, kAny});
  const int64_t M = x.dim(0), G = x.dim(1), K = x.dim(2);
  // bf16 out: the product rounded, as the next product's operand (Backend::product_input_dtype).
  expect2(op, "out", out, DType::kF32, DType::kBF16, {M, G, kAny});
  const int64_t N = out.dim(2);
  expect2(op, "w", w, DType::kBF16, DType::kF32, {G * N, K});
  expect_x_matches(op, x, w);
  expect_no_alias(op, "out", out, "x", x);
  expect_no_alias(op, "out", out, "w", w);
  if (M == 0 || G == 0 || N == 0) return;
  const bool out_is_bf16 = out.dtype() == DType::kBF16;
  DI_CHECK(!out_is_bf16 || w.dtype() == DType::kBF16, ErrorCode::kInvalidArgument,
           "{}: bf16 out takes bf16 weights, got {}", op, dtype_name(w.dtype()));
  // Batch over groups: x_g = columns [g*K, g*K + K) of x [M, G*K], w_g = rows [g*N, g*N + N),
  // out_g = columns [g*N, g*N + N) of out [M, G*N].
  std::shared_ptr<void> xb;
  const void* xa = x.data();
  if (out_is_bf16 && M > kDenseGemmMaxRows && K > 0) {  // cuBLASLt's rows: it rounds them itself
    if (x.dtype() == DType::kF32) {
      xb = to_bf16(op, x.data_as<float>(), M * G * K);
      xa = xb.get();
    }
    check_dims(op, {M, N, K, G * K, G * N, G});
    lt_.run(op, xa, w.data(), out.data(), {M, N, K, G * K, K, G * N, K, N * K, N, G, false, true},
            ctx_->stream(), ctx_->on_side() ? 1 : 0);
    return;
  }
  // Elsewhere bf16 out is the fp32 product rounded.
  std::shared_ptr<void> f32;
  if (out_is_bf16) f32 = scratch(static_cast<size_t>(M * G * N) * sizeof(float));
  float* dst = out_is_bf16 ? static_cast<float*>(f32.get()) : out.data_as<float>();
  const auto done = [&] {
    if (out_is_bf16)
      check(launch_f32_to_bf16(dst, static_cast<uint16_t*>(out.data()), M * G * N, ctx_->stream()),
            op);
  };
  if (w.dtype() == DType::kBF16) {
    if (x.dtype() == DType::kF32) {
      if (tile_gemm_f32(op, x.data_as<float>(), G * K, K, w.data(), K, N * K, dst, G * N, N, M, N,
                        K, G, false))
        return done();
      xb = to_bf16(op, x.data_as<float>(), M * G * K);
      xa = xb.get();
    }
    if (tile_gemm(op, xa, G * K, K, w.data(), K, N * K, dst, G * N, N, M, N, K, G, false))
      return done();
  }
  gemm(op, w.dtype(), xa, G * K, K, w.data(), K, N * K, dst, G * N, N, M, N, K, G, 0.f);
  done();
}

void CudaBackend::embedding(const TensorView& ids, const TensorView& table, const TensorView& out) {
  const char* op = "embedding";
  OpScope s(*this, op);
  expect(op, "ids", ids, DType::kI32, {kAny});
  // bf16 for the weight table; fp32 tables occur too (the head's row gather).
  expect2(op, "table", table, DType::kBF16, DType::kF32, {kAny, kAny});
  const int64_t M = ids.dim(0), V = table.dim(0), D = table.dim(1);
  expect(op, "out", out, DType::kF32, {M, D});
  DI_CHECK(M <= INT_MAX, ErrorCode::kUnsupported, "{}: {} ids exceed the grid", op, M);
  check(launch_embedding(ids.data_as<int32_t>(), M, table.data(), table.dtype() == DType::kBF16, V,
                         D, out.data_as<float>(), ctx_->error_word(), ctx_->stream()),
        op);
}

void CudaBackend::add(const TensorView& a, const TensorView& b, const TensorView& out) {
  const char* op = "add";
  OpScope s(*this, op);
  DI_CHECK(a.dtype() == DType::kF32 && a.device() == Device::kCuda && a.is_contiguous() &&
               (a.data() != nullptr || a.numel() == 0),
           ErrorCode::kInvalidArgument, "add: a is {} {}, expected a contiguous F32 device tensor",
           dtype_name(a.dtype()), a.shape_str());
  expect_like(op, "b", b, "a", a);
  expect_like(op, "out", out, "a", a);
  check(launch_add(a.data_as<float>(), b.data_as<float>(), out.data_as<float>(), a.numel(),
                   ctx_->stream()),
        op);
}

void CudaBackend::rms_norm(const TensorView& x, const TensorView& weight, float eps,
                           const TensorView& out) {
  const char* op = "rms_norm";
  OpScope s(*this, op);
  DI_CHECK(x.ndim() >= 1 && x.dtype() == DType::kF32 && x.device() == Device::kCuda &&
               x.is_contiguous() && (x.data() != nullptr || x.numel() == 0),
           ErrorCode::kInvalidArgument,
           "rms_norm: x is {} {}, expected a contiguous F32 device tensor of rank >= 1",
           dtype_name(x.dtype()), x.shape_str());
  const int64_t D = x.dim(-1);
  if (given(weight)) expect(op, "weight", weight, DType::kF32, {D});
  expect_out_like(op, out, "x", x);  // bf16: a product's operand (backend.h)
  if (D == 0) return;
  const int64_t rows = x.numel() / D;
  DI_CHECK(rows <= INT_MAX, ErrorCode::kUnsupported, "rms_norm: {} rows exceed the grid", rows);
  check(launch_rms_norm(x.data_as<float>(), given(weight) ? weight.data_as<float>() : nullptr, eps,
                        rows, D, f32_out(out), bf16_out(out), ctx_->stream()),
        op);
}

void CudaBackend::rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
                       bool inverse) {
  const char* op = "rope";
  OpScope s(*this, op);
  expect(op, "x", x, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = x.dim(0), H = x.dim(1), hd = x.dim(2);
  expect(op, "positions", positions, DType::kI32, {M});
  expect(op, "inv_freq", inv_freq, DType::kF32, {kAny});
  const int64_t R = inv_freq.dim(0);
  DI_CHECK(2 * R <= hd, ErrorCode::kInvalidArgument,
           "rope: inv_freq {} rotates {} dims but heads of x {} have only {}", inv_freq.shape_str(),
           2 * R, x.shape_str(), hd);
  check(launch_rope(x.data_as<float>(), M, H, hd, positions.data_as<int32_t>(),
                    inv_freq.data_as<float>(), R, inverse, ctx_->stream()),
        op);
}

void CudaBackend::rms_norm_rope(const TensorView& x, const TensorView& weight, float eps,
                                const TensorView& positions, const TensorView& inv_freq,
                                const TensorView& out) {
  const char* op = "rms_norm_rope";
  {
    OpScope s(*this, op);
    expect(op, "x", x, DType::kF32, {kAny, kAny, kAny});
    expect_like(op, "out", out, "x", x);
    const int64_t M = x.dim(0), H = x.dim(1), hd = x.dim(2);
    if (given(weight)) expect(op, "weight", weight, DType::kF32, {hd});
    expect(op, "positions", positions, DType::kI32, {M});
    expect(op, "inv_freq", inv_freq, DType::kF32, {kAny});
    const int64_t R = inv_freq.dim(0);
    const float* w = given(weight) ? weight.data_as<float>() : nullptr;
    if (x.is_contiguous() && out.is_contiguous() && M * H <= INT_MAX &&
        rms_norm_rope_fused(x.data_as<float>(), w, hd, R, out.data_as<float>())) {
      check(
          launch_rms_norm_rope(x.data_as<float>(), w, eps, M, H, hd, positions.data_as<int32_t>(),
                               inv_freq.data_as<float>(), R, out.data_as<float>(), ctx_->stream()),
          op);
      return;
    }
  }
  rms_norm(x, weight, eps, out);  // shapes the fused kernel does not take (their own checks)
  rope(out, positions, inv_freq, false);
}

void CudaBackend::swiglu(const TensorView& gate, const TensorView& up, float limit,
                         const TensorView& out) {
  const char* op = "swiglu";
  OpScope s(*this, op);
  expect(op, "gate", gate, DType::kF32, {kAny, kAny});
  expect_like(op, "up", up, "gate", gate);
  expect_out_like(op, out, "gate", gate);  // bf16: a product's operand (backend.h)
  check(launch_swiglu(gate.data_as<float>(), up.data_as<float>(), limit, gate.numel(), f32_out(out),
                      bf16_out(out), ctx_->stream()),
        op);
}

}  // namespace deepinfer::cuda
