// Attention-side ops: window_pool (compressors), shared-KV attention with sinks, the lightning
// indexer's scores, and top-k.
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/arg_checks.h"
#include "backend/cpu/cpu_backend.h"

namespace deepinfer {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Upper bound on the gathered compressed keys of one chunk of queries (floats; 32 MiB).
constexpr int64_t kGatherFloats = int64_t{8} << 20;
}  // namespace

namespace cpu {

void topk_row(const float* v, int64_t n, int k, int32_t* out, std::vector<int32_t>& scratch) {
  if (k <= 0) return;
  // A strict total order: larger value first, NaN after everything, ties to the lower index.
  auto before = [v](int32_t a, int32_t b) {
    const float va = v[a], vb = v[b];
    const bool na = std::isnan(va), nb = std::isnan(vb);
    if (na || nb) return na == nb ? a < b : nb;
    return va != vb ? va > vb : a < b;
  };
  scratch.resize(static_cast<size_t>(n));
  std::iota(scratch.begin(), scratch.end(), 0);
  if (k < n) std::nth_element(scratch.begin(), scratch.begin() + k, scratch.end(), before);
  std::sort(scratch.begin(), scratch.begin() + k, before);
  std::copy(scratch.begin(), scratch.begin() + k, out);
}

}  // namespace cpu

void CpuBackend::window_pool(const TensorView& kv, const TensorView& gate,
                             const TensorView& slot_bias, const TensorView& out) {
  using cpu::kAny;
  cpu::expect("window_pool", "kv", kv, DType::kF32, {kAny, kAny, kAny});
  const int64_t N = kv.dim(0), S = kv.dim(1), d = kv.dim(2);
  cpu::expect("window_pool", "gate", gate, DType::kF32, {N, S, d});
  if (cpu::given(slot_bias))
    cpu::expect("window_pool", "slot_bias", slot_bias, DType::kF32, {S, d});
  cpu::expect("window_pool", "out", out, DType::kF32, {N, d});
  const float* kp = kv.data_as<float>();
  const float* gp = gate.data_as<float>();
  const float* bp = cpu::given(slot_bias) ? slot_bias.data_as<float>() : nullptr;
  float* op = out.data_as<float>();
  cpu::pool().parallel_for(N, std::max<int64_t>(1, 4096 / std::max<int64_t>(S * d, 1)),
                           [&](int64_t b, int64_t e) {
                             std::vector<float> biased(bp ? S * d : 0), mx(d), den(d);
                             for (int64_t n = b; n < e; ++n) {
                               const float* g = gp + n * S * d;
                               if (bp) {  // the window's gates plus each slot's bias
                                 for (int64_t i = 0; i < S * d; ++i) biased[i] = g[i] + bp[i];
                                 g = biased.data();
                               }
                               const float* x = kp + n * S * d;
                               float* o = op + n * d;
                               std::fill(mx.begin(), mx.end(), kNegInf);
                               for (int64_t s = 0; s < S; ++s)
                                 for (int64_t c = 0; c < d; ++c)
                                   mx[c] = std::max(mx[c], g[s * d + c]);
                               std::fill(den.begin(), den.end(), 0.f);
                               std::fill(o, o + d, 0.f);
                               for (int64_t s = 0; s < S; ++s)
                                 for (int64_t c = 0; c < d; ++c) {
                                   // A channel whose slots are all -inf has no weights: output 0.
                                   if (mx[c] == kNegInf) continue;
                                   const float w = std::exp(g[s * d + c] - mx[c]);
                                   den[c] += w;
                                   o[c] += w * x[s * d + c];
                                 }
                               for (int64_t c = 0; c < d; ++c)
                                 if (mx[c] != kNegInf) o[c] /= den[c];
                             }
                           });
}

void CpuBackend::attention_batch(const TensorView& q, std::span<const AttentionSegment> segments,
                                 int64_t window, const TensorView& sinks, float scale,
                                 const TensorView& out) {
  const char* op = "attention_batch";
  cpu::expect(op, "q", q, DType::kF32, {cpu::kAny, cpu::kAny, cpu::kAny});
  cpu::expect(op, "out", out, DType::kF32, {q.dim(0), q.dim(1), q.dim(2)});
  arg_checks::expect_segments_tile(op, segments, q.dim(0));
  for (const AttentionSegment& seg : segments) {
    if (seg.count == 0) continue;
    const int64_t r1 = seg.row0 + seg.count;
    attention(q.slice_rows(seg.row0, r1), seg.win_kv, window, seg.comp_kv, seg.comp_idx,
              seg.comp_visible, sinks, scale, out.slice_rows(seg.row0, r1));
  }
}

