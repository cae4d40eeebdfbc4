// Mixture of experts: route (scoring + selection), swiglu, moe_experts.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"

namespace deepinfer {

namespace {

// silu(min(g, limit)) * clamp(u, -limit, limit); limit <= 0 disables both clamps.
inline float swiglu1(float g, float u, float limit) {
  if (limit > 0.f) {
    g = std::min(g, limit);
    u = std::clamp(u, -limit, limit);
  }
  return g / (1.f + std::exp(-g)) * u;
}

void score_row(const float* x, int64_t E, ScoringFunc func, float* s) {
  switch (func) {
    case ScoringFunc::kSoftmax: {
      const float mx = *std::max_element(x, x + E);
      float sum = 0.f;
      for (int64_t e = 0; e < E; ++e) sum += (s[e] = std::exp(x[e] - mx));
      for (int64_t e = 0; e < E; ++e) s[e] /= sum;
      break;
    }
    case ScoringFunc::kSigmoid:
      for (int64_t e = 0; e < E; ++e) s[e] = 1.f / (1.f + std::exp(-x[e]));
      break;
    case ScoringFunc::kSqrtSoftplus:
      // softplus as torch computes it (threshold 20): never overflows, exact for large x.
      for (int64_t e = 0; e < E; ++e)
        s[e] = std::sqrt(x[e] > 20.f ? x[e] : std::log1p(std::exp(x[e])));
      break;
  }
}

// Rows [r0, r1) of expert e's MXFP4 matrix w [E, rows, cols] (scales s [E, cols / 32, rows],
// backend.h) widened to fp32 into out [r1 - r0, cols]: the values dequantising at load gives.
void widen_mxfp4_rows(const TensorView& w, const TensorView& s, int64_t e, int64_t r0, int64_t r1,
                      std::vector<float>& out) {
  static const std::array<float, 16> kE2m1 = [] {
    std::array<float, 16> t{};
    for (int c = 0; c < 16; ++c) t[c] = e2m1_to_f32(static_cast<uint8_t>(c));
    return t;
  }();
  const int64_t rows = w.dim(1), cols = w.dim(2), groups = cols / 32;
  const uint8_t* pw = w.data_as<uint8_t>() + e * rows * (cols / 2);
  const uint8_t* ps = s.data_as<uint8_t>() + e * groups * rows;
  out.resize(static_cast<size_t>((r1 - r0) * cols));
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = pw + r * (cols / 2);
    float* dst = out.data() + (r - r0) * cols;
    for (int64_t g = 0; g < groups; ++g) {
      const float scale = e8m0_to_f32(ps[g * rows + r]);
      for (int64_t j = 0; j < 16; ++j) {
        const uint8_t b = row[g * 16 + j];
        dst[g * 32 + 2 * j] = kE2m1[b & 15] * scale;
        dst[g * 32 + 2 * j + 1] = kE2m1[b >> 4] * scale;
      }
    }
  }
}

}  // namespace

void CpuBackend::route(const TensorView& logits, ScoringFunc func, const TensorView& bias,
                       const TensorView& tid2eid, const TensorView& ids, float routed_scale,
                       const TensorView& weights, const TensorView& idx) {
  using cpu::kAny;
  const char* op = "route";
  cpu::expect(op, "logits", logits, DType::kF32, {kAny, kAny});
  const int64_t M = logits.dim(0), E = logits.dim(1);
  cpu::expect(op, "weights", weights, DType::kF32, {M, kAny});
  const int64_t k = weights.dim(1);
  cpu::expect(op, "idx", idx, DType::kI32, {M, k});
  const bool hash = cpu::given(tid2eid);
  const int32_t* table = nullptr;
  const int32_t* id = nullptr;
  if (hash) {
    cpu::expect(op, "tid2eid", tid2eid, DType::kI32, {kAny, k});
    cpu::expect(op, "ids", ids, DType::kI32, {M});
    table = tid2eid.data_as<int32_t>();
    id = ids.data_as<int32_t>();
    const int64_t V = tid2eid.dim(0);
    for (int64_t m = 0; m < M; ++m) {
      DI_CHECK(id[m] >= 0 && id[m] < V, ErrorCode::kInvalidArgument,
               "route: ids[{}] = {} is outside tid2eid {}", m, id[m], tid2eid.shape_str());
      for (int64_t j = 0; j < k; ++j) {
        const int32_t e = table[id[m] * k + j];
        DI_CHECK(e >= 0 && e < E, ErrorCode::kInvalidArgument,
                 "route: tid2eid[{}, {}] = {} is not one of the {} experts", id[m], j, e, E);
      }
    }
  } else {
    DI_CHECK(k <= E, ErrorCode::kInvalidArgument, "route: top-{} of {} experts (logits {})", k, E,
             logits.shape_str());
  }
  const bool has_bias = cpu::given(bias);
  if (has_bias) cpu::expect(op, "bias", bias, DType::kF32, {E});
  const float* lp = logits.data_as<float>();
  const float* bp = has_bias ? bias.data_as<float>() : nullptr;
  float* wp = weights.data_as<float>();
  int32_t* ip = idx.data_as<int32_t>();
  cpu::pool().parallel_for(M, std::max<int64_t>(1, 2048 / std::max<int64_t>(E, 1)),
                           [&](int64_t b, int64_t e) {
                             std::vector<float> s(E), biased(E);
                             std::vector<int32_t> scratch;
                             for (int64_t m = b; m < e; ++m) {
                               score_row(lp + m * E, E, func, s.data());
                               int32_t* sel = ip + m * k;
                               if (hash) {
                                 std::copy(table + id[m] * k, table + (id[m] + 1) * k, sel);
                               } else if (bp) {
                                 for (int64_t x = 0; x < E; ++x) biased[x] = s[x] + bp[x];
                                 cpu::topk_row(biased.data(), E, static_cast<int>(k), sel, scratch);
                               } else {
                                 cpu::topk_row(s.data(), E, static_cast<int>(k), sel, scratch);
                               }
                               // Weights come from the unbiased scores.
                               float sum = 0.f;
                               for (int64_t j = 0; j < k; ++j) sum += s[sel[j]];
                               const float mul = routed_scale / (sum + 1e-20f);
                               for (int64_t j = 0; j < k; ++j) wp[m * k + j] = s[sel[j]] * mul;
                             }
                           });
}

