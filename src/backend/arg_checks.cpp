#include "backend/arg_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

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
  expect_shape_of(op, name, t, ref.dtype(), ref_name, ref, device);
}

void expect_shape_of(const char* op, const char* name, const TensorView& t, DType dtype,
                     const char* ref_name, const TensorView& ref, Device device) {
  DI_CHECK(t.data() != nullptr || (t.ndim() > 0 && t.numel() == 0), ErrorCode::kInvalidArgument,
           "{}: {} is missing (expected the shape of {} {})", op, name, ref_name, ref.shape_str());
  bool ok = t.dtype() == dtype && t.ndim() == ref.ndim();
  for (int i = 0; ok && i < t.ndim(); ++i) ok = t.dim(i) == ref.dim(i);
  DI_CHECK(ok, ErrorCode::kInvalidArgument, "{}: {} is {} {}, expected {} {} like {}", op, name,
           dtype_name(t.dtype()), t.shape_str(), dtype_name(dtype), ref.shape_str(), ref_name);
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

void expect_copy_batch(const char* op, std::span<const TensorView> src,
                       std::span<const TensorView> dst, Device device) {
  DI_CHECK(src.size() == dst.size(), ErrorCode::kInvalidArgument,
           "{}: {} sources but {} destinations", op, src.size(), dst.size());
  struct Range {
    uintptr_t begin, end;
    size_t pair;
    bool is_dst;
  };
  std::vector<Range> ranges;
  ranges.reserve(2 * src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const TensorView &s = src[i], &d = dst[i];
    DI_CHECK(s.dtype() == d.dtype() && s.numel() == d.numel(), ErrorCode::kInvalidArgument,
             "{}: pair {}: src {} {} and dst {} {} differ in dtype or element count", op, i,
             dtype_name(s.dtype()), s.shape_str(), dtype_name(d.dtype()), d.shape_str());
    DI_CHECK(s.device() == device && d.device() == device && s.is_contiguous() && d.is_contiguous(),
             ErrorCode::kInvalidArgument,
             "{}: pair {}: src {} and dst {} must be contiguous {} tensors", op, i, s.shape_str(),
             d.shape_str(), device_word(device));
    if (s.nbytes() == 0 || s.data() == d.data()) continue;
    const auto s0 = reinterpret_cast<uintptr_t>(s.data());
    const auto d0 = reinterpret_cast<uintptr_t>(d.data());
    ranges.push_back({s0, s0 + s.nbytes(), i, false});
    ranges.push_back({d0, d0 + d.nbytes(), i, true});
  }
  // Sweep by start: a destination must start after every earlier range ends, a source after
  // every earlier destination ends (sources may overlap each other).
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  const Range* last_any = nullptr;
  const Range* last_dst = nullptr;
  for (const Range& r : ranges) {
    const Range* hit = r.is_dst ? last_any : last_dst;
    DI_CHECK(hit == nullptr || r.begin >= hit->end, ErrorCode::kInvalidArgument,
             "{}: the {} of pair {} overlaps the {} of pair {} (pairs run in no order)", op,
             r.is_dst ? "destination" : "source", r.pair,
             hit ? (hit->is_dst ? "destination" : "source") : "", hit ? hit->pair : 0);
    if (!last_any || r.end > last_any->end) last_any = &r;
    if (r.is_dst && (!last_dst || r.end > last_dst->end)) last_dst = &r;
  }
}

void expect_copy_columns(const char* op, const TensorView& src, int64_t col0, const TensorView& dst,
                         Device device) {
  expect(op, "src", src, device, src.dtype(), src.dtype(), {kAny, kAny});
  expect(op, "dst", dst, device, src.dtype(), src.dtype(), {src.dim(0), kAny});
  DI_CHECK(col0 >= 0 && col0 + dst.dim(1) <= src.dim(1), ErrorCode::kInvalidArgument,
           "{}: columns [{}, {}) are outside src {}", op, col0, col0 + dst.dim(1), src.shape_str());
  expect_no_alias(op, "dst", dst, "src", src);
}

void expect_segments_tile(const char* op, std::span<const Backend::AttentionSegment> segments,
                          int64_t M) {
  int64_t next = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const auto& seg = segments[i];
    DI_CHECK(seg.row0 == next && seg.count >= 0, ErrorCode::kInvalidArgument,
             "{}: segment {} covers rows [{}, {}), expected it to start at row {}", op, i, seg.row0,
             seg.row0 + seg.count, next);
    next += seg.count;
  }
  DI_CHECK(next == M, ErrorCode::kInvalidArgument, "{}: the segments cover {} rows of q's {}", op,
           next, M);
}

int64_t expect_indexer_segments(const char* op, std::span<const Backend::IndexerSegment> segments,
                                int64_t M, int64_t d, int64_t N, Device device) {
  int64_t rows = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const auto& seg = segments[i];
    DI_CHECK(seg.row0 >= 0 && seg.count >= 0 && seg.row0 + seg.count <= M,
             ErrorCode::kInvalidArgument, "{}: segment {} rows [{}, {}) are outside q's {} rows",
             op, i, seg.row0, seg.row0 + seg.count, M);
    if (given(seg.k)) {
      expect(op, "k", seg.k, device, DType::kF32, DType::kF32, {kAny, d});
      DI_CHECK(seg.k.dim(0) <= N, ErrorCode::kInvalidArgument,
               "{}: segment {} has {} keys, more than the {} columns of scores", op, i,
               seg.k.dim(0), N);
    }
    rows += seg.count;
  }
  return rows;
}

void expect_fill(const char* op, const TensorView& t, Device device, float lo, float hi) {
  DI_CHECK(t.device() == device && t.is_contiguous() && (t.data() != nullptr || t.numel() == 0),
           ErrorCode::kInvalidArgument, "{}: t {} must be a contiguous {} tensor", op,
           t.shape_str(), device_word(device));
  DI_CHECK(t.dtype() == DType::kF32 || t.dtype() == DType::kBF16 || t.dtype() == DType::kFP4E2M1,
           ErrorCode::kInvalidArgument, "{}: t is {} {}, expected F32, BF16 or FP4E2M1", op,
           dtype_name(t.dtype()), t.shape_str());
  DI_CHECK(t.dtype() != DType::kFP4E2M1 || (lo == -6.f && hi == 6.f && t.numel() % 2 == 0),
           ErrorCode::kInvalidArgument,
           "{}: FP4E2M1 fills take every code (lo -6, hi 6) and whole bytes; got [{}, {}] over "
           "{} values",
           op, lo, hi, t.numel());
  DI_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, ErrorCode::kInvalidArgument,
           "{}: the range [{}, {}] must be finite with lo <= hi", op, lo, hi);
}

}  // namespace deepinfer::arg_checks
