// CpuBackend construction, memory ops and the argument checks shared by every op.
#include "backend/cpu/cpu_backend.h"

#include <cblas.h>

#include <cstring>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "backend/arg_checks.h"

namespace deepinfer {

namespace cpu {

void expect(const char* op, const char* name, const TensorView& t, DType dtype,
            std::initializer_list<int64_t> shape) {
  arg_checks::expect(op, name, t, Device::kCpu, dtype, dtype, shape);
}

void expect_like(const char* op, const char* name, const TensorView& t, const char* ref_name,
                 const TensorView& ref) {
  arg_checks::expect_like(op, name, t, ref_name, ref, Device::kCpu);
}

float sum_squares(const float* x, int64_t n) {
  constexpr int L = 16;
  float acc[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) acc[l] += x[i + l] * x[i + l];
  float s = 0.f;
  for (; i < n; ++i) s += x[i] * x[i];
  for (int l = 0; l < L; ++l) s += acc[l];
  return s;
}

float dot(const float* a, const float* b, int64_t n) {
  constexpr int L = 16;
  float acc[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) acc[l] += a[i + l] * b[i + l];
  float s = 0.f;
  for (; i < n; ++i) s += a[i] * b[i];
  for (int l = 0; l < L; ++l) s += acc[l];
  return s;
}

}  // namespace cpu

CpuBackend::CpuBackend() {
  // All parallelism comes from the pool; OpenBLAS runs in whichever thread calls it.
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

Tensor CpuBackend::empty(std::initializer_list<int64_t> shape, DType dtype) {
  return Tensor::empty(shape, dtype);
}

void CpuBackend::upload(const void* host, const TensorView& dst) {
  DI_CHECK(dst.device() == Device::kCpu && dst.is_contiguous(), ErrorCode::kInvalidArgument,
           "upload: dst {} must be a contiguous host tensor", dst.shape_str());
  if (dst.nbytes() == 0) return;
  DI_CHECK(host != nullptr && dst.data() != nullptr, ErrorCode::kInvalidArgument,
           "upload: null pointer for {} bytes", dst.nbytes());
  std::memcpy(dst.data(), host, dst.nbytes());
}

void CpuBackend::download(const TensorView& src, void* host) {
  DI_CHECK(src.device() == Device::kCpu && src.is_contiguous(), ErrorCode::kInvalidArgument,
           "download: src {} must be a contiguous host tensor", src.shape_str());
  if (src.nbytes() == 0) return;
  DI_CHECK(host != nullptr && src.data() != nullptr, ErrorCode::kInvalidArgument,
           "download: null pointer for {} bytes", src.nbytes());
  std::memcpy(host, src.data(), src.nbytes());
}

void CpuBackend::copy(const TensorView& src, const TensorView& dst) {
  DI_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(), ErrorCode::kInvalidArgument,
           "copy: src {} {} and dst {} {} differ in dtype or element count",
           dtype_name(src.dtype()), src.shape_str(), dtype_name(dst.dtype()), dst.shape_str());
  DI_CHECK(src.device() == Device::kCpu && dst.device() == Device::kCpu && src.is_contiguous() &&
               dst.is_contiguous(),
           ErrorCode::kInvalidArgument, "copy: src {} and dst {} must be contiguous host tensors",
           src.shape_str(), dst.shape_str());
  if (src.nbytes() == 0 || src.data() == dst.data()) return;
  std::memmove(dst.data(), src.data(), src.nbytes());
}

void CpuBackend::copy_batch(std::span<const TensorView> src, std::span<const TensorView> dst) {
  arg_checks::expect_copy_batch("copy_batch", src, dst, Device::kCpu);
  for (size_t i = 0; i < src.size(); ++i)
    if (src[i].nbytes() > 0 && src[i].data() != dst[i].data())
      std::memcpy(dst[i].data(), src[i].data(), src[i].nbytes());
}

void CpuBackend::copy_columns(const TensorView& src, int64_t col0, const TensorView& dst) {
  arg_checks::expect_copy_columns("copy_columns", src, col0, dst, Device::kCpu);
  const size_t es = dtype_size_bits(src.dtype()) / 8;
  const int64_t M = src.dim(0), N = src.dim(1), w = dst.dim(1);
  const auto* s = static_cast<const char*>(src.data());
  auto* d = static_cast<char*>(dst.data());
  for (int64_t r = 0; r < M; ++r) std::memcpy(d + r * w * es, s + (r * N + col0) * es, w * es);
}

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace deepinfer