void CpuBackend::swiglu(const TensorView& gate, const TensorView& up, float limit,
                        const TensorView& out) {
  using cpu::kAny;
  cpu::expect("swiglu", "gate", gate, DType::kF32, {kAny, kAny});
  cpu::expect_like("swiglu", "up", up, "gate", gate);
  cpu::expect_like("swiglu", "out", out, "gate", gate);
  const float* g = gate.data_as<float>();
  const float* u = up.data_as<float>();
  float* o = out.data_as<float>();
  cpu::pool().parallel_for(gate.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = swiglu1(g[i], u[i], limit);
  });
}

void CpuBackend::moe_experts(const TensorView& x, const TensorView& idx, const TensorView& weights,
                             const ExpertWeights& experts, float limit, const TensorView& plan,
                             const TensorView& out) {
  using cpu::kAny;
  const char* op = "moe_experts";
  DI_CHECK(!cpu::given(plan), ErrorCode::kInvalidArgument,
           "moe_experts: plan {} was not made by this backend (its moe_plan makes none)",
           plan.shape_str());
  cpu::expect(op, "x", x, DType::kF32, {kAny, kAny});
  const int64_t M = x.dim(0), D = x.dim(1);
  cpu::expect(op, "idx", idx, DType::kI32, {M, kAny});
  const int64_t k = idx.dim(1);
  cpu::expect(op, "weights", weights, DType::kF32, {M, k});
  const bool mxfp4 = experts.mxfp4();
  const DType wt = mxfp4 ? DType::kFP4E2M1 : DType::kF32;
  cpu::expect(op, "experts.w1", experts.w1, wt, {kAny, kAny, D});
  const int64_t E = experts.w1.dim(0), I = experts.w1.dim(1);
  cpu::expect(op, "experts.w3", experts.w3, wt, {E, I, D});
  cpu::expect(op, "experts.w2", experts.w2, wt, {E, D, I});
  if (mxfp4) {
    DI_CHECK(takes_mxfp4_experts(E, I, D), ErrorCode::kInvalidArgument,
             "moe_experts: MXFP4 experts need D ({}) and I ({}) multiples of 32", D, I);
    cpu::expect(op, "experts.s1", experts.s1, DType::kE8M0, {E, D / 32, I});
    cpu::expect(op, "experts.s3", experts.s3, DType::kE8M0, {E, D / 32, I});
    cpu::expect(op, "experts.s2", experts.s2, DType::kE8M0, {E, I / 32, D});
  }
  cpu::expect(op, "out", out, DType::kF32, {M, D});
  cpu::expect_no_alias(op, "out", out, "x", x);
  const int32_t* ip = idx.data_as<int32_t>();
  for (int64_t i = 0; i < M * k; ++i)
    DI_CHECK(ip[i] >= 0 && ip[i] < E, ErrorCode::kInvalidArgument,
             "moe_experts: idx[{}, {}] = {} is not one of the {} experts", i / k, i % k, ip[i], E);
  if (M == 0 || k == 0 || D == 0) return;

  const float* xp = x.data_as<float>();
  const float* wp = weights.data_as<float>();
  // fp32 experts are read in place; MXFP4 ones are widened a task's rows at a time (w* null).
  const float* w1 = mxfp4 ? nullptr : experts.w1.data_as<float>();
  const float* w3 = mxfp4 ? nullptr : experts.w3.data_as<float>();
  const float* w2 = mxfp4 ? nullptr : experts.w2.data_as<float>();
  float* op_ = out.data_as<float>();
  const int64_t T = cpu::pool().size();

  // Tokens go in chunks so the per-(token, slot) buffers stay bounded (~128 MiB).
  const int64_t per_token = k * (D + I);
  const int64_t chunk = std::clamp<int64_t>((int64_t{32} << 20) / per_token, 1, M);
  std::vector<float> xy, act;
  std::vector<int64_t> count(E + 1), where;
  std::vector<int32_t> row_token;
  for (int64_t c0 = 0; c0 < M; c0 += chunk) {
    const int64_t mc = std::min(chunk, M - c0), R = mc * k;
    // Counting sort of the (token, slot) pairs by expert, in (token, slot) order per expert;
    // where[m * k + j] is the pair's row in the expert-sorted buffers.
    std::fill(count.begin(), count.end(), 0);
    for (int64_t i = 0; i < R; ++i) ++count[ip[c0 * k + i] + 1];
    for (int64_t e = 0; e < E; ++e) count[e + 1] += count[e];
    std::vector<int64_t> cursor(count.begin(), count.end() - 1);
    where.resize(R);
    row_token.resize(R);
    for (int64_t i = 0; i < R; ++i) {
      const int64_t r = cursor[ip[c0 * k + i]]++;
      where[i] = r;
      row_token[r] = static_cast<int32_t>(c0 + i / k);
    }
    std::vector<int64_t> active;
    for (int64_t e = 0; e < E; ++e)
      if (count[e + 1] > count[e]) active.push_back(e);
    const int64_t na = static_cast<int64_t>(active.size());

    xy.resize(static_cast<size_t>(R * D));
    act.resize(static_cast<size_t>(R * I));
    cpu::pool().parallel_for(R, std::max<int64_t>(1, 16384 / D), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        std::copy(xp + row_token[r] * D, xp + (row_token[r] + 1) * D, xy.data() + r * D);
    });

    // Each active expert's work is split along its output columns so that a few experts
    // (decode) still spread over every thread; blocks are multiples of 16 columns.
    auto blocks_for = [&](int64_t cols) {
      const int64_t want = std::max<int64_t>(1, (2 * T + na - 1) / na);
      return std::clamp<int64_t>(want, 1, std::max<int64_t>(1, cols / 16));
    };
    // Phase 1: act = swiglu(x W1^T, x W3^T) per expert, over (expert, I block).
    const int64_t ib_n = blocks_for(I), ib = (I + ib_n - 1) / ib_n;
    cpu::pool().parallel_for(na * ib_n, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> up, wide1, wide3;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t e = active[t / ib_n], i0 = (t % ib_n) * ib, i1 = std::min(I, i0 + ib);
        if (i0 >= i1) continue;
        const int64_t r0 = count[e], n = count[e + 1] - r0, w = i1 - i0;
        float* a = act.data() + r0 * I + i0;
        up.resize(static_cast<size_t>(n * w));
        const float* g1 = w1 ? w1 + (e * I + i0) * D : nullptr;
        const float* g3 = w3 ? w3 + (e * I + i0) * D : nullptr;
        if (mxfp4) {
          widen_mxfp4_rows(experts.w1, experts.s1, e, i0, i1, wide1);
          widen_mxfp4_rows(experts.w3, experts.s3, e, i0, i1, wide3);
          g1 = wide1.data();
          g3 = wide3.data();
        }
        cpu::sgemm_nt(n, w, D, xy.data() + r0 * D, D, g1, D, a, I, 0.f);
        cpu::sgemm_nt(n, w, D, xy.data() + r0 * D, D, g3, D, up.data(), w, 0.f);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t i = 0; i < w; ++i)
            a[r * I + i] = swiglu1(a[r * I + i], up[r * w + i], limit);
      }
    });
    // Phase 2: y = act W2^T per expert, over (expert, D block), written over the gathered x.
    const int64_t db_n = blocks_for(D), db = (D + db_n - 1) / db_n;
    cpu::pool().parallel_for(na * db_n, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> wide2;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t e = active[t / db_n], d0 = (t % db_n) * db, d1 = std::min(D, d0 + db);
        if (d0 >= d1) continue;
        const int64_t r0 = count[e], n = count[e + 1] - r0;
        const float* g2 = w2 ? w2 + (e * D + d0) * I : nullptr;
        if (mxfp4) {
          widen_mxfp4_rows(experts.w2, experts.s2, e, d0, d1, wide2);
          g2 = wide2.data();
        }
        cpu::sgemm_nt(n, d1 - d0, I, act.data() + r0 * I, I, g2, I, xy.data() + r0 * D + d0, D,
                      0.f);
      }
    });
    // Phase 3: out[m] += sum_j w[m, j] * y[m, j], in slot order: independent of thread timing.
    cpu::pool().parallel_for(mc, std::max<int64_t>(1, 4096 / D), [&](int64_t b, int64_t e) {
      for (int64_t m = b; m < e; ++m) {
        float* o = op_ + (c0 + m) * D;
        for (int64_t j = 0; j < k; ++j) {
          const float wj = wp[(c0 + m) * k + j];
          const float* y = xy.data() + where[m * k + j] * D;
          for (int64_t d = 0; d < D; ++d) o[d] += wj * y[d];
        }
      }
    });
  }
}

}  // namespace deepinfer