void CpuBackend::attention(const TensorView& q, const TensorView& win_kv, int64_t window,
                           const TensorView& comp_kv, const TensorView& comp_idx,
                           const TensorView& comp_visible, const TensorView& sinks, float scale,
                           const TensorView& out) {
  using cpu::kAny;
  const char* op = "attention";
  cpu::expect(op, "q", q, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = q.dim(0), H = q.dim(1), hd = q.dim(2);
  cpu::expect(op, "win_kv", win_kv, DType::kF32, {kAny, hd});
  DI_CHECK(win_kv.dim(0) >= M, ErrorCode::kInvalidArgument,
           "attention: win_kv {} has fewer rows than the {} queries of q {}", win_kv.shape_str(), M,
           q.shape_str());
  const int64_t P = win_kv.dim(0) - M;
  int64_t E = 0;
  if (cpu::given(comp_kv)) {
    cpu::expect(op, "comp_kv", comp_kv, DType::kF32, {kAny, hd});
    E = comp_kv.dim(0);
  }
  const bool use_idx = cpu::given(comp_idx);
  const bool use_vis = !use_idx && cpu::given(comp_visible);
  int64_t K = 0;
  if (use_idx) {
    cpu::expect(op, "comp_idx", comp_idx, DType::kI32, {M, kAny});
    K = comp_idx.dim(1);
    const int32_t* ci = comp_idx.data_as<int32_t>();
    for (int64_t i = 0; i < M * K; ++i)
      DI_CHECK(ci[i] < E, ErrorCode::kInvalidArgument,
               "attention: comp_idx[{}, {}] = {} is outside comp_kv with {} entries", i / K, i % K,
               ci[i], E);
  } else if (use_vis) {
    cpu::expect(op, "comp_visible", comp_visible, DType::kI32, {M});
    const int32_t* cv = comp_visible.data_as<int32_t>();
    for (int64_t m = 0; m < M; ++m)
      DI_CHECK(cv[m] >= 0 && cv[m] <= E, ErrorCode::kInvalidArgument,
               "attention: comp_visible[{}] = {} is outside [0, {}]", m, cv[m], E);
  }
  cpu::expect(op, "sinks", sinks, DType::kF32, {H});
  cpu::expect(op, "out", out, DType::kF32, {M, H, hd});
  cpu::expect_no_alias(op, "out", out, "q", q);
  cpu::expect_no_alias(op, "out", out, "win_kv", win_kv);
  if (E > 0) cpu::expect_no_alias(op, "out", out, "comp_kv", comp_kv);
  if (M == 0 || H == 0) return;

  const float* qp = q.data_as<float>();
  const float* wkv = win_kv.data_as<float>();
  const float* ckv = E > 0 ? comp_kv.data_as<float>() : nullptr;
  const int32_t* cidx = use_idx ? comp_idx.data_as<int32_t>() : nullptr;
  const int32_t* cvis = use_vis ? comp_visible.data_as<int32_t>() : nullptr;
  const float* sk = sinks.data_as<float>();
  float* outp = out.data_as<float>();

  // Queries go in chunks. For CSA, each query's selected compressed entries are first gathered
  // once (deduplicated: duplicates count once, like the reference's mask) into a contiguous
  // block; then tasks are (query, block of heads): whole queries when there are enough of them,
  // heads split for decode-sized chunks so every thread has work. Keys are shared by all heads.
  const int64_t T = cpu::pool().size();
  const int64_t chunk =
      use_idx ? std::clamp<int64_t>(kGatherFloats / std::max<int64_t>(K * hd, 1), 1, M) : M;
  // Reused across calls (no per-call page faults). Workers must use the caller's buffer through
  // `gbuf`: naming the thread_local inside the lambdas would pick the worker's own instance.
  thread_local std::vector<float> gathered;
  if (use_idx) gathered.resize(static_cast<size_t>(chunk * K * hd));
  float* const gbuf = gathered.data();
  std::vector<int64_t> ncomp(chunk);
  for (int64_t q0 = 0; q0 < M; q0 += chunk) {
    const int64_t nq = std::min(chunk, M - q0);
    if (use_idx) {
      cpu::pool().parallel_for(nq, 1, [&](int64_t b, int64_t e) {
        std::vector<int32_t> rows;
        for (int64_t i = b; i < e; ++i) {
          const int32_t* ci = cidx + (q0 + i) * K;
          rows.clear();
          for (int64_t j = 0; j < K; ++j)
            if (ci[j] >= 0) rows.push_back(ci[j]);
          std::sort(rows.begin(), rows.end());
          rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
          ncomp[i] = static_cast<int64_t>(rows.size());
          float* g = gbuf + i * K * hd;
          for (size_t j = 0; j < rows.size(); ++j)
            std::copy(ckv + rows[j] * hd, ckv + (rows[j] + 1) * hd, g + j * hd);
        }
      });
    }
    const int64_t hsplit = std::clamp<int64_t>((2 * T + nq - 1) / nq, 1, H);
    const int64_t hb = (H + hsplit - 1) / hsplit;
    const int64_t blocks = (H + hb - 1) / hb;
    cpu::pool().parallel_for(nq * blocks, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> scores;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t i = t / blocks, m = q0 + i;
        const int64_t h0 = (t % blocks) * hb, nh = std::min(H, h0 + hb) - h0;
        // Sliding window: rows r with m + P - window < r <= m + P.
        const int64_t hi = m + P + 1, lo = std::clamp<int64_t>(m + P - window + 1, 0, hi);
        const int64_t nw = hi - lo;
        const float* kwin = wkv + lo * hd;
        const float* kcomp = use_idx ? gbuf + i * K * hd : ckv;
        const int64_t nc = use_idx ? ncomp[i] : use_vis ? cvis[m] : 0;
        const int64_t n = nw + nc;
        const float* qm = qp + (m * H + h0) * hd;
        float* om = outp + (m * H + h0) * hd;
        scores.resize(static_cast<size_t>(nh * std::max<int64_t>(n, 1)));
        float* S = scores.data();
        cpu::sgemm_nt(nh, nw, hd, qm, hd, kwin, hd, S, n, 0.f);
        cpu::sgemm_nt(nh, nc, hd, qm, hd, kcomp, hd, S + nw, n, 0.f);
        // Softmax over [scores..., sink]; the sink takes probability mass but has no value.
        for (int64_t h = 0; h < nh; ++h) {
          float* s = S + h * n;
          const float sink = sk[h0 + h];
          float mx = sink;
          for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j] *= scale);
          float den = std::exp(sink - mx);
          for (int64_t j = 0; j < n; ++j) den += (s[j] = std::exp(s[j] - mx));
          const float inv = 1.f / den;
          for (int64_t j = 0; j < n; ++j) s[j] *= inv;
        }
        // V = K: out = P_win @ K_win + P_comp @ K_comp (a zero-width product writes zeros).
        cpu::sgemm_nn(nh, hd, nw, S, n, kwin, hd, om, hd, 0.f);
        if (nc > 0) cpu::sgemm_nn(nh, hd, nc, S + nw, n, kcomp, hd, om, hd, 1.f);
      }
    });
  }
}

