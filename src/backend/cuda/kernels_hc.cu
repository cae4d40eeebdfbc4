// Manifold-constrained hyper-connections: hc_pre (the mixing GEMV's partials, kernels_hc_mix.cu,
// then RMS scale, sigmoids, Sinkhorn and the collapse over (row, column part) blocks),
// hc_pre_norm (the same with the collapsed rows' rms_norm, a row's parts one cluster), hc_post
// (alone, or forming the next site's mixing partials itself), hc_head.
#include <algorithm>
#include <climits>

#include "backend/cuda/hc_rows.cuh"
#include "backend/cuda/launch.cuh"

namespace deepinfer::cuda {

namespace {

using namespace hc_rows;

// out[d - d0] = sum_h pre[h] x[h, d] for d in [d0, d1), accumulated in stream order like the CPU
// backend (pre[0] x[0, d], then one FMA per stream), by the block's threads from `first` on:
// 4 columns per step by float4 where the rows allow (a prefill row's 64 KB one by one: hc_pre
// 189 -> 101 us per 4096 rows), the rest one by one, the same arithmetic either way.
__device__ void collapse(const float* x, const float* pre, int hc, int64_t D, int64_t d0,
                         int64_t d1, float* out, int first = 0) {
  if (static_cast<int>(threadIdx.x) < first) return;
  const int64_t tid = threadIdx.x - first, nt = blockDim.x - first;
  int64_t dv = d0;  // columns from here on go one by one
  // By float4 where every thread gets one at least (a decode row's 512-column parts ran faster
  // one by one: 6.3 against 7.7 us per hc_pre).
  if (D % 4 == 0 && d0 % 4 == 0 && (d1 - d0) / 4 >= nt &&
      (reinterpret_cast<uintptr_t>(x) & 15) == 0 && (reinterpret_cast<uintptr_t>(out) & 15) == 0) {
    const int64_t n4 = (d1 - d0) / 4;
    for (int64_t i = tid; i < n4; i += nt) {
      const int64_t d = d0 + 4 * i;
      float4 o;
      for (int h0 = 0; h0 < hc; h0 += 4) {  // 4 streams' loads in flight at once
        float4 w[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
          if (h0 + u < hc) w[u] = __ldg(reinterpret_cast<const float4*>(x + (h0 + u) * D + d));
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int h = h0 + u;
          if (h == 0)
            o = make_float4(pre[0] * w[0].x, pre[0] * w[0].y, pre[0] * w[0].z, pre[0] * w[0].w);
          else if (h < hc)
            o = make_float4(fmaf(pre[h], w[u].x, o.x), fmaf(pre[h], w[u].y, o.y),
                            fmaf(pre[h], w[u].z, o.z), fmaf(pre[h], w[u].w, o.w));
        }
      }
      *reinterpret_cast<float4*>(out + (d - d0)) = o;
    }
    dv = d0 + 4 * n4;
  }
  for (int64_t d = dv + tid; d < d1; d += nt) {
    float o = pre[0] * x[d];
    for (int h = 1; h < hc; ++h) o = fmaf(pre[h], x[h * D + d], o);
    out[d - d0] = o;
  }
}

// The reference's Sinkhorn sequence on one [hc, hc] matrix (single thread; hc is small): row
// softmax + eps, column normalise, then (iters - 1) rounds of row and column normalisation.
__device__ void sinkhorn(float* c, int hc, int iters, float eps) {
  for (int i = 0; i < hc; ++i) {
    float* r = c + i * hc;
    float mx = r[0];
    for (int j = 1; j < hc; ++j) mx = fmaxf(mx, r[j]);
    float s = 0.f;
    for (int j = 0; j < hc; ++j) s += (r[j] = expf(r[j] - mx));
    for (int j = 0; j < hc; ++j) r[j] = r[j] / s + eps;
  }
  auto norm_cols = [&] {
    for (int j = 0; j < hc; ++j) {
      float s = 0.f;
      for (int i = 0; i < hc; ++i) s += c[i * hc + j];
      for (int i = 0; i < hc; ++i) c[i * hc + j] /= s + eps;
    }
  };
  norm_cols();
  for (int it = 1; it < iters; ++it) {
    for (int i = 0; i < hc; ++i) {
      float s = 0.f;
      for (int j = 0; j < hc; ++j) s += c[i * hc + j];
      for (int j = 0; j < hc; ++j) c[i * hc + j] /= s + eps;
    }
    norm_cols();
  }
}

// Grid (row, part): every part derives the row's pre weights from the partials (cheap) and
// collapses its slice of the columns; part 0 also writes post and the Sinkhorn comb. Splitting
// the columns keeps a decode step's few rows from running on one SM each; a value's arithmetic
// does not depend on the split.
__global__ void hc_pre_kernel(const float* X, int hc, int64_t D, const float* partial, int nchunks,
                              const float* base, const float* scale, int iters, float hc_eps,
                              float norm_eps, float* collapsed, float* post, float* comb) {
  wait_for_prior_grid();
  __shared__ float mix[kMaxMix + 1];
  __shared__ float pre[kMaxHc];
  const int64_t m = blockIdx.x, W = hc * D;
  const float* x = X + m * W;
  int64_t d0 = 0, d1 = 0;
  part_columns(D, blockIdx.y, gridDim.y, &d0, &d1);
  const bool part0 = blockIdx.y == 0;
  row_weights(partial, m, nchunks, hc, W, base, scale, hc_eps, norm_eps, part0, mix, pre, post);
  if (!part0) {
    collapse(x, pre, hc, D, d0, d1, collapsed + m * D + d0);
    return;
  }
  // Warp 0 runs the Sinkhorn rounds for comb while the other warps collapse (the kernel's
  // longest path was the two one after the other).
  const bool warp_sinkhorn = hc * hc <= 32;
  collapse(x, pre, hc, D, d0, d1, collapsed + m * D + d0, warp_sinkhorn ? 32 : 0);
  if (warp_sinkhorn) {
    if (threadIdx.x < 32) comb_by_warp(mix, base, scale, hc, iters, hc_eps, comb + m * hc * hc);
  } else if (threadIdx.x == 0) {
    float* c = mix + 2 * hc;  // reuse the mix slots of comb in place
    for (int i = 0; i < hc * hc; ++i) c[i] = c[i] * scale[2] + base[2 * hc + i];
    sinkhorn(c, hc, iters, hc_eps);
    for (int i = 0; i < hc * hc; ++i) comb[m * hc * hc + i] = c[i];
  }
}

// hc_pre, then rms_norm of the collapsed row (norm_w [D] or null) into normed, in one launch.
// Grid (row, part) as hc_pre_kernel, the parts of a row one cluster: each collapses its slice
// into shared memory and norms it with the row's sum of squares from the cluster
// (norm_collapsed_slice: the collapsed row never goes through global memory). Needs hc * hc <=
// 32, D % 4 == 0, D <= kNormMaxCols and slices of whole 128-column warps.
__global__ void __launch_bounds__(kThreads)
    hc_pre_norm_kernel(const float* X, int hc, int64_t D, const float* partial, int nchunks,
                       const float* base, const float* scale, int iters, float hc_eps,
                       float norm_eps, const float* norm_w, NormedOut normed, float* post,
                       float* comb) {
  wait_for_prior_grid();
  __shared__ float mix[kMaxMix + 1];
  __shared__ float pre[kMaxHc];
  __shared__ __align__(16) float slice[kNormMaxCols];
  __shared__ float warp_ss[kNormMaxCols / kNormWarpCols];
  const int64_t m = blockIdx.x, W = hc * D;
  const int parts = gridDim.y;
  int64_t d0 = 0, d1 = 0;
  part_columns(D, blockIdx.y, parts, &d0, &d1);
  const bool part0 = blockIdx.y == 0;
  row_weights(partial, m, nchunks, hc, W, base, scale, hc_eps, norm_eps, part0, mix, pre, post);
  if (part0 && threadIdx.x < 32) {
    comb_beside_norm(mix, base, scale, hc, iters, hc_eps, parts, comb + m * hc * hc);
    return;
  }
  const int first = part0 ? 32 : 0;
  collapse(X + m * W, pre, hc, D, d0, d1, slice, first);
  norm_collapsed_slice(slice, m, D, d0, d1, parts, first, norm_eps, norm_w, normed, warp_ss);
}

__global__ void hc_head_kernel(const float* X, int hc, int64_t D, const float* partial, int nchunks,
                               const float* base, const float* scale, float hc_eps, float norm_eps,
                               float* out) {
  wait_for_prior_grid();
  __shared__ float mix[kMaxHc + 1];
  __shared__ float pre[kMaxHc];
  const int64_t m = blockIdx.x, W = hc * D;
  const float* x = X + m * W;
  head_weights(partial, m, nchunks, hc, W, base, scale, hc_eps, norm_eps, mix, pre);
  int64_t d0 = 0, d1 = 0;
  part_columns(D, blockIdx.y, gridDim.y, &d0, &d1);
  collapse(x, pre, hc, D, d0, d1, out + m * D + d0);
}

// One thread per (m, d) writing all hc streams.
template <int kHcMax>
__global__ void hc_post_kernel(const float* X, const float* y, const float* post, const float* comb,
                               int64_t M, int hc, int64_t D, float* out) {
  wait_for_prior_grid();
  const int64_t total = M * D;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = t % D, m = t / D;
    hc_post_column<kHcMax>(X, y, post, comb, m, hc, D, d,
                           [&](int h, float o) { out[(m * hc + h) * D + d] = o; });
  }
}

// Rows past a decode batch's take hc_post_rows4_kernel (a block per row would leave a decode
// step's few rows on a few SMs).
constexpr int64_t kPostRowsMinRows = 256;

// Prefill rows: a block per row, four columns per thread by float4 (X's four streams, y, out),
// the row's post and comb read once per thread; each column's value is hc_post_column's
// expression, so the same bits. The one-column kernel spent its time on a 64-bit division per
// column and 20 cached loads of post and comb per column.
template <int kHcMax>
__global__ void hc_post_rows4_kernel(const float* X, const float* y, const float* post,
                                     const float* comb, int hc, int64_t D, float* out) {
  wait_for_prior_grid();
  const int64_t m = blockIdx.x;
  float p[kHcMax], c[kHcMax][kHcMax];
#pragma unroll
  for (int h = 0; h < kHcMax; ++h) {
    p[h] = h < hc ? post[m * hc + h] : 0.f;
#pragma unroll
    for (int j = 0; j < kHcMax; ++j) c[j][h] = h < hc && j < hc ? comb[(m * hc + j) * hc + h] : 0.f;
  }
  const float4* x4 = reinterpret_cast<const float4*>(X + m * hc * D);
  const float4* y4 = reinterpret_cast<const float4*>(y + m * D);
  float4* o4 = reinterpret_cast<float4*>(out + m * hc * D);
  const int64_t D4 = D / 4;
  for (int64_t q = threadIdx.x; q < D4; q += blockDim.x) {
    float4 x[kHcMax];
#pragma unroll
    for (int j = 0; j < kHcMax; ++j) x[j] = j < hc ? __ldg(x4 + j * D4 + q) : float4{};
    const float4 yv = __ldg(y4 + q);
#pragma unroll
    for (int h = 0; h < kHcMax; ++h) {
      if (h >= hc) break;
      float4 o{p[h] * yv.x, p[h] * yv.y, p[h] * yv.z, p[h] * yv.w};
#pragma unroll
      for (int j = 0; j < kHcMax; ++j)
        if (j < hc) {
          o.x += c[j][h] * x[j].x;
          o.y += c[j][h] * x[j].y;
          o.z += c[j][h] * x[j].z;
          o.w += c[j][h] * x[j].w;
        }
      o4[h * D4 + q] = o;
    }
  }
}

// hc_post_kernel for one row m and one 128-column chunk of its flattened streams (blockIdx.y =
// c: stream h = c / (D / 128), columns [d0, d0 + 128)), one thread per column; then that chunk's
// mixing partials for the next site: hc_mix_partial_kernel's chains over the same values in the
// same order (k from zero, fmaf(x, f, acc); the last slot the sum of squares), from the stream
// kept in shared memory and fn's rows staged there before the wait (weights). As many blocks as
// the mixing kernel has chunks, so the GEMV is spread as widely as there.
template <int kHcMax>
__global__ void __launch_bounds__(kMixChunk)
    hc_post_mix_kernel(const float* X, const float* y, const float* post, const float* comb, int hc,
                       int64_t D, const float* fn, int nmix, float* out, float* partial) {
  extern __shared__ float sm[];
  constexpr int ld = kMixChunk + 1, kChunk4 = kMixChunk / 4;
  float* xs = sm;       // [ld]: the block's columns of its stream
  float* fs = sm + ld;  // [nmix][ld]: fn's rows over the block's chunk
  const int64_t m = blockIdx.x, W = hc * D, per_stream = D / kMixChunk;
  const int64_t c = blockIdx.y, mine = c / per_stream, d0 = (c % per_stream) * kMixChunk;
  const int t = threadIdx.x;
  // fn staged in batches whose loads all issue before the batch's stores.
  constexpr int kBatch = 4;
  const int total = nmix * kChunk4;
  for (int i0 = 0; i0 < total; i0 += kBatch * kMixChunk) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + u * kMixChunk + t, j = i / kChunk4, k = (i % kChunk4) * 4;
      v[u] = i < total ? __ldg(reinterpret_cast<const float4*>(fn + j * W + c * kMixChunk + k))
                       : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + u * kMixChunk + t, j = i / kChunk4, k = (i % kChunk4) * 4;
      if (i >= total) continue;
      float* dst = fs + j * ld + k;
      dst[0] = v[u].x;
      dst[1] = v[u].y;
      dst[2] = v[u].z;
      dst[3] = v[u].w;
    }
  }
  wait_for_prior_grid();
  const int64_t d = d0 + t;
  hc_post_column<kHcMax>(X, y, post, comb, m, hc, D, d, [&](int h, float o) {
    if (h != mine) return;
    out[(m * hc + h) * D + d] = o;
    xs[t] = o;
  });
  __syncthreads();
  const int64_t nchunks = hc * per_stream;
  if (t <= nmix) {
    float acc = 0.f;
    if (t < nmix) {
      const float* f = fs + t * ld;
      for (int k = 0; k < kMixChunk; ++k) acc = fmaf(xs[k], f[k], acc);
    } else {
      for (int k = 0; k < kMixChunk; ++k) acc = fmaf(xs[k], xs[k], acc);
    }
    partial[(m * nchunks + c) * (nmix + 1) + t] = acc;
  }
}

}  // namespace

