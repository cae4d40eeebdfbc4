// moe_experts without the host: a one-block counting sort by expert on the device, tensor-core
// grouped GEMMs over 64-row tiles of each expert's rows (gate and up fused with swiglu), and a
// combine per token in slot order. No host sync, so it runs in a sync-free region and can be
// captured in a graph. One kernel for every batch size, and a row's result never depends on the
// other rows of its tile: a token's output is the same at any batch size (batch invariance).
// Shapes the kernels do not take (D or I not a multiple of 8, misaligned rows) fall back to a
// host-side sort and per-expert cuBLAS GEMMs, which synchronises.
#include <algorithm>
#include <climits>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/kernels.h"

namespace deepinfer::cuda {

namespace {

// The device plan of R (token, slot) pairs over E experts, one int32 buffer: offsets [E + 1] |
// num_tiles | row_token [R] | where [R] | tiles [max_tiles][2].
int64_t plan_ints(int64_t R, int64_t E, int64_t max_tiles) {
  return E + 2 + 2 * R + 2 * max_tiles;
}
struct PlanParts {
  int32_t *offsets, *num_tiles, *row_token, *where, *tiles;
};
PlanParts plan_parts(int32_t* plan, int64_t R, int64_t E) {
  PlanParts p{};
  p.offsets = plan;
  p.num_tiles = p.offsets + E + 1;
  p.row_token = p.num_tiles + 1;
  p.where = p.row_token + R;
  p.tiles = p.where + R;
  return p;
}

}  // namespace

bool CudaBackend::takes_mxfp4_experts(int64_t E, int64_t I, int64_t D) const {
  return E > 0 && E <= kMaxPlanExperts && I % 64 == 0 && D % 64 == 0;
}

// The MXFP4 tiles read each thread's weights of a k tile as one 8-byte run (mxfp4.cuh).
void CudaBackend::prepare_mxfp4_experts(const TensorView& data) {
  const char* op = "prepare_mxfp4_experts";
  OpScope s(*this, op);
  expect(op, "data", data, DType::kFP4E2M1, {kAny, kAny, kAny});
  DI_CHECK(data.dim(2) % 64 == 0 && aligned16(data.data()), ErrorCode::kInvalidArgument,
           "{}: rows of {} values: the resident order needs multiples of 64, 16-byte aligned", op,
           data.dim(2));
  check(launch_mxfp4_resident_order(static_cast<uint8_t*>(data.data()), data.numel() / 64,
                                    ctx_->stream()),
        op);
}

Tensor CudaBackend::moe_plan(const TensorView& idx, int64_t num_experts) {
  const char* op = "moe_plan";
  OpScope s(*this, op);
  expect(op, "idx", idx, DType::kI32, {kAny, kAny});
  DI_CHECK(num_experts > 0, ErrorCode::kInvalidArgument, "{}: {} experts", op, num_experts);
  // Past the device sort's experts moe_experts plans on the host.
  if (idx.numel() == 0 || num_experts > kMaxPlanExperts) return Tensor();
  return device_moe_plan(op, idx, num_experts);
}

Tensor CudaBackend::device_moe_plan(const char* op, const TensorView& idx, int64_t E) {
  const int64_t R = idx.numel();
  const int tile_rows = moe_tile_rows(R, E, wgmma_);
  Tensor plan = empty({plan_ints(R, E, moe_max_tiles(R, E, tile_rows))}, DType::kI32);
  const PlanParts p = plan_parts(plan.data_as<int32_t>(), R, E);
  check(launch_moe_plan(idx.data_as<int32_t>(), R, static_cast<int>(idx.dim(1)), E, tile_rows,
                        p.offsets, p.row_token, p.where, p.tiles, p.num_tiles, ctx_->error_word(),
                        ctx_->stream()),
        op);
  return plan;
}

void CudaBackend::moe_experts(const TensorView& x, const TensorView& idx, const TensorView& weights,
                              const ExpertWeights& experts, float limit, const TensorView& plan,
                              const TensorView& out) {
  const char* op = "moe_experts";
  OpScope s(*this, op);
  expect2(op, "x", x, DType::kF32, DType::kBF16, {kAny, kAny});
  const int64_t M = x.dim(0), D = x.dim(1);
  expect(op, "idx", idx, DType::kI32, {M, kAny});
  const int64_t k = idx.dim(1);
  expect(op, "weights", weights, DType::kF32, {M, k});
  const bool mxfp4 = experts.mxfp4();
  const DType wt = mxfp4 ? DType::kFP4E2M1 : DType::kBF16;
  expect(op, "experts.w1", experts.w1, wt, {kAny, kAny, D});
  const int64_t E = experts.w1.dim(0), I = experts.w1.dim(1);
  expect(op, "experts.w3", experts.w3, wt, {E, I, D});
  expect(op, "experts.w2", experts.w2, wt, {E, D, I});
  expect(op, "out", out, DType::kF32, {M, D});
  expect_no_alias(op, "out", out, "x", x);
  if (mxfp4) {
    DI_CHECK(takes_mxfp4_experts(E, I, D), ErrorCode::kInvalidArgument,
             "moe_experts: MXFP4 experts need at most {} experts and D ({}) and I ({}) multiples "
             "of 64; got {} experts",
             kMaxPlanExperts, D, I, E);
    expect(op, "experts.s1", experts.s1, DType::kE8M0, {E, D / 32, I});
    expect(op, "experts.s3", experts.s3, DType::kE8M0, {E, D / 32, I});
    expect(op, "experts.s2", experts.s2, DType::kE8M0, {E, I / 32, D});
    for (const TensorView* t :
         {&experts.w1, &experts.w3, &experts.w2, &experts.s1, &experts.s3, &experts.s2})
      DI_CHECK(aligned16(t->data()), ErrorCode::kInvalidArgument,
               "moe_experts: MXFP4 expert tensors must be 16-byte aligned");
  }

  if (M == 0 || k == 0 || D == 0) return;
  // MXFP4 experts always meet the device kernels' conditions (takes_mxfp4_experts).
  const bool device_path =
      E <= kMaxPlanExperts && D % 8 == 0 && I % 8 == 0 && aligned16(x.data()) &&
      (mxfp4 || (aligned16(experts.w1.data()) && aligned16(experts.w3.data()) &&
                 aligned16(experts.w2.data())));
  DI_CHECK(device_path || !mxfp4, ErrorCode::kInvalidArgument,
           "moe_experts: MXFP4 experts need 16-byte aligned x rows");
  // bf16 x (Backend::product_input_dtype) is what every path rounds x to: the wgmma tiles stage
  // it as it is; the other paths take its exact fp32 values.
  const bool stages_bf16 = device_path && moe_tile_rows(M * k, E, wgmma_) == kMoeWgmmaTileRows;
  Tensor widened;
  TensorView xin = x;
  if (x.dtype() == DType::kBF16 && !stages_bf16) {
    widened = empty({M, D});
    check(launch_bf16_to_f32(static_cast<const uint16_t*>(x.data()), widened.data_as<float>(),
                             M * D, ctx_->stream()),
          op);
    xin = widened.view();
  }
  if (device_path)
    moe_experts_on_device(xin, idx, weights, experts, limit, plan, out);
  else
    moe_experts_host_plan(xin, idx, weights, experts, limit, out);
}

void CudaBackend::moe_experts_on_device(const TensorView& x, const TensorView& idx,
                                        const TensorView& weights, const ExpertWeights& experts,
                                        float limit, const TensorView& plan,
                                        const TensorView& out) {
  const char* op = "moe_experts";
  const int64_t M = x.dim(0), D = x.dim(1), k = idx.dim(1);
  const int64_t E = experts.w1.dim(0), I = experts.w1.dim(1), R = M * k;
  const int tile_rows = moe_tile_rows(R, E, wgmma_);
  const bool wgmma = tile_rows == kMoeWgmmaTileRows;
  const int64_t max_tiles = moe_max_tiles(R, E, tile_rows);
  Tensor own_plan;  // planned here when no plan came with the call
  if (given(plan))
    expect(op, "plan", plan, DType::kI32, {plan_ints(R, E, max_tiles)});
  else
    own_plan = device_moe_plan(op, idx, E);
  const PlanParts p = plan_parts((given(plan) ? plan : own_plan.view()).data_as<int32_t>(), R, E);
  const int32_t *offsets = p.offsets, *num_tiles = p.num_tiles, *row_token = p.row_token,
                *where = p.where, *tiles = p.tiles;
  std::shared_ptr<void> y = scratch(static_cast<size_t>(R * D) * sizeof(float));
  const auto* w1 = static_cast<const uint16_t*>(experts.w1.data());
  const auto* w3 = static_cast<const uint16_t*>(experts.w3.data());
  const auto* w2 = static_cast<const uint16_t*>(experts.w2.data());
  const bool mxfp4 = experts.mxfp4();
  auto packed = [](const TensorView& w, const TensorView& s) {
    return Mxfp4Matrix{static_cast<const uint8_t*>(w.data()),
                       static_cast<const uint8_t*>(s.data())};
  };
  const Mxfp4Matrix q1 = packed(experts.w1, experts.s1), q3 = packed(experts.w3, experts.s3),
                    q2 = packed(experts.w2, experts.s2);
  std::shared_ptr<void> act = scratch(static_cast<size_t>(R * I) * sizeof(uint16_t));
  auto* actp = static_cast<uint16_t*>(act.get());
  auto* yp = static_cast<float*>(y.get());
  if (wgmma) {
    // The wgmma tiles stage bf16 rows by cp.async: fp32 x is cast once (M rows, not R).
    std::shared_ptr<void> xb;
    const void* xbf = x.data();
    if (x.dtype() == DType::kF32) {
      xb = to_bf16(op, x.data_as<float>(), M * D);
      xbf = xb.get();
    }
    // Up's blocks share weight tiles in clusters where experts average kClusterMinTiles tiles
    // or more (fewer: clusters rarely hold one expert's tiles, and the cluster launch costs);
    // down's shorter k loops measured slower in clusters (docs/perf.md).
    constexpr int64_t kClusterMinTiles = 4;
    const int cluster = R >= kClusterMinTiles * kMoeWgmmaTileRows * E ? expert_cluster_ : 1;
    const auto* xb16 = static_cast<const uint16_t*>(xbf);
    if (mxfp4) {
      // Blocks of two tiles where experts average two tiles or more (fewer: most would hold one
      // tile, the other half of their MMAs empty).
      const bool pairs = R >= 2 * kMoeWgmmaTileRows * E;
      check(launch_moe_up_mxfp4_wgmma(xb16, row_token, offsets, tiles, num_tiles, max_tiles, q1, q3,
                                      I, D, limit, pairs, actp, ctx_->stream()),
            op);
      check(launch_moe_down_mxfp4_wgmma(actp, offsets, tiles, num_tiles, max_tiles, q2, D, I, pairs,
                                        yp, ctx_->stream()),
            op);
    } else {
      check(launch_moe_up_wgmma(xb16, row_token, offsets, tiles, num_tiles, max_tiles, w1, w3, E, I,
                                D, limit, actp, cluster, ctx_->stream()),
            op);
      check(launch_moe_down_wgmma(actp, R, offsets, tiles, num_tiles, max_tiles, w2, E, D, I, yp,
                                  ctx_->stream()),
            op);
    }
  } else {
    check(mxfp4
              ? launch_moe_up_gemm_mxfp4(x.data_as<float>(), row_token, offsets, tiles, num_tiles,
                                         max_tiles, tile_rows, q1, q3, I, D, limit, actp,
                                         ctx_->stream())
              : launch_moe_up_gemm(x.data_as<float>(), row_token, offsets, tiles, num_tiles,
                                   max_tiles, tile_rows, w1, w3, I, D, limit, actp, ctx_->stream()),
          op);
    // Batch-1 decode: the down GEMM's last blocks combine (no kernel after it).
    const MoeDownCombine combine{where, weights.data_as<float>(), M,
                                 k,     out.data_as<float>(),     ctx_->split_counters()};
    const bool combines = down_combine_ && moe_down_combines(M, D, tile_rows, yp, combine.out);
    check(mxfp4 ? launch_moe_down_gemm_mxfp4(actp, offsets, tiles, num_tiles, max_tiles, tile_rows,
                                             q2, D, I, yp, combines ? &combine : nullptr,
                                             ctx_->stream())
                : launch_moe_down_gemm(actp, offsets, tiles, num_tiles, max_tiles, tile_rows, w2, D,
                                       I, yp, combines ? &combine : nullptr, ctx_->stream()),
          op);
    if (combines) {
      ++down_combines_;
      return;
    }
  }
  check(launch_moe_combine(yp, where, weights.data_as<float>(), M, k, D, out.data_as<float>(),
                           ctx_->stream()),
        op);
}

void CudaBackend::moe_experts_host_plan(const TensorView& x, const TensorView& idx,
                                        const TensorView& weights, const ExpertWeights& experts,
                                        float limit, const TensorView& out) {
  const char* op = "moe_experts";
  host_sync_point("moe_experts on a shape the device kernels refuse (host-planned GEMMs)");
  const int64_t M = x.dim(0), D = x.dim(1), k = idx.dim(1);
  const int64_t E = experts.w1.dim(0), I = experts.w1.dim(1);
  std::vector<int32_t> ip(static_cast<size_t>(M * k));
  if (!ip.empty()) {
    check(cudaMemcpyAsync(ip.data(), idx.data(), ip.size() * sizeof(int32_t),
                          cudaMemcpyDeviceToHost, ctx_->stream()),
          op);
    check(cudaStreamSynchronize(ctx_->stream()), op);
  }
  for (int64_t i = 0; i < M * k; ++i)
    DI_CHECK(ip[i] >= 0 && ip[i] < E, ErrorCode::kInvalidArgument,
             "moe_experts: idx[{}, {}] = {} is not one of the {} experts", i / k, i % k, ip[i], E);

  const auto* w1 = static_cast<const uint16_t*>(experts.w1.data());
  const auto* w3 = static_cast<const uint16_t*>(experts.w3.data());
  const auto* w2 = static_cast<const uint16_t*>(experts.w2.data());
  // Tokens go in chunks so that the per-pair buffers stay near 512 MiB.
  const int64_t per_pair = D * 2 + 2 * I * 4 + I * 2 + D * 4;
  const int64_t chunk = std::clamp<int64_t>((int64_t{512} << 20) / (k * per_pair), 1, M);
  std::vector<int64_t> count(E + 1);
  std::vector<int32_t> plan;  // [row_token (R) | where (R)]
  for (int64_t c0 = 0; c0 < M; c0 += chunk) {
    const int64_t mc = std::min(chunk, M - c0), R = mc * k;
    DI_CHECK(R <= INT_MAX, ErrorCode::kUnsupported, "moe_experts: {} pairs exceed the grid", R);
    // Counting sort of the (token, slot) pairs by expert, (token, slot) order within an expert.
    std::fill(count.begin(), count.end(), 0);
    for (int64_t i = 0; i < R; ++i) ++count[ip[c0 * k + i] + 1];
    for (int64_t e = 0; e < E; ++e) count[e + 1] += count[e];
    std::vector<int64_t> cursor(count.begin(), count.end() - 1);
    plan.assign(static_cast<size_t>(2 * R), 0);
    for (int64_t i = 0; i < R; ++i) {
      const int64_t r = cursor[ip[c0 * k + i]]++;
      plan[R + i] = static_cast<int32_t>(r);       // where
      plan[r] = static_cast<int32_t>(c0 + i / k);  // row_token
    }
    std::shared_ptr<void> plan_dev = scratch(plan.size() * sizeof(int32_t));
    check(cudaMemcpyAsync(plan_dev.get(), plan.data(), plan.size() * sizeof(int32_t),
                          cudaMemcpyHostToDevice, ctx_->stream()),
          op);
    check(cudaStreamSynchronize(ctx_->stream()), op);  // `plan` is reused by the next chunk
    const auto* row_token = static_cast<const int32_t*>(plan_dev.get());
    const int32_t* where = row_token + R;

    std::shared_ptr<void> xg = scratch(static_cast<size_t>(R * D) * 2);
    std::shared_ptr<void> h = scratch(static_cast<size_t>(R * 2 * I) * 4);
    std::shared_ptr<void> act = scratch(static_cast<size_t>(R * I) * 2);
    std::shared_ptr<void> y = scratch(static_cast<size_t>(R * D) * 4);
    auto* xgp = static_cast<uint16_t*>(xg.get());
    auto* hp = static_cast<float*>(h.get());
    auto* actp = static_cast<uint16_t*>(act.get());
    auto* yp = static_cast<float*>(y.get());
    check(launch_gather_rows_bf16(x.data_as<float>(), row_token, R, D, xgp, ctx_->stream()), op);
    // Gate and up land side by side in h [R, 2I]; swiglu then writes bf16 activations.
    for (int64_t e = 0; e < E; ++e) {
      const int64_t r0 = count[e], n = count[e + 1] - r0;
      if (n == 0) continue;
      gemm(op, DType::kBF16, xgp + r0 * D, D, 0, w1 + e * I * D, D, 0, hp + r0 * 2 * I, 2 * I, 0, n,
           I, D, 1, 0.f);
      gemm(op, DType::kBF16, xgp + r0 * D, D, 0, w3 + e * I * D, D, 0, hp + r0 * 2 * I + I, 2 * I,
           0, n, I, D, 1, 0.f);
    }
    check(launch_swiglu_pairs(hp, R, I, limit, actp, ctx_->stream()), op);
    for (int64_t e = 0; e < E; ++e) {
      const int64_t r0 = count[e], n = count[e + 1] - r0;
      if (n == 0) continue;
      gemm(op, DType::kBF16, actp + r0 * I, I, 0, w2 + e * D * I, I, 0, yp + r0 * D, D, 0, n, D, I,
           1, 0.f);
    }
    check(launch_moe_combine(yp, where, weights.data_as<float>() + c0 * k, mc, k, D,
                             out.data_as<float>() + c0 * D, ctx_->stream()),
          op);
  }
}

}  // namespace deepinfer::cuda
