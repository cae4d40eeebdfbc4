// CpuBackend construction, memory ops and the argument checks shared by every op.
#include "backend/cpu/cpu_backend.h"

#include <cblas.h>

#include <cstring>
#include <mutex>
#include <string>

#include <fmt/format.h>

namespace deepinfer {

namespace cpu {

namespace {

std::string expected_str(DType dtype, std::initializer_list<int64_t> shape) {
  std::string s = fmt::format("{} [", dtype_name(dtype));
  int i = 0;
  for (int64_t d : shape)
    s += (i++ ? ", " : "") + (d == kAny ? std::string("*") : fmt::format("{}", d));
  return s + "]";
}

}  // namespace

void expect(const char* op, const char* name, const TensorView& t, DType dtype,
            std::initializer_list<int64_t> shape) {
  DI_CHECK(t.data() != nullptr || (t.ndim() > 0 && t.numel() == 0), ErrorCode::kInvalidArgument,
           "{}: {} is missing (expected {})", op, name, expected_str(dtype, shape));
  DI_CHECK(t.device() == Device::kCpu, ErrorCode::kInvalidArgument,
           "{}: {} {} is not a host tensor (the CPU backend needs host memory)", op, name,
           t.shape_str());
  bool ok = t.dtype() == dtype && t.ndim() == static_cast<int>(shape.size());
  int i = 0;
  for (int64_t d : shape) {
    if (!ok) break;
    ok = d == kAny || t.dim(i) == d;
    ++i;
  }
  DI_CHECK(ok, ErrorCode::kInvalidArgument, "{}: {} is {} {}, expected {}", op, name,
           dtype_name(t.dtype()), t.shape_str(), expected_str(dtype, shape));
  DI_CHECK(t.is_contiguous(), ErrorCode::kInvalidArgument, "{}: {} {} must be contiguous", op, name,
           t.shape_str());
}

void expect_like(const char* op, const char* name, const TensorView& t, const char* ref_name,
                 const TensorView& ref) {
  DI_CHECK(t.data() != nullptr || (t.ndim() > 0 && t.numel() == 0), ErrorCode::kInvalidArgument,
           "{}: {} is missing (expected the shape of {} {})", op, name, ref_name, ref.shape_str());
  bool ok = t.dtype() == ref.dtype() && t.ndim() == ref.ndim();
  for (int i = 0; ok && i < t.ndim(); ++i) ok = t.dim(i) == ref.dim(i);
  DI_CHECK(ok, ErrorCode::kInvalidArgument, "{}: {} is {} {}, expected {} {} like {}", op, name,
           dtype_name(t.dtype()), t.shape_str(), dtype_name(ref.dtype()), ref.shape_str(),
           ref_name);
  DI_CHECK(t.device() == Device::kCpu && t.is_contiguous(), ErrorCode::kInvalidArgument,
           "{}: {} {} must be a contiguous host tensor", op, name, t.shape_str());
}

void expect_no_alias(const char* op, const char* a_name, const TensorView& a, const char* b_name,
                     const TensorView& b) {
  const auto* a0 = static_cast<const char*>(a.data());
  const auto* b0 = static_cast<const char*>(b.data());
  if (a0 == nullptr || b0 == nullptr || a.nbytes() == 0 || b.nbytes() == 0) return;
  const bool disjoint = a0 + a.nbytes() <= b0 || b0 + b.nbytes() <= a0;
  DI_CHECK(disjoint, ErrorCode::kInvalidArgument, "{}: {} {} must not overlap {} {}", op, a_name,
           a.shape_str(), b_name, b.shape_str());
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

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace deepinfer