int64_t hc_partial_floats(int64_t M, int64_t hc, int64_t D, int64_t nmix) {
  return M * ((hc * D + kMixChunk - 1) / kMixChunk) * (nmix + 1);
}

namespace {

// Column parts per row of the collapse: enough blocks for the device at a few rows, at most
// one per 512 columns.
unsigned collapse_parts(int64_t M, int64_t D) {
  const int64_t by_rows = (256 + M - 1) / M, by_cols = (D + 511) / 512;
  const int64_t parts = by_rows < by_cols ? by_rows : by_cols;
  return static_cast<unsigned>(parts < 1 ? 1 : (parts > 64 ? 64 : parts));
}

}  // namespace

cudaError_t launch_hc_pre(const float* X, int64_t M, int64_t hc, int64_t D, const float* fn,
                          const float* base, const float* scale, int iters, float hc_eps,
                          float norm_eps, float* collapsed, float* post, float* comb,
                          float* partial, int sms, cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if (hc < 1 || hc > kMaxHc || M > INT_MAX) return cudaErrorInvalidValue;
  const int nmix = static_cast<int>((2 + hc) * hc);
  int nchunks = 0;
  cudaError_t e = launch_mix_partial(X, M, hc * D, fn, nmix, partial, &nchunks, sms, stream);
  if (e != cudaSuccess) return e;
  return launch_kernel(hc_pre_kernel, dim3(static_cast<unsigned>(M), collapse_parts(M, D)),
                       kThreads, 0, stream, X, static_cast<int>(hc), D, partial, nchunks, base,
                       scale, iters, hc_eps, norm_eps, collapsed, post, comb);
}

