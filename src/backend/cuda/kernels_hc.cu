// Manifold-constrained hyper-connections: hc_pre (the mixing GEMV's partials, kernels_hc_mix.cu,
// then RMS scale, sigmoids, Sinkhorn and the collapse over (row, column part) blocks),
// hc_pre_norm (the same with the collapsed rows' rms_norm, a row's parts one cluster), hc_post
// (alone, or forming the next site's mixing partials itself), hc_head.
#include <cooperative_groups.h>

#include <algorithm>
#include <climits>

#include "backend/cuda/hc_mix.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"

namespace deepinfer::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;

// Row m's mixes from its partials: mix[j] = rmsnorm_unweighted(x) . fn[j], the RMS factor
// applied to the dot products (as the CPU backend does). The partials hold nmix mixes (+ the sum
// of squares at slot nmix); only the first `want` mixes (and the sum of squares) are computed.
// Warp w sums slots w, w + nw, ... (lane l: chunks l, l + 32, ... in order, then a warp sum), so a
// slot's bits do not depend on `want`; the loads of kSlots slots x 4 chunks issue together.
__device__ void row_mixes(const float* partial, int64_t m, int nchunks, int nmix, int want,
                          int64_t W, float norm_eps, float* mix) {
  constexpr int kSlots = 4, kChunks = 4;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const float* p = partial + m * nchunks * (nmix + 1);
  for (int t0 = warp; t0 <= want; t0 += nw * kSlots) {
    float acc[kSlots] = {0.f, 0.f, 0.f, 0.f};
    for (int c0 = lane; c0 < nchunks; c0 += 32 * kChunks) {
      float v[kSlots][kChunks];
#pragma unroll
      for (int u = 0; u < kSlots; ++u) {
        const int t = t0 + u * nw, slot = t < want ? t : nmix;
#pragma unroll
        for (int i = 0; i < kChunks; ++i) {
          const int c = c0 + 32 * i;
          v[u][i] = t <= want && c < nchunks ? p[c * (nmix + 1) + slot] : 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < kSlots; ++u)
#pragma unroll
        for (int i = 0; i < kChunks; ++i)
          if (c0 + 32 * i < nchunks) acc[u] += v[u][i];
    }
#pragma unroll
    for (int u = 0; u < kSlots; ++u) {
      const int t = t0 + u * nw;
      const float sum = warp_sum(acc[u]);
      if (lane == 0 && t <= want) mix[t < want ? t : nmix] = sum;
    }
  }
  __syncthreads();
  const float inv = 1.f / sqrtf(mix[nmix] / static_cast<float>(W) + norm_eps);
  __syncthreads();
  for (int j = threadIdx.x; j < want; j += blockDim.x) mix[j] *= inv;
  __syncthreads();
}

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

// The same Sinkhorn sequence with one lane per element of the [hc, hc] matrix (hc * hc <= 32, the
// whole warp calling): row and column sums are shuffles taken in the single-thread order, so
// the results are bitwise those of sinkhorn() (which took ~25 us of one thread per row).
// kHc > 0 fixes hc at compile time (V4's 4): the shuffles of a sum then issue together instead
// of one loop trip each, which took a decode row's Sinkhorn from ~10 us to a few.
template <int kHc>
__device__ float sinkhorn_warp(float v, int hc_runtime, int iters, float eps) {
  const int hc = kHc > 0 ? kHc : hc_runtime;
  const int lane = threadIdx.x & 31, i = lane / hc, j = lane % hc;
  const unsigned full = 0xffffffffu;
  auto row_sum = [&](float x) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < hc; ++k) s += __shfl_sync(full, x, i * hc + k);
    return s;
  };
  auto col_sum = [&](float x) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < hc; ++k) s += __shfl_sync(full, x, k * hc + j);
    return s;
  };
  float mx = neg_inf();
#pragma unroll
  for (int k = 0; k < hc; ++k) mx = fmaxf(mx, __shfl_sync(full, v, i * hc + k));
  v = expf(v - mx);
  v = v / row_sum(v) + eps;
  v /= col_sum(v) + eps;
  for (int it = 1; it < iters; ++it) {
    v /= row_sum(v) + eps;
    v /= col_sum(v) + eps;
  }
  return v;
}

