// mHC, attention-side ops and the router: argument checks here, the work in the kernels.
#include <algorithm>
#include <climits>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/kernels.h"

namespace deepinfer::cuda {

void CudaBackend::hc_pre(const TensorView& X, const TensorView& fn, const TensorView& base,
                         const TensorView& scale, int sinkhorn_iters, float hc_eps, float norm_eps,
                         const TensorView& collapsed, const TensorView& post,
                         const TensorView& comb) {
  const char* op = "hc_pre";
  OpScope s(*this, op);
  expect(op, "X", X, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = X.dim(0), hc = X.dim(1), D = X.dim(2), nmix = (2 + hc) * hc;
  DI_CHECK(hc >= 1 && D >= 1, ErrorCode::kInvalidArgument, "hc_pre: X {} has no streams",
           X.shape_str());
  DI_CHECK(hc <= kMaxHc, ErrorCode::kUnsupported, "hc_pre: {} streams exceed the supported {}", hc,
           kMaxHc);
  expect(op, "fn", fn, DType::kF32, {nmix, hc * D});
  expect(op, "base", base, DType::kF32, {nmix});
  expect(op, "scale", scale, DType::kF32, {3});
  expect(op, "collapsed", collapsed, DType::kF32, {M, D});
  expect(op, "post", post, DType::kF32, {M, hc});
  expect(op, "comb", comb, DType::kF32, {M, hc, hc});
  expect_no_alias(op, "collapsed", collapsed, "X", X);
  DI_CHECK(M <= INT_MAX, ErrorCode::kUnsupported, "hc_pre: {} rows exceed the grid", M);
  const std::shared_ptr<void> partial = scratch(hc_partial_floats(M, hc, D, nmix) * 4);
  check(launch_hc_pre(X.data_as<float>(), M, hc, D, fn.data_as<float>(), base.data_as<float>(),
                      scale.data_as<float>(), sinkhorn_iters, hc_eps, norm_eps,
                      collapsed.data_as<float>(), post.data_as<float>(), comb.data_as<float>(),
                      static_cast<float*>(partial.get()), ctx_->stream()),
        op);
}

void CudaBackend::hc_post(const TensorView& X, const TensorView& y, const TensorView& post,
                          const TensorView& comb, const TensorView& out) {
  const char* op = "hc_post";
  OpScope s(*this, op);
  expect(op, "X", X, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = X.dim(0), hc = X.dim(1), D = X.dim(2);
  expect(op, "y", y, DType::kF32, {M, D});
  expect(op, "post", post, DType::kF32, {M, hc});
  expect(op, "comb", comb, DType::kF32, {M, hc, hc});
  expect(op, "out", out, DType::kF32, {M, hc, D});
  expect_no_alias(op, "out", out, "X", X);
  expect_no_alias(op, "out", out, "y", y);
  check(launch_hc_post(X.data_as<float>(), y.data_as<float>(), post.data_as<float>(),
                       comb.data_as<float>(), M, hc, D, out.data_as<float>(), ctx_->stream()),
        op);
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
                       static_cast<float*>(partial.get()), ctx_->stream()),
        op);
}

void CudaBackend::window_pool(const TensorView& kv, const TensorView& gate, const TensorView& out) {
  const char* op = "window_pool";
  OpScope s(*this, op);
  expect(op, "kv", kv, DType::kF32, {kAny, kAny, kAny});
  const int64_t N = kv.dim(0), S = kv.dim(1), d = kv.dim(2);
  expect(op, "gate", gate, DType::kF32, {N, S, d});
  expect(op, "out", out, DType::kF32, {N, d});
  check(launch_window_pool(kv.data_as<float>(), gate.data_as<float>(), N, S, d,
                           out.data_as<float>(), ctx_->stream()),
        op);
}

void CudaBackend::attention(const TensorView& q, const TensorView& win_kv, int64_t window,
                            const TensorView& comp_kv, const TensorView& comp_idx,
                            const TensorView& comp_visible, const TensorView& sinks, float scale,
                            const TensorView& out) {
  const char* op = "attention";
  OpScope s(*this, op);
  expect(op, "q", q, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = q.dim(0), H = q.dim(1), hd = q.dim(2);
  DI_CHECK(hd <= kMaxAttnHeadDim, ErrorCode::kUnsupported,
           "attention: head_dim {} exceeds the supported {}", hd, kMaxAttnHeadDim);
  expect(op, "win_kv", win_kv, DType::kF32, {kAny, hd});
  DI_CHECK(win_kv.dim(0) >= M, ErrorCode::kInvalidArgument,
           "attention: win_kv {} has fewer rows than the {} queries of q {}", win_kv.shape_str(), M,
           q.shape_str());
  const int64_t P = win_kv.dim(0) - M;
  int64_t E = 0;
  if (given(comp_kv)) {
    expect(op, "comp_kv", comp_kv, DType::kF32, {kAny, hd});
    E = comp_kv.dim(0);
  }
  const bool use_idx = given(comp_idx);
  const bool use_vis = !use_idx && given(comp_visible);
  int64_t K = 0;
  if (use_idx) {
    expect(op, "comp_idx", comp_idx, DType::kI32, {M, kAny});
    K = comp_idx.dim(1);
  } else if (use_vis) {
    expect(op, "comp_visible", comp_visible, DType::kI32, {M});
  }
  expect(op, "sinks", sinks, DType::kF32, {H});
  expect(op, "out", out, DType::kF32, {M, H, hd});
  expect_no_alias(op, "out", out, "q", q);
  expect_no_alias(op, "out", out, "win_kv", win_kv);
  if (E > 0) expect_no_alias(op, "out", out, "comp_kv", comp_kv);
  if (M == 0 || H == 0) return;
  DI_CHECK(M * H <= INT_MAX, ErrorCode::kUnsupported, "attention: {} x {} blocks exceed the grid",
           M, H);

  // comp_idx rows are first compacted to their distinct valid entries (duplicates count once).
  std::shared_ptr<void> list_buf, count_buf;
  const int32_t* list = nullptr;
  const int32_t* count = nullptr;
  if (use_idx && K > 0) {
    list_buf = scratch(static_cast<size_t>(M * K) * sizeof(int32_t));
    count_buf = scratch(static_cast<size_t>(M) * sizeof(int32_t));
    check(launch_dedup_idx(
              comp_idx.data_as<int32_t>(), M, K, E, static_cast<int32_t*>(list_buf.get()),
              static_cast<int32_t*>(count_buf.get()), ctx_->error_word(), ctx_->stream()),
          op);
    list = static_cast<const int32_t*>(list_buf.get());
    count = static_cast<const int32_t*>(count_buf.get());
  }
  // Key splits from the most keys any query can see (the host does not know the exact counts).
  const int64_t max_keys = std::min<int64_t>(window, P + M) + (use_idx ? K : (use_vis ? E : 0));
  const int splits = attention_splits(M, H, max_keys, ctx_->num_sms());
  std::shared_ptr<void> workspace;
  if (const int64_t floats = attention_workspace_floats(M, H, hd, splits); floats > 0)
    workspace = scratch(static_cast<size_t>(floats) * sizeof(float));
  check(
      launch_attention(q.data_as<float>(), M, H, hd, win_kv.data_as<float>(), P, window,
                       E > 0 ? comp_kv.data_as<float>() : nullptr, E, list, count, K,
                       use_vis ? comp_visible.data_as<int32_t>() : nullptr, sinks.data_as<float>(),
                       scale, splits, static_cast<float*>(workspace.get()), out.data_as<float>(),
                       ctx_->error_word(), ctx_->stream()),
      op);
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