namespace {

// hc_pre_norm_kernel's parts for M rows of D columns: collapse_parts' count, down to a power of
// two of at most a portable cluster whose slices are whole 128-column warps (0: it cannot run).
unsigned norm_parts(int64_t M, int64_t D) {
  unsigned parts = std::min<unsigned>(collapse_parts(M, D), kNormMaxParts);
  while (parts & (parts - 1)) parts &= parts - 1;
  while (parts > 1 && ((D + parts - 1) / parts) % kNormWarpCols != 0) parts /= 2;
  return parts;
}

// hc_pre_norm_kernel over the mixing partials (chunk sums) of X.
cudaError_t launch_pre_norm(const float* X, int64_t M, int64_t hc, int64_t D, const float* partial,
                            int nchunks, const float* base, const float* scale, int iters,
                            float hc_eps, float norm_eps, const float* norm_w, NormedOut normed,
                            float* post, float* comb, cudaStream_t stream) {
  const unsigned parts = norm_parts(M, D);
  return launch_kernel_clustered(hc_pre_norm_kernel, dim3(static_cast<unsigned>(M), parts),
                                 kThreads, 0, stream, dim3(1, parts, 1), X, static_cast<int>(hc), D,
                                 partial, nchunks, base, scale, iters, hc_eps, norm_eps, norm_w,
                                 normed, post, comb);
}

// The most rows whose expansion forms the next site's mixing sums itself: each row's blocks
// stage fn's 1.5 MB (V4) again, which the mixing kernel's 16-row tiles share.
constexpr int64_t kPostMixMaxRows = 8;

}  // namespace

