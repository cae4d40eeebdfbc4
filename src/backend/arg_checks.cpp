#include "backend/arg_checks.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/status.h"

namespace deepinfer::arg_checks {

namespace {

const char* device_word(Device d) {
  return d == Device::kCpu ? "host" : "device";
}

std::string expected_str(DType a, DType b, std::initializer_list<int64_t> shape) {
  std::string s = a == b ? fmt::format("{} [", dtype_name(a))
                         : fmt::format("{}|{} [", dtype_name(a), dtype_name(b));
  int i = 0;
  for (int64_t d : shape)
    s += (i++ ? ", " : "") + (d == kAny ? std::string("*") : fmt::format("{}", d));
  return s + "]";
}

}  // namespace

void expect(const char* op, const char* name, const TensorView& t, Device device, DType a, DType b,
            std::initializer_list<int64_t> shape) {
  DI_CHECK(t.data() != nullptr || (t.ndim() > 0 && t.numel() == 0), ErrorCode::kInvalidArgument,
           "{}: {} is missing (expected {})", op, name, expected_str(a, b, shape));
  DI_CHECK(t.device() == device, ErrorCode::kInvalidArgument,
           "{}: {} {} is not a {} tensor (this backend needs {} memory)", op, name, t.shape_str(),
           device_word(device), device_word(device));
  bool ok = (t.dtype() == a || t.dtype() == b) && t.ndim() == static_cast<int>(shape.size());
  int i = 0;
  for (int64_t d : shape) {
    if (!ok) break;
    ok = d == kAny || t.dim(i) == d;
    ++i;
  }
  DI_CHECK(ok, ErrorCode::kInvalidArgument, "{}: {} is {} {}, expected {}", op, name,
           dtype_name(t.dtype()), t.shape_str(), expected_str(a, b, shape));
  DI_CHECK(t.is_contiguous(), ErrorCode::kInvalidArgument, "{}: {} {} must be contiguous", op, name,
           t.shape_str());
}

void expect_like(const char* op, const char* name, const TensorView& t, const char* ref_name,
                 const TensorView& ref, Device device) {
  DI_CHECK(t.data() != nullptr || (t.ndim() > 0 && t.numel() == 0), ErrorCode::kInvalidArgument,
           "{}: {} is missing (expected the shape of {} {})", op, name, ref_name, ref.shape_str());
  bool ok = t.dtype() == ref.dtype() && t.ndim() == ref.ndim();
  for (int i = 0; ok && i < t.ndim(); ++i) ok = t.dim(i) == ref.dim(i);
  DI_CHECK(ok, ErrorCode::kInvalidArgument, "{}: {} is {} {}, expected {} {} like {}", op, name,
           dtype_name(t.dtype()), t.shape_str(), dtype_name(ref.dtype()), ref.shape_str(),
           ref_name);
  DI_CHECK(t.device() == device && t.is_contiguous(), ErrorCode::kInvalidArgument,
           "{}: {} {} must be a contiguous {} tensor", op, name, t.shape_str(),
           device_word(device));
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

void expect_fill(const char* op, const TensorView& t, Device device, float lo, float hi) {
  DI_CHECK(t.device() == device && t.is_contiguous() && (t.data() != nullptr || t.numel() == 0),
           ErrorCode::kInvalidArgument, "{}: t {} must be a contiguous {} tensor", op,
           t.shape_str(), device_word(device));
  DI_CHECK(t.dtype() == DType::kF32 || t.dtype() == DType::kBF16, ErrorCode::kInvalidArgument,
           "{}: t is {} {}, expected F32 or BF16", op, dtype_name(t.dtype()), t.shape_str());
  DI_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, ErrorCode::kInvalidArgument,
           "{}: the range [{}, {}] must be finite with lo <= hi", op, lo, hi);
}

}  // namespace deepinfer::arg_checks