void CpuBackend::indexer_scores_batch(const TensorView& q, std::span<const IndexerSegment> segments,
                                      const TensorView& w, float scale, const TensorView& visible,
                                      const TensorView& scores) {
  using cpu::kAny;
  const char* op = "indexer_scores_batch";
  cpu::expect(op, "q", q, DType::kF32, {kAny, kAny, kAny});
  cpu::expect(op, "scores", scores, DType::kF32, {kAny, kAny});
  const int64_t N = scores.dim(1);
  const int64_t R =
      arg_checks::expect_indexer_segments(op, segments, q.dim(0), q.dim(2), N, Device::kCpu);
  cpu::expect(op, "scores", scores, DType::kF32, {R, N});
  int64_t out_row = 0;
  for (const IndexerSegment& seg : segments) {
    const int64_t S = seg.count, E = cpu::given(seg.k) ? seg.k.dim(0) : 0;
    if (S == 0) continue;
    Tensor part = Tensor::empty({S, E});
    indexer_scores(q.slice_rows(seg.row0, seg.row0 + S), seg.k,
                   w.slice_rows(seg.row0, seg.row0 + S), scale,
                   visible.slice_rows(seg.row0, seg.row0 + S), part);
    for (int64_t r = 0; r < S; ++r) {
      float* dst = scores.data_as<float>() + (out_row + r) * N;
      std::copy_n(part.data_as<float>() + r * E, E, dst);
      std::fill(dst + E, dst + N, kNegInf);
    }
    out_row += S;
  }
}