bool hc_pre_norm_fused(int64_t hc, int64_t D, const float* norm_w, const void* normed) {
  return hc >= 1 && hc * hc <= 32 && D % 4 == 0 && D <= kNormMaxCols && aligned16(normed) &&
         (!norm_w || aligned16(norm_w));
}

cudaError_t launch_hc_pre_norm(const float* X, int64_t M, int64_t hc, int64_t D, const float* fn,
                               const float* base, const float* scale, int iters, float hc_eps,
                               float norm_eps, const float* norm_w, NormedOut normed, float* post,
                               float* comb, float* partial, int sms, cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if ((normed.f32 == nullptr) == (normed.bf16 == nullptr) ||
      !hc_pre_norm_fused(hc, D, norm_w, normed.ptr()) || M > INT_MAX)
    return cudaErrorInvalidValue;
  const int nmix = static_cast<int>((2 + hc) * hc);
  int nchunks = 0;
  cudaError_t e = launch_mix_partial(X, M, hc * D, fn, nmix, partial, &nchunks, sms, stream);
  if (e != cudaSuccess) return e;
  return launch_pre_norm(X, M, hc, D, partial, nchunks, base, scale, iters, hc_eps, norm_eps,
                         norm_w, normed, post, comb, stream);
}

bool hc_post_mix_fused(int64_t M, int64_t hc, int64_t D, const float* norm_w, const void* normed) {
  return M >= 1 && M <= kPostMixMaxRows && hc <= 4 && D % kMixChunk == 0 &&
         hc * D / kMixChunk <= 65535 && hc_pre_norm_fused(hc, D, norm_w, normed);
}

