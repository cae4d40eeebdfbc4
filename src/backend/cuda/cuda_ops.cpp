// mHC, attention-side ops and the router: argument checks here, the work in the kernels.
#include <algorithm>
#include <climits>
#include <unordered_map>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/kernels.h"

namespace deepinfer::cuda {

namespace {

struct HcShape {
  int64_t M, hc, D;
};

// A normed output's rows for the kernels (checked F32 or BF16).
NormedOut normed_out(const TensorView& t) {
  return {f32_out(t), bf16_out(t)};
}

// hc_pre's and hc_pre_norm's checks of X and the mixing weights and outputs; `out` is the
// collapsed rows (fp32) or the normed ones (fp32, or bf16 where bf16_out: a product's operand).
HcShape check_hc_pre(const char* op, const TensorView& X, const TensorView& fn,
                     const TensorView& base, const TensorView& scale, const char* out_name,
                     const TensorView& out, const TensorView& post, const TensorView& comb,
                     bool bf16_out = false) {
  expect(op, "X", X, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = X.dim(0), hc = X.dim(1), D = X.dim(2), nmix = (2 + hc) * hc;
  DI_CHECK(hc >= 1 && D >= 1, ErrorCode::kInvalidArgument, "{}: X {} has no streams", op,
           X.shape_str());
  DI_CHECK(hc <= kMaxHc, ErrorCode::kUnsupported, "{}: {} streams exceed the supported {}", op, hc,
           kMaxHc);
  expect(op, "fn", fn, DType::kF32, {nmix, hc * D});
  expect(op, "base", base, DType::kF32, {nmix});
  expect(op, "scale", scale, DType::kF32, {3});
  if (bf16_out)
    expect2(op, out_name, out, DType::kF32, DType::kBF16, {M, D});
  else
    expect(op, out_name, out, DType::kF32, {M, D});
  expect(op, "post", post, DType::kF32, {M, hc});
  expect(op, "comb", comb, DType::kF32, {M, hc, hc});
  expect_no_alias(op, out_name, out, "X", X);
  DI_CHECK(M <= INT_MAX, ErrorCode::kUnsupported, "{}: {} rows exceed the grid", op, M);
  return {M, hc, D};
}

// hc_post's checks of X, y, post, comb and out; returns X's shape.
HcShape check_hc_post(const char* op, const TensorView& X, const TensorView& y,
                      const TensorView& post, const TensorView& comb, const TensorView& out) {
  expect(op, "X", X, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = X.dim(0), hc = X.dim(1), D = X.dim(2);
  DI_CHECK(hc <= kMaxHc, ErrorCode::kUnsupported, "{}: {} streams exceed the supported {}", op, hc,
           kMaxHc);
  expect(op, "y", y, DType::kF32, {M, D});
  expect(op, "post", post, DType::kF32, {M, hc});
  expect(op, "comb", comb, DType::kF32, {M, hc, hc});
  expect(op, "out", out, DType::kF32, {M, hc, D});
  expect_no_alias(op, "out", out, "X", X);
  expect_no_alias(op, "out", out, "y", y);
  return {M, hc, D};
}

}  // namespace

void CudaBackend::hc_pre(const TensorView& X, const TensorView& fn, const TensorView& base,
                         const TensorView& scale, int sinkhorn_iters, float hc_eps, float norm_eps,
                         const TensorView& collapsed, const TensorView& post,
                         const TensorView& comb) {
  const char* op = "hc_pre";
  OpScope s(*this, op);
  const auto [M, hc, D] = check_hc_pre(op, X, fn, base, scale, "collapsed", collapsed, post, comb);
  const std::shared_ptr<void> partial = scratch(hc_partial_floats(M, hc, D, (2 + hc) * hc) * 4);
  check(launch_hc_pre(X.data_as<float>(), M, hc, D, fn.data_as<float>(), base.data_as<float>(),
                      scale.data_as<float>(), sinkhorn_iters, hc_eps, norm_eps,
                      collapsed.data_as<float>(), post.data_as<float>(), comb.data_as<float>(),
                      static_cast<float*>(partial.get()), ctx_->num_sms(), ctx_->stream()),
        op);
}

void CudaBackend::hc_pre_norm(const TensorView& X, const TensorView& fn, const TensorView& base,
                              const TensorView& scale, int sinkhorn_iters, float hc_eps,
                              float norm_eps, const TensorView& norm_weight,
                              const TensorView& normed, const TensorView& post,
                              const TensorView& comb) {
  const char* op = "hc_pre_norm";
  {
    OpScope s(*this, op);
    const auto [M, hc, D] =
        check_hc_pre(op, X, fn, base, scale, "normed", normed, post, comb, /*bf16_out=*/true);
    if (given(norm_weight)) expect(op, "norm_weight", norm_weight, DType::kF32, {D});
    const float* w = given(norm_weight) ? norm_weight.data_as<float>() : nullptr;
    if (hc_pre_norm_fused(hc, D, w, normed.data())) {
      const std::shared_ptr<void> partial = scratch(hc_partial_floats(M, hc, D, (2 + hc) * hc) * 4);
      check(launch_hc_pre_norm(X.data_as<float>(), M, hc, D, fn.data_as<float>(),
                               base.data_as<float>(), scale.data_as<float>(), sinkhorn_iters,
                               hc_eps, norm_eps, w, normed_out(normed), post.data_as<float>(),
                               comb.data_as<float>(), static_cast<float*>(partial.get()),
                               ctx_->num_sms(), ctx_->stream()),
            op);
      ++fused_hc_pre_norm_calls_;
      return;
    }
  }
  Backend::hc_pre_norm(X, fn, base, scale, sinkhorn_iters, hc_eps, norm_eps, norm_weight, normed,
                       post, comb);
}

void CudaBackend::hc_post(const TensorView& X, const TensorView& y, const TensorView& post,
                          const TensorView& comb, const TensorView& out) {
  const char* op = "hc_post";
  OpScope s(*this, op);
  const auto [M, hc, D] = check_hc_post(op, X, y, post, comb, out);
  check(launch_hc_post(X.data_as<float>(), y.data_as<float>(), post.data_as<float>(),
                       comb.data_as<float>(), M, hc, D, out.data_as<float>(), ctx_->stream()),
        op);
}

void CudaBackend::hc_post_pre_norm(const TensorView& X, const TensorView& y, const TensorView& post,
                                   const TensorView& comb, const TensorView& out,
                                   const TensorView& fn, const TensorView& base,
                                   const TensorView& scale, int sinkhorn_iters, float hc_eps,
                                   float norm_eps, const TensorView& norm_weight,
                                   const TensorView& normed, const TensorView& next_post,
                                   const TensorView& next_comb) {
  const char* op = "hc_post_pre_norm";
  if (hc_post_mix_) {  // else the two ops in turn check their own arguments
    OpScope s(*this, op);
    const auto [M, hc, D] = check_hc_post(op, X, y, post, comb, out);
    check_hc_pre(op, out, fn, base, scale, "normed", normed, next_post, next_comb,
                 /*bf16_out=*/true);
    if (given(norm_weight)) expect(op, "norm_weight", norm_weight, DType::kF32, {D});
    const float* w = given(norm_weight) ? norm_weight.data_as<float>() : nullptr;
    if (hc_post_mix_fused(M, hc, D, w, normed.data()) && aligned16(fn.data())) {
      const std::shared_ptr<void> partial = scratch(hc_partial_floats(M, hc, D, (2 + hc) * hc) * 4);
      check(launch_hc_post_pre_norm(
                X.data_as<float>(), y.data_as<float>(), post.data_as<float>(),
                comb.data_as<float>(), M, hc, D, out.data_as<float>(), fn.data_as<float>(),
                base.data_as<float>(), scale.data_as<float>(), sinkhorn_iters, hc_eps, norm_eps, w,
                normed_out(normed), next_post.data_as<float>(), next_comb.data_as<float>(),
                static_cast<float*>(partial.get()), ctx_->stream()),
            op);
      ++hc_post_mix_calls_;
      ++fused_hc_pre_norm_calls_;
      return;
    }
  }
  Backend::hc_post_pre_norm(X, y, post, comb, out, fn, base, scale, sinkhorn_iters, hc_eps,
                            norm_eps, norm_weight, normed, next_post, next_comb);
}

void CudaBackend::hc_head(const TensorView& X, const TensorView& fn, const TensorView& base,
                          const TensorView& scale, float hc_eps, float norm_eps,
                          const TensorView& out) {
  const char* op = "hc_head";
  OpScope s(*this, op);
  expect(op, "X", X, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = X.dim(0), hc = X.dim(1), D = X.dim(2);
  DI_CHECK(hc >= 1 && D >= 1, ErrorCode::kInvalidArgument, "hc_head: X {} has no streams",
           X.shape_str());
  DI_CHECK(hc <= kMaxHc, ErrorCode::kUnsupported, "hc_head: {} streams exceed the supported {}", hc,
           kMaxHc);
  expect(op, "fn", fn, DType::kF32, {hc, hc * D});
  expect(op, "base", base, DType::kF32, {hc});
  expect(op, "scale", scale, DType::kF32, {1});
  expect(op, "out", out, DType::kF32, {M, D});
  expect_no_alias(op, "out", out, "X", X);
  DI_CHECK(M <= INT_MAX, ErrorCode::kUnsupported, "hc_head: {} rows exceed the grid", M);
  const std::shared_ptr<void> partial = scratch(hc_partial_floats(M, hc, D, hc) * 4);
  check(launch_hc_head(X.data_as<float>(), M, hc, D, fn.data_as<float>(), base.data_as<float>(),
                       scale.data_as<float>(), hc_eps, norm_eps, out.data_as<float>(),
                       static_cast<float*>(partial.get()), ctx_->num_sms(), ctx_->stream()),
        op);
}

void CudaBackend::window_pool(const TensorView& kv, const TensorView& gate,
                              const TensorView& slot_bias, const TensorView& out) {
  const char* op = "window_pool";
  OpScope s(*this, op);
  expect(op, "kv", kv, DType::kF32, {kAny, kAny, kAny});
  const int64_t N = kv.dim(0), S = kv.dim(1), d = kv.dim(2);
  expect(op, "gate", gate, DType::kF32, {N, S, d});
  if (given(slot_bias)) expect(op, "slot_bias", slot_bias, DType::kF32, {S, d});
  expect(op, "out", out, DType::kF32, {N, d});
  check(launch_window_pool(kv.data_as<float>(), gate.data_as<float>(),
                           given(slot_bias) ? slot_bias.data_as<float>() : nullptr, N, S, d,
                           out.data_as<float>(), ctx_->stream()),
        op);
}

void CudaBackend::attention(const TensorView& q, const TensorView& win_kv, int64_t window,
                            const TensorView& comp_kv, const TensorView& comp_idx,
                            const TensorView& comp_visible, const TensorView& sinks, float scale,
                            const TensorView& out) {
  const AttentionSegment seg{0,           q.ndim() > 0 ? q.dim(0) : 0, win_kv, comp_kv, comp_idx,
                             comp_visible};
  run_attention("attention", q, std::span<const AttentionSegment>(&seg, 1), window, sinks, scale,
                out);
}

void CudaBackend::attention_batch(const TensorView& q, std::span<const AttentionSegment> segments,
                                  int64_t window, const TensorView& sinks, float scale,
                                  const TensorView& out) {
  run_attention("attention_batch", q, segments, window, sinks, scale, out);
}

void CudaBackend::attention_batch_derotated(const TensorView& q,
                                            std::span<const AttentionSegment> segments,
                                            int64_t window, const TensorView& sinks, float scale,
                                            const TensorView& positions, const TensorView& inv_freq,
                                            const TensorView& out) {
  const char* op = "attention_batch_derotated";
  expect(op, "positions", positions, DType::kI32, {kAny});
  expect(op, "inv_freq", inv_freq, DType::kF32, {kAny});
  run_attention(op, q, segments, window, sinks, scale, out, positions, inv_freq);
}

// The wgmma kernel's calls (run_attention): prefill-sized rows of its shape, their keys split
// (segments of at least kSplitKeysMinRows rows; a call of fewer does not normalise in-kernel).
bool CudaBackend::attention_normalises_raw_q(int64_t rows, int64_t heads, int64_t head_dim,
                                             int64_t rope_pairs) const {
  return wgmma_ && attention_wgmma_supported(heads, head_dim) &&
         attention_wgmma_norms_q(rope_pairs) && rows >= kSplitKeysMinRows &&
         attention_groups_per_block(rows, heads, ctx_->num_sms()) == 2;
}

void CudaBackend::attention_batch_raw_q(const TensorView& q_raw,
                                        std::span<const AttentionSegment> segments, int64_t window,
                                        const TensorView& sinks, float scale, float q_eps,
                                        const TensorView& positions, const TensorView& inv_freq,
                                        const TensorView& out) {
  const char* op = "attention_batch_raw_q";
  expect(op, "positions", positions, DType::kI32, {kAny});
  expect(op, "inv_freq", inv_freq, DType::kF32, {kAny});
  run_attention(op, q_raw, segments, window, sinks, scale, out, positions, inv_freq, &q_eps);
}

void CudaBackend::run_attention(const char* op, const TensorView& q,
                                std::span<const AttentionSegment> segments, int64_t window,
                                const TensorView& sinks, float scale, const TensorView& out,
                                const TensorView& positions, const TensorView& inv_freq,
                                const float* q_norm_eps) {
  OpScope s(*this, op);
  expect(op, "q", q, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = q.dim(0), H = q.dim(1), hd = q.dim(2);
  DI_CHECK(hd <= kMaxAttnHeadDim, ErrorCode::kUnsupported,
           "{}: head_dim {} exceeds the supported {}", op, hd, kMaxAttnHeadDim);
  expect(op, "sinks", sinks, DType::kF32, {H});
  const bool derotate = given(positions);
  // F32, or BF16 where the output is de-rotated here (the product after it reads bf16).
  if (derotate)
    expect2(op, "out", out, DType::kF32, DType::kBF16, {M, H, hd});
  else
    expect(op, "out", out, DType::kF32, {M, H, hd});
  expect_no_alias(op, "out", out, "q", q);
  arg_checks::expect_segments_tile(op, segments, M);
  int64_t R = 0;
  if (derotate) {
    expect(op, "positions", positions, DType::kI32, {M});
    R = inv_freq.dim(0);
    DI_CHECK(2 * R <= hd, ErrorCode::kInvalidArgument,
             "{}: inv_freq {} rotates {} dims but heads of q {} have only {}", op,
             inv_freq.shape_str(), 2 * R, q.shape_str(), hd);
  }

  // One descriptor per query row: its sequence's keys, and its key units, chosen from that
  // sequence alone (the most keys any of its rows can see: the exact counts are on the device).
  std::vector<AttnRow> rows(static_cast<size_t>(M));
  const int sms = ctx_->num_sms();
  // Each segment's key units, from its shapes before the loop below checks them (a segment
  // that fails there never launches): the launch's block shape follows from them
  // (attention_unit_plan folds enough split rows' units in one-group blocks).
  const auto rows_of = [](const TensorView& t, int axis) {
    return given(t) && t.ndim() == 2 ? t.dim(axis) : int64_t{0};
  };
  std::vector<int> seg_splits;
  int64_t split_rows = 0, units = 0;
  for (const AttentionSegment& seg : segments) {
    // A comp_idx row picks at most E distinct entries of its own sequence: min(K, E), not the
    // width K, which follows the widest row of the batch (splits must not depend on companions).
    const int64_t E = rows_of(seg.comp_kv, 0);
    const int64_t comp_keys = given(seg.comp_idx)       ? std::min(rows_of(seg.comp_idx, 1), E)
                              : given(seg.comp_visible) ? E
                                                        : 0;
    const int64_t max_keys = std::min<int64_t>(window, rows_of(seg.win_kv, 0)) + comp_keys;
    seg_splits.push_back(attention_splits(seg.count, H, max_keys, sms));
    if (seg_splits.back() > 1) {
      split_rows += seg.count;
      units += seg.count * seg_splits.back();
    }
  }
  const AttnUnitPlan plan = attention_unit_plan(split_rows, units, H, sms);
  const int groups_per_block = plan.fold ? 1 : attention_groups_per_block(M, H, sms);
  const int64_t heads_per_block = kAttnHeadsPerBlock * groups_per_block;
  const int64_t groups = (H + heads_per_block - 1) / heads_per_block;  // blocks per row and range
  int64_t Kmax = 0, Emax = 0;
  bool all_split = true;  // every segment with rows has its keys split (the wgmma kernel's need)
  // Two-group blocks of a prefill-sized segment read its keys split into fp16 hi / lo once here
  // (each key serves up to a window of queries, or every query picking it) instead of
  // converting them per query; the same halves reach the kernel's shared memory. Segments
  // viewing one buffer (a long CSA prompt's row chunks: prefixes of its window rows, the same
  // entries) share one split of the most rows any of them sees.
  // This runs before the loop below validates the segments: a tensor that would fail there is
  // never split (no conversion reads past it), and that check reports it.
  const auto keys_fit = [&](const TensorView& t) {
    return t.dtype() == DType::kF32 && t.ndim() == 2 && t.dim(1) == hd && aligned16(t.data());
  };
  const auto splits_keys = [&](const AttentionSegment& seg) {
    return groups_per_block == 2 && seg.count >= kSplitKeysMinRows && hd % 8 == 0 &&
           given(seg.win_kv) && keys_fit(seg.win_kv) &&
           (!given(seg.comp_kv) || keys_fit(seg.comp_kv));
  };
  struct Split {
    int64_t rows = 0;
    const uint16_t* halves = nullptr;
  };
  std::unordered_map<const void*, Split> split_of;  // by the first row's address
  for (const AttentionSegment& seg : segments) {
    if (!splits_keys(seg)) continue;
    for (const TensorView* t : {&seg.win_kv, &seg.comp_kv})
      if (given(*t)) split_of[t->data()].rows = std::max(split_of[t->data()].rows, t->dim(0));
  }
  std::vector<std::shared_ptr<void>> split_holders;
  for (auto& [base, sp] : split_of) {
    split_holders.push_back(scratch(static_cast<size_t>(sp.rows * hd) * 2 * sizeof(uint16_t)));
    auto* dst = static_cast<uint16_t*>(split_holders.back().get());
    check(launch_split_keys(static_cast<const float*>(base), sp.rows, hd, dst, ctx_->stream()), op);
    sp.halves = dst;
  }
  for (const AttentionSegment& seg : segments) {
    const int64_t S = seg.count;
    expect(op, "win_kv", seg.win_kv, DType::kF32, {kAny, hd});
    DI_CHECK(seg.win_kv.dim(0) >= S, ErrorCode::kInvalidArgument,
             "{}: win_kv {} has fewer rows than the {} queries of its segment", op,
             seg.win_kv.shape_str(), S);
    const int64_t P = seg.win_kv.dim(0) - S;
    int64_t E = 0;
    if (given(seg.comp_kv)) {
      expect(op, "comp_kv", seg.comp_kv, DType::kF32, {kAny, hd});
      E = seg.comp_kv.dim(0);
    }
    DI_CHECK(E <= INT_MAX, ErrorCode::kUnsupported, "{}: {} compressed entries", op, E);
    const bool use_idx = given(seg.comp_idx);
    const bool use_vis = !use_idx && given(seg.comp_visible);
    int64_t K = 0;
    if (use_idx) {
      expect(op, "comp_idx", seg.comp_idx, DType::kI32, {S, kAny});
      K = seg.comp_idx.dim(1);
      DI_CHECK(K <= INT_MAX, ErrorCode::kUnsupported, "{}: comp_idx has {} columns", op, K);
    } else if (use_vis) {
      expect(op, "comp_visible", seg.comp_visible, DType::kI32, {S});
    }
    expect_no_alias(op, "out", out, "win_kv", seg.win_kv);
    if (E > 0) expect_no_alias(op, "out", out, "comp_kv", seg.comp_kv);
    Kmax = std::max(Kmax, K);
    if (K > 0) Emax = std::max(Emax, E);
    const int splits = seg_splits[static_cast<size_t>(&seg - segments.data())];
    const uint16_t* win_h = nullptr;
    const uint16_t* comp_h = nullptr;
    if (splits_keys(seg)) {
      win_h = split_of.at(seg.win_kv.data()).halves;
      if (E > 0) comp_h = split_of.at(seg.comp_kv.data()).halves;
    } else if (S > 0) {
      all_split = false;
    }
    for (int64_t r = 0; r < S; ++r) {
      AttnRow& row = rows[seg.row0 + r];
      row.win_h = win_h;
      row.comp_h = comp_h;
      row.win = seg.win_kv.data_as<float>();
      row.comp = E > 0 ? seg.comp_kv.data_as<float>() : nullptr;
      row.idx = use_idx && K > 0 ? seg.comp_idx.data_as<int32_t>() + r * K : nullptr;
      row.visible = use_vis ? seg.comp_visible.data_as<int32_t>() + r : nullptr;
      row.win_end = P + r + 1;
      row.E = static_cast<int32_t>(E);
      row.K = static_cast<int32_t>(K);
      row.splits = splits;
    }
  }
  if (M == 0 || H == 0) return;
  // Each row's blocks and partial slots as the plan schedules its units.
  int64_t blocks = 0, part_rows = 0;
  bool uniform = true;  // every row has as many blocks
  for (AttnRow& row : rows) {
    const bool partials = row.splits > 1 && !plan.fold;
    row.unit_blocks =
        partials
            ? static_cast<int32_t>((row.splits + plan.units_per_block - 1) / plan.units_per_block)
            : 1;
    row.first_block = blocks;
    row.part_off = partials ? part_rows : 0;
    blocks += groups * row.unit_blocks;
    if (partials) part_rows += row.splits;
    uniform = uniform && row.unit_blocks == rows[0].unit_blocks;
  }
  DI_CHECK(M * H <= INT_MAX, ErrorCode::kUnsupported, "{}: {} x {} blocks exceed the grid", op, M,
           H);
  const std::shared_ptr<void> rows_dev = upload_scratch(rows.data(), rows.size() * sizeof(AttnRow));
  const auto* rows_ptr = static_cast<const AttnRow*>(rows_dev.get());

  // comp_idx rows are first compacted to their distinct valid entries (duplicates count once).
  std::shared_ptr<void> list_buf, count_buf;
  const int32_t* list = nullptr;
  const int32_t* count = nullptr;
  if (Kmax > 0) {
    list_buf = scratch(static_cast<size_t>(M * Kmax) * sizeof(int32_t));
    count_buf = scratch(static_cast<size_t>(M) * sizeof(int32_t));
    check(launch_dedup_idx(rows_ptr, M, Kmax, Emax, static_cast<int32_t*>(list_buf.get()),
                           static_cast<int32_t*>(count_buf.get()), ctx_->error_word(),
                           ctx_->stream()),
          op);
    list = static_cast<const int32_t*>(list_buf.get());
    count = static_cast<const int32_t*>(count_buf.get());
  }
  DI_CHECK(blocks <= INT_MAX, ErrorCode::kUnsupported, "{}: {} blocks exceed the grid", op, blocks);
  const int64_t slots = part_rows * H;
  std::shared_ptr<void> workspace;
  if (slots > 0) workspace = scratch(static_cast<size_t>(slots * (hd + 2)) * sizeof(float));
  // The output as the kernels write it: de-rotated and bf16 there where they store pairs of dims
  // (an even hd, out aligned to two elements), else fp32 (into a scratch buffer for a bf16 out)
  // rotated and cast after.
  const bool bf16_out = out.dtype() == DType::kBF16;
  const bool in_kernel = attention_stores_pairs(hd, out.data(), bf16_out);
  std::shared_ptr<void> f32_out;
  AttnOutput dst;
  if (in_kernel && bf16_out) {
    dst.out_bf16 = out.data_as<uint16_t>();
  } else if (bf16_out) {
    f32_out = scratch(static_cast<size_t>(M * H * hd) * sizeof(float));
    dst.out = static_cast<float*>(f32_out.get());
  } else {
    dst.out = out.data_as<float>();
  }
  if (derotate && in_kernel) {
    dst.rope_pos = positions.data_as<int32_t>();
    dst.rope_freq = inv_freq.data_as<float>();
    dst.rope_R = R;
  }
  // Prefill-sized calls of the model's shapes run on Hopper wgmma (the same bits).
  const bool on_wgmma = wgmma_ && groups_per_block == 2 && attention_wgmma_supported(H, hd) &&
                        all_split && split_rows == 0 && in_kernel && aligned16(q.data());
  // Raw queries (attention_batch_raw_q): normalised and rotated as the wgmma kernel's halves
  // are made where it can, else by rms_norm_rope into a copy first.
  const float* qp = q.data_as<float>();
  Tensor normed_q;
  const bool q_in_kernel = q_norm_eps && on_wgmma && dst.rope_pos && attention_wgmma_norms_q(R);
  if (q_norm_eps && !q_in_kernel) {
    normed_q = empty({M, H, hd});
    rms_norm_rope(q, TensorView(), *q_norm_eps, positions, inv_freq, normed_q);
    qp = normed_q.data_as<float>();
  }
  if (on_wgmma) {
    std::shared_ptr<void> q_halves =
        scratch(static_cast<size_t>(M * H * 2 * hd) * sizeof(uint16_t));
    auto* halves = static_cast<uint16_t*>(q_halves.get());
    check(launch_attention_q_halves(qp, M, q_in_kernel ? q_norm_eps : nullptr, dst.rope_pos,
                                    dst.rope_freq, R, halves, ctx_->stream()),
          op);
    check(launch_attention_wgmma(halves, M, rows_ptr, window, list, count, Kmax,
                                 sinks.data_as<float>(), scale, dst, ctx_->error_word(),
                                 ctx_->num_sms(), ctx_->stream()),
          op);
    ++wgmma_attention_calls_;
    fused_q_norm_attention_calls_ += q_in_kernel;
    return;
  }
  const int quarter_warps = attention_quarter_warps(groups_per_block, hd, blocks, ctx_->num_sms());
  check(launch_attention(qp, M, H, hd, rows_ptr, groups_per_block, quarter_warps, blocks, uniform,
                         plan, window, list, count, Kmax, sinks.data_as<float>(), scale,
                         static_cast<float*>(workspace.get()), slots, dst, ctx_->error_word(),
                         ctx_->stream()),
        op);
  if (in_kernel) return;
  if (derotate)
    check(launch_rope(dst.out, M, H, hd, positions.data_as<int32_t>(), inv_freq.data_as<float>(), R,
                      true, ctx_->stream()),
          op);
  if (bf16_out)
    check(launch_f32_to_bf16(dst.out, out.data_as<uint16_t>(), M * H * hd, ctx_->stream()), op);
}

void CudaBackend::indexer_scores(const TensorView& q, const TensorView& k, const TensorView& w,
                                 float scale, const TensorView& visible, const TensorView& scores) {
  const char* op = "indexer_scores";
  OpScope s(*this, op);
  expect(op, "q", q, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = q.dim(0), nh = q.dim(1), d = q.dim(2);
  int64_t E = 0;
  if (given(k)) {
    expect(op, "k", k, DType::kF32, {kAny, d});
    E = k.dim(0);
  }
  expect(op, "w", w, DType::kF32, {M, nh});
  expect(op, "visible", visible, DType::kI32, {M});
  expect(op, "scores", scores, DType::kF32, {M, E});
  if (M == 0 || E == 0) return;
  if (wgmma_ && indexer_wgmma_supported(nh, d) && aligned16(q.data()) && aligned16(k.data()) &&
      aligned16(w.data())) {
    // Fused on tensor cores: the per-head products never reach memory.
    std::shared_ptr<void> halves = scratch(static_cast<size_t>(2 * E * d) * sizeof(uint16_t));
    check(launch_indexer_wgmma(q.data_as<float>(), k.data_as<float>(), M, nh, d, E,
                               w.data_as<float>(), scale, visible.data_as<int32_t>(),
                               static_cast<uint16_t*>(halves.get()), scores.data_as<float>(),
                               ctx_->num_sms(), ctx_->error_word(), ctx_->stream()),
          op);
    return;
  }
  // The per-head products q[m, h] . k[e] are one GEMM, dots [M * nh, E] = q [M * nh, d] k^T, in
  // fp32 (no TF32: the top-k after this is a discrete choice); queries go in chunks that keep
  // the buffer near 256 MiB. A kernel then weights, rectifies and sums over the heads.
  const int64_t per_query = nh * E * static_cast<int64_t>(sizeof(float));
  const int64_t chunk = std::clamp<int64_t>((int64_t{256} << 20) / per_query, 1, M);
  std::shared_ptr<void> dots = scratch(static_cast<size_t>(chunk * per_query));
  for (int64_t c0 = 0; c0 < M; c0 += chunk) {
    const int64_t mc = std::min(chunk, M - c0);
    gemm(op, DType::kF32, q.data_as<float>() + c0 * nh * d, d, 0, k.data_as<float>(), d, 0,
         static_cast<float*>(dots.get()), E, 0, mc * nh, E, d, 1, 0.f);
    check(
        launch_indexer_reduce(static_cast<const float*>(dots.get()), mc, nh, E,
                              w.data_as<float>() + c0 * nh, scale, visible.data_as<int32_t>() + c0,
                              scores.data_as<float>() + c0 * E, ctx_->error_word(), ctx_->stream()),
        op);
  }
}

void CudaBackend::indexer_scores_batch(const TensorView& q,
                                       std::span<const IndexerSegment> segments,
                                       const TensorView& w, float scale, const TensorView& visible,
                                       const TensorView& scores) {
  const char* op = "indexer_scores_batch";
  OpScope s(*this, op);
  expect(op, "q", q, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = q.dim(0), nh = q.dim(1), d = q.dim(2);
  expect(op, "w", w, DType::kF32, {M, nh});
  expect(op, "visible", visible, DType::kI32, {M});
  expect(op, "scores", scores, DType::kF32, {kAny, kAny});
  const int64_t N = scores.dim(1);
  const int64_t R = arg_checks::expect_indexer_segments(op, segments, M, d, N, Device::kCuda);
  expect(op, "scores", scores, DType::kF32, {R, N});
  DI_CHECK(indexer_rows_smem(nh, d) <= 200 * 1024, ErrorCode::kUnsupported,
           "{}: {} heads of {} dims exceed the kernel's shared memory", op, nh, d);
  if (R == 0 || N == 0) return;
  std::vector<IndexerRow> rows;
  rows.reserve(static_cast<size_t>(R));
  for (const IndexerSegment& seg : segments)
    for (int64_t r = 0; r < seg.count; ++r)
      rows.push_back({given(seg.k) ? seg.k.data_as<float>() : nullptr, seg.row0 + r,
                      given(seg.k) ? seg.k.dim(0) : 0});
  const std::shared_ptr<void> rows_dev =
      upload_scratch(rows.data(), rows.size() * sizeof(IndexerRow));
  const auto* rows_ptr = static_cast<const IndexerRow*>(rows_dev.get());
  // On Hopper the wgmma kernel (each block splits its row's keys to fp16 hi / lo); else fp32
  // FMAs.
  bool fused =
      wgmma_ && indexer_wgmma_supported(nh, d) && aligned16(q.data()) && aligned16(w.data());
  for (const IndexerSegment& seg : segments)
    fused = fused && (!given(seg.k) || aligned16(seg.k.data()));
  if (fused)
    check(launch_indexer_rows_wgmma(q.data_as<float>(), M, nh, d, w.data_as<float>(),
                                    visible.data_as<int32_t>(), rows_ptr, R, N, scale,
                                    scores.data_as<float>(), ctx_->num_sms(), ctx_->error_word(),
                                    ctx_->stream()),
          op);
  else
    check(launch_indexer_rows(q.data_as<float>(), nh, d, w.data_as<float>(),
                              visible.data_as<int32_t>(), rows_ptr, R, N, scale,
                              scores.data_as<float>(), ctx_->error_word(), ctx_->stream()),
          op);
}

void CudaBackend::topk(const TensorView& scores, int k, const TensorView& idx) {
  const char* op = "topk";
  OpScope s(*this, op);
  expect(op, "scores", scores, DType::kF32, {kAny, kAny});
  const int64_t M = scores.dim(0), N = scores.dim(1);
  DI_CHECK(k >= 0 && k <= N && N <= INT_MAX, ErrorCode::kInvalidArgument,
           "topk: k = {} must be in [0, {}] for scores {}", k, N, scores.shape_str());
  DI_CHECK(k <= kMaxTopk, ErrorCode::kUnsupported, "topk: k = {} exceeds the supported {}", k,
           kMaxTopk);
  expect(op, "idx", idx, DType::kI32, {M, k});
  DI_CHECK(M <= INT_MAX, ErrorCode::kUnsupported, "topk: {} rows exceed the grid", M);
  check(launch_topk(scores.data_as<float>(), M, N, k, idx.data_as<int32_t>(), ctx_->stream()), op);
}

void CudaBackend::route(const TensorView& logits, ScoringFunc func, const TensorView& bias,
                        const TensorView& tid2eid, const TensorView& ids, float routed_scale,
                        const TensorView& weights, const TensorView& idx) {
  const char* op = "route";
  OpScope s(*this, op);
  expect(op, "logits", logits, DType::kF32, {kAny, kAny});
  const int64_t M = logits.dim(0), E = logits.dim(1);
  expect(op, "weights", weights, DType::kF32, {M, kAny});
  const int64_t k = weights.dim(1);
  expect(op, "idx", idx, DType::kI32, {M, k});
  const bool hash = given(tid2eid);
  if (hash) {
    expect(op, "tid2eid", tid2eid, DType::kI32, {kAny, k});
    expect(op, "ids", ids, DType::kI32, {M});
  } else {
    DI_CHECK(k <= E, ErrorCode::kInvalidArgument, "route: top-{} of {} experts (logits {})", k, E,
             logits.shape_str());
  }
  const bool has_bias = given(bias);
  if (has_bias) expect(op, "bias", bias, DType::kF32, {E});
  DI_CHECK(k <= 64 && E <= 4096 && M <= INT_MAX, ErrorCode::kUnsupported,
           "route: top-{} of {} experts over {} rows exceeds the supported 64 of 4096", k, E, M);
  if (M == 0 || k == 0) return;
  const int f = func == ScoringFunc::kSoftmax ? 0 : func == ScoringFunc::kSigmoid ? 1 : 2;
  check(launch_route(logits.data_as<float>(), M, E, f, has_bias ? bias.data_as<float>() : nullptr,
                     hash ? tid2eid.data_as<int32_t>() : nullptr, hash ? tid2eid.dim(0) : 0,
                     hash ? ids.data_as<int32_t>() : nullptr, static_cast<int>(k), routed_scale,
                     weights.data_as<float>(), idx.data_as<int32_t>(), ctx_->error_word(),
                     ctx_->stream()),
        op);
}

}  // namespace deepinfer::cuda