// The columns [d0, d1) of D that block part `part` of `parts` collapses.
__device__ void part_columns(int64_t D, int part, int parts, int64_t* d0, int64_t* d1) {
  const int64_t per = (D + parts - 1) / parts;
  *d0 = part * per < D ? part * per : D;
  *d1 = *d0 + per < D ? *d0 + per : D;
}

// The row's mixes from the partials and its pre weights, into mix / pre for the block; part 0
// takes every mix and writes post, the other parts take the pre mixes only.
__device__ void row_weights(const float* partial, int64_t m, int nchunks, int hc, int64_t W,
                            const float* base, const float* scale, float hc_eps, float norm_eps,
                            bool part0, float* mix, float* pre, float* post) {
  const int nmix = (2 + hc) * hc;
  row_mixes(partial, m, nchunks, nmix, part0 ? nmix : hc, W, norm_eps, mix);
  if (threadIdx.x < hc) {
    const int h = threadIdx.x;
    pre[h] = sigmoidf_(mix[h] * scale[0] + base[h]) + hc_eps;
    if (part0) post[m * hc + h] = 2.f * sigmoidf_(mix[hc + h] * scale[1] + base[hc + h]);
  }
  __syncthreads();
}

// comb of the row by warp 0's lanes (hc * hc <= 32), from the mixes row_weights left.
__device__ void comb_by_warp(const float* mix, const float* base, const float* scale, int hc,
                             int iters, float hc_eps, float* comb_row) {
  const int lane = threadIdx.x;
  const bool mine = lane < hc * hc;
  float v = mine ? mix[2 * hc + lane] * scale[2] + base[2 * hc + lane] : 0.f;
  v = hc == 4 ? sinkhorn_warp<4>(v, hc, iters, hc_eps) : sinkhorn_warp<0>(v, hc, iters, hc_eps);
  if (mine) comb_row[lane] = v;
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

// hc_pre_norm's layout: rms_norm4_kernel holds a row one float4 per thread, so its warp w sums
// the squares of columns [128 w, 128 w + 128) (a butterfly over the lanes), and the row's sum is
// the butterfly over its ceil(D / 128) warp sums. The fused kernel forms the same warp sums over
// its slice and the same final sum, so its normed rows are rms_norm's bits.
constexpr int kNormWarpCols = 128;
constexpr int kNormMaxCols = kRmsNorm4MaxCols;
constexpr int kNormMaxParts = 8;  // a portable cluster

__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}
// Named barrier 1 over the block's `threads` collapsing threads (warp 0 of part 0 is away on
// the Sinkhorn rounds).
__device__ __forceinline__ void workers_sync(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

// hc_pre, then rms_norm of the collapsed row (norm_w [D] or null) into normed, in one launch.
// Grid (row, part) as hc_pre_kernel, the parts of a row one cluster: each collapses its slice
// into shared memory, publishes its warps' sums of squares, and reads the row's others from its
// cluster peers (the collapsed row never goes through global memory). Needs hc * hc <= 32,
// D % 4 == 0, D <= kNormMaxCols and slices of whole 128-column warps.
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
    // Nothing of this warp's is read by the others: it arrives at once and runs the Sinkhorn
    // rounds while the rest of the cluster collapses and norms.
    if (parts > 1) cluster_arrive();
    comb_by_warp(mix, base, scale, hc, iters, hc_eps, comb + m * hc * hc);
    if (parts > 1) {
      cluster_wait();
      cluster_arrive();
      cluster_wait();
    }
    return;
  }
  const int first = part0 ? 32 : 0, workers = blockDim.x - first;
  collapse(X + m * W, pre, hc, D, d0, d1, slice, first);
  workers_sync(workers);
  const int lane = threadIdx.x & 31, warp = (threadIdx.x - first) >> 5;
  for (int64_t c = d0 + int64_t{kNormWarpCols} * warp; c < d1;
       c += int64_t{kNormWarpCols} * (workers >> 5)) {
    const int64_t i = c + 4 * lane;
    const float4 v = i < d1 ? *reinterpret_cast<const float4*>(slice + (i - d0))
                            : make_float4(0.f, 0.f, 0.f, 0.f);
    const float ss = warp_sum(sum_sq4(v));
    if (lane == 0) warp_ss[c / kNormWarpCols] = ss;
  }
  if (parts > 1) {
    cluster_arrive();
    cluster_wait();
  } else {
    workers_sync(workers);
  }
  const int row_warps = static_cast<int>((D + kNormWarpCols - 1) / kNormWarpCols);
  const int64_t per = (D + parts - 1) / parts;  // part_columns' slice width
  float ss = 0.f;
  if (lane < row_warps) {
    const unsigned owner = static_cast<unsigned>(lane * kNormWarpCols / per);
    ss = parts > 1 ? *cg::this_cluster().map_shared_rank(warp_ss + lane, owner) : warp_ss[lane];
  }
  const float inv = inv_rms(warp_sum(ss), D, norm_eps);
  for (int64_t i = d0 + 4 * int64_t{threadIdx.x - first}; i < d1; i += 4 * int64_t{workers}) {
    const float4 v = *reinterpret_cast<const float4*>(slice + (i - d0));
    store4(normed.f32, normed.bf16, m * D + i, scale4(v, inv, norm_w, i));
  }
  if (parts > 1) {  // no block leaves while a peer may still read its warp sums
    cluster_arrive();
    cluster_wait();
  }
}