cudaError_t launch_hc_post_pre_norm(const float* X, const float* y, const float* post,
                                    const float* comb, int64_t M, int64_t hc, int64_t D, float* out,
                                    const float* fn, const float* base, const float* scale,
                                    int iters, float hc_eps, float norm_eps, const float* norm_w,
                                    NormedOut normed, float* next_post, float* next_comb,
                                    float* partial, bool one_launch, bool* ran_one_launch,
                                    cudaStream_t stream) {
  *ran_one_launch = false;
  if (M <= 0) return cudaSuccess;
  if ((normed.f32 == nullptr) == (normed.bf16 == nullptr) ||
      !hc_post_mix_fused(M, hc, D, norm_w, normed.ptr()) ||
      (reinterpret_cast<uintptr_t>(fn) & 15) != 0)
    return cudaErrorInvalidValue;
  const int nmix = static_cast<int>((2 + hc) * hc);
  if (nmix + 1 > kMixChunk) return cudaErrorInvalidValue;
  if (one_launch) {
    const cudaError_t e = launch_hc_post_norm_one_launch(
        X, y, post, comb, M, hc, D, out, fn, base, scale, iters, hc_eps, norm_eps, norm_w, normed,
        next_post, next_comb, partial, stream);
    if (e != cudaErrorNotSupported) {
      *ran_one_launch = e == cudaSuccess;
      return e;
    }
  }
  const size_t smem = static_cast<size_t>(1 + nmix) * (kMixChunk + 1) * sizeof(float);
  const unsigned chunks = static_cast<unsigned>(hc * D / kMixChunk);
  cudaError_t e =
      launch_kernel(hc_post_mix_kernel<4>, dim3(static_cast<unsigned>(M), chunks), kMixChunk, smem,
                    stream, X, y, post, comb, static_cast<int>(hc), D, fn, nmix, out, partial);
  if (e != cudaSuccess) return e;
  return launch_pre_norm(out, M, hc, D, partial, static_cast<int>(hc * D / kMixChunk), base, scale,
                         iters, hc_eps, norm_eps, norm_w, normed, next_post, next_comb, stream);
}