void CpuBackend::indexer_scores(const TensorView& q, const TensorView& k, const TensorView& w,
                                float scale, const TensorView& visible, const TensorView& scores) {
  using cpu::kAny;
  const char* op = "indexer_scores";
  cpu::expect(op, "q", q, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = q.dim(0), nh = q.dim(1), d = q.dim(2);
  int64_t E = 0;
  if (cpu::given(k)) {
    cpu::expect(op, "k", k, DType::kF32, {kAny, d});
    E = k.dim(0);
  }
  cpu::expect(op, "w", w, DType::kF32, {M, nh});
  cpu::expect(op, "visible", visible, DType::kI32, {M});
  cpu::expect(op, "scores", scores, DType::kF32, {M, E});
  const int32_t* vis = visible.data_as<int32_t>();
  for (int64_t m = 0; m < M; ++m)
    DI_CHECK(vis[m] >= 0 && vis[m] <= E, ErrorCode::kInvalidArgument,
             "indexer_scores: visible[{}] = {} is outside [0, {}]", m, vis[m], E);
  if (M == 0 || E == 0) return;
  const float* qp = q.data_as<float>();
  const float* kp = k.data_as<float>();
  const float* wp = w.data_as<float>();
  float* sp = scores.data_as<float>();
  // Tasks are (query, chunk of entries): the per-chunk [nh, chunk] product stays in cache.
  constexpr int64_t kChunk = 256;
  const int64_t chunks = (E + kChunk - 1) / kChunk;
  cpu::pool().parallel_for(M * chunks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> dots(static_cast<size_t>(nh * kChunk));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t m = t / chunks, e0 = (t % chunks) * kChunk, e1 = std::min(E, e0 + kChunk);
      const int64_t ev = std::clamp<int64_t>(vis[m], e0, e1);  // entries [e0, ev) are visible
      float* s = sp + m * E;
      std::fill(s + ev, s + e1, kNegInf);
      const int64_t ne = ev - e0;
      if (ne == 0) continue;
      cpu::sgemm_nt(nh, ne, d, qp + m * nh * d, d, kp + e0 * d, d, dots.data(), ne, 0.f);
      std::fill(s + e0, s + ev, 0.f);
      for (int64_t h = 0; h < nh; ++h) {
        const float wh = wp[m * nh + h];
        const float* dh = dots.data() + h * ne;
        for (int64_t j = 0; j < ne; ++j) s[e0 + j] += wh * std::max(dh[j], 0.f);
      }
      for (int64_t j = e0; j < ev; ++j) s[j] *= scale;
    }
  });
}

void CpuBackend::topk(const TensorView& scores, int k, const TensorView& idx) {
  using cpu::kAny;
  cpu::expect("topk", "scores", scores, DType::kF32, {kAny, kAny});
  const int64_t M = scores.dim(0), N = scores.dim(1);
  DI_CHECK(k >= 0 && k <= N && N <= INT_MAX, ErrorCode::kInvalidArgument,
           "topk: k = {} must be in [0, {}] for scores {}", k, N, scores.shape_str());
  cpu::expect("topk", "idx", idx, DType::kI32, {M, k});
  const float* sp = scores.data_as<float>();
  int32_t* ip = idx.data_as<int32_t>();
  cpu::pool().parallel_for(M, std::max<int64_t>(1, 8192 / std::max<int64_t>(N, 1)),
                           [&](int64_t b, int64_t e) {
                             std::vector<int32_t> scratch;
                             for (int64_t m = b; m < e; ++m) {
                               const float* v = sp + m * N;
                               int32_t* o = ip + m * k;
                               cpu::topk_row(v, N, k, o, scratch);
                               // -inf (and NaN) mark entries that may not be picked.
                               for (int j = 0; j < k; ++j)
                                 if (!(v[o[j]] > kNegInf)) o[j] = -1;
                             }
                           });
}

}  // namespace deepinfer
