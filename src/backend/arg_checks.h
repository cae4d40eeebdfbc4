// Argument checks shared by every backend's ops: errors name the op, the tensor, its dtype and
// shape, and what was expected.
#pragma once

#include <initializer_list>
#include <span>

#include "backend/backend.h"
#include "core/tensor.h"

namespace deepinfer::arg_checks {

inline constexpr int64_t kAny = -1;  // matches any extent

// Throws kInvalidArgument unless t is a non-empty contiguous tensor on `device` whose dtype is
// `a` or `b` and whose shape matches.
void expect(const char* op, const char* name, const TensorView& t, Device device, DType a, DType b,
            std::initializer_list<int64_t> shape);
// Like expect(), with the dtype and shape of ref.
void expect_like(const char* op, const char* name, const TensorView& t, const char* ref_name,
                 const TensorView& ref, Device device);
// Like expect_like(), in `dtype` instead of ref's (an op's output in another dtype).
void expect_shape_of(const char* op, const char* name, const TensorView& t, DType dtype,
                     const char* ref_name, const TensorView& ref, Device device);
// Throws unless the byte ranges of a and b are disjoint.
void expect_no_alias(const char* op, const char* a_name, const TensorView& a, const char* b_name,
                     const TensorView& b);
// copy_batch's arguments: as many src as dst views, pair by pair the same dtype and element
// count, contiguous, on `device`; and no destination overlapping any other range (see
// Backend::copy_batch).
void expect_copy_batch(const char* op, std::span<const TensorView> src,
                       std::span<const TensorView> dst, Device device);
// copy_columns' arguments: src [M, N] and dst [M, w] contiguous on `device`, one dtype,
// col0 + w <= N, no overlap.
void expect_copy_columns(const char* op, const TensorView& src, int64_t col0, const TensorView& dst,
                         Device device);
// attention_batch's segments tile rows [0, M) in order (non-negative counts).
void expect_segments_tile(const char* op, std::span<const Backend::AttentionSegment> segments,
                          int64_t M);
// indexer_scores_batch's segments: rows inside q's M, counts >= 0, each k [E, d] on `device`
// with E <= N; returns the rows they cover together (scores must have that many).
int64_t expect_indexer_segments(const char* op, std::span<const Backend::IndexerSegment> segments,
                                int64_t M, int64_t d, int64_t N, Device device);
// fill_random's arguments: t a contiguous F32 or BF16 tensor on `device` (any rank, may be empty),
// lo <= hi both finite.
void expect_fill(const char* op, const TensorView& t, Device device, float lo, float hi);
// True when an optional argument was given: a non-null view (a [0, ...] tensor counts as given).
inline bool given(const TensorView& t) {
  return !t.empty();
}

}  // namespace deepinfer::arg_checks