cudaError_t launch_hc_post(const float* X, const float* y, const float* post, const float* comb,
                           int64_t M, int64_t hc, int64_t D, float* out, cudaStream_t stream) {
  const int64_t total = M * D;
  if (total <= 0) return cudaSuccess;
  if (hc < 1 || hc > kMaxHc) return cudaErrorInvalidValue;
  if (hc <= 4 && M > kPostRowsMinRows && M <= INT_MAX && D % 4 == 0 && aligned16(X) &&
      aligned16(y) && aligned16(out))
    return launch_kernel(hc_post_rows4_kernel<4>, static_cast<unsigned>(M), kThreads, 0, stream, X,
                         y, post, comb, static_cast<int>(hc), D, out);
  const unsigned blocks =
      blocks_for(total < (int64_t{1} << 24) ? total : (int64_t{1} << 24), kThreads);
  if (hc <= 4)
    return launch_kernel(hc_post_kernel<4>, blocks, kThreads, 0, stream, X, y, post, comb, M,
                         static_cast<int>(hc), D, out);
  else
    return launch_kernel(hc_post_kernel<kMaxHc>, blocks, kThreads, 0, stream, X, y, post, comb, M,
                         static_cast<int>(hc), D, out);
}

cudaError_t launch_hc_head(const float* X, int64_t M, int64_t hc, int64_t D, const float* fn,
                           const float* base, const float* scale, float hc_eps, float norm_eps,
                           float* out, float* partial, int sms, cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if (hc < 1 || hc > kMaxHc || M > INT_MAX) return cudaErrorInvalidValue;
  int nchunks = 0;
  cudaError_t e =
      launch_mix_partial(X, M, hc * D, fn, static_cast<int>(hc), partial, &nchunks, sms, stream);
  if (e != cudaSuccess) return e;
  return launch_kernel(hc_head_kernel, dim3(static_cast<unsigned>(M), collapse_parts(M, D)),
                       kThreads, 0, stream, X, static_cast<int>(hc), D, partial, nchunks, base,
                       scale, hc_eps, norm_eps, out);
}

}  // namespace deepinfer::cuda