__global__ void hc_head_kernel(const float* X, int hc, int64_t D, const float* partial, int nchunks,
                               const float* base, const float* scale, float hc_eps, float norm_eps,
                               float* out) {
  wait_for_prior_grid();
  __shared__ float mix[kMaxHc + 1];
  __shared__ float pre[kMaxHc];
  const int64_t m = blockIdx.x, W = hc * D;
  const float* x = X + m * W;
  row_mixes(partial, m, nchunks, hc, hc, W, norm_eps, mix);
  if (threadIdx.x < hc)
    pre[threadIdx.x] = sigmoidf_(mix[threadIdx.x] * scale[0] + base[threadIdx.x]) + hc_eps;
  __syncthreads();
  int64_t d0 = 0, d1 = 0;
  part_columns(D, blockIdx.y, gridDim.y, &d0, &d1);
  collapse(x, pre, hc, D, d0, d1, out + m * D + d0);
}

// Column d of row m of every output stream (hc_post_kernel and hc_post_mix_kernel: the same
// bits): X[m, :, d] is read once (not once per output stream); the weight of X[m, j] in stream h
// is comb[m, j, h], summed in the same order as before. kHcMax bounds hc at compile time so that
// the streams stay in registers (4: V4's hc_mult). emit(h, value) takes each stream's value as
// it is formed.
template <int kHcMax, typename Emit>
__device__ __forceinline__ void hc_post_column(const float* X, const float* y, const float* post,
                                               const float* comb, int64_t m, int hc, int64_t D,
                                               int64_t d, Emit&& emit) {
  float x[kHcMax];
#pragma unroll
  for (int j = 0; j < kHcMax; ++j) x[j] = j < hc ? __ldg(X + (m * hc + j) * D + d) : 0.f;
  const float yv = __ldg(y + m * D + d);
#pragma unroll
  for (int h = 0; h < kHcMax; ++h) {
    if (h >= hc) break;
    float o = post[m * hc + h] * yv;
#pragma unroll
    for (int j = 0; j < kHcMax; ++j)
      if (j < hc) o += comb[(m * hc + j) * hc + h] * x[j];
    emit(h, o);
  }
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
                                    float* partial, cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if ((normed.f32 == nullptr) == (normed.bf16 == nullptr) ||
      !hc_post_mix_fused(M, hc, D, norm_w, normed.ptr()) ||
      (reinterpret_cast<uintptr_t>(fn) & 15) != 0)
    return cudaErrorInvalidValue;
  const int nmix = static_cast<int>((2 + hc) * hc);
  if (nmix + 1 > kMixChunk) return cudaErrorInvalidValue;
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
