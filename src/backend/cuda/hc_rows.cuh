// Device helpers of the mHC kernels (kernels_hc.cu, kernels_hc_post_norm.cu): a row's mixes from
// the mixing partials, its pre / post weights and Sinkhorn comb, the collapsed row's rms_norm
// over a cluster of column parts, and hc_post's expansion of one column. Every kernel that forms
// these values goes through these functions, so that they give the same bits.
#pragma once

#include <cooperative_groups.h>

#include "backend/cuda/hc_mix.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

namespace deepinfer::cuda::hc_rows {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;

// Row m's mixes from its partials: mix[j] = rmsnorm_unweighted(x) . fn[j], the RMS factor
// applied to the dot products (as the CPU backend does). The partials hold nmix mixes (+ the sum
// of squares at slot nmix); only the first `want` mixes (and the sum of squares) are computed.
// Warp w sums slots w, w + nw, ... (lane l: chunks l, l + 32, ... in order, then a warp sum), so a
// slot's bits do not depend on `want`; the loads of kSlots slots x 4 chunks issue together.
__device__ inline void row_mixes(const float* partial, int64_t m, int nchunks, int nmix, int want,
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
          v[u][i] = t <= want && c < nchunks ? __ldcg(p + c * (nmix + 1) + slot) : 0.f;
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
__device__ inline void part_columns(int64_t D, int part, int parts, int64_t* d0, int64_t* d1) {
  const int64_t per = (D + parts - 1) / parts;
  *d0 = part * per < D ? part * per : D;
  *d1 = *d0 + per < D ? *d0 + per : D;
}

// The row's mixes from the partials and its pre weights, into mix / pre for the block; part 0
// takes every mix and writes post, the other parts take the pre mixes only.
__device__ inline void row_weights(const float* partial, int64_t m, int nchunks, int hc, int64_t W,
                                   const float* base, const float* scale, float hc_eps,
                                   float norm_eps, bool part0, float* mix, float* pre,
                                   float* post) {
  const int nmix = (2 + hc) * hc;
  row_mixes(partial, m, nchunks, nmix, part0 ? nmix : hc, W, norm_eps, mix);
  if (threadIdx.x < hc) {
    const int h = threadIdx.x;
    pre[h] = sigmoidf_(mix[h] * scale[0] + base[h]) + hc_eps;
    if (part0) post[m * hc + h] = 2.f * sigmoidf_(mix[hc + h] * scale[1] + base[hc + h]);
  }
  __syncthreads();
}

// The head site's pre weights (hc_head: its fn holds the hc pre mixes only), into mix / pre.
__device__ inline void head_weights(const float* partial, int64_t m, int nchunks, int hc, int64_t W,
                                    const float* base, const float* scale, float hc_eps,
                                    float norm_eps, float* mix, float* pre) {
  row_mixes(partial, m, nchunks, hc, hc, W, norm_eps, mix);
  if (threadIdx.x < hc)
    pre[threadIdx.x] = sigmoidf_(mix[threadIdx.x] * scale[0] + base[threadIdx.x]) + hc_eps;
  __syncthreads();
}

// comb of the row by warp 0's lanes (hc * hc <= 32), from the mixes row_weights left.
__device__ inline void comb_by_warp(const float* mix, const float* base, const float* scale, int hc,
                                    int iters, float hc_eps, float* comb_row) {
  const int lane = threadIdx.x;
  const bool mine = lane < hc * hc;
  float v = mine ? mix[2 * hc + lane] * scale[2] + base[2 * hc + lane] : 0.f;
  v = hc == 4 ? sinkhorn_warp<4>(v, hc, iters, hc_eps) : sinkhorn_warp<0>(v, hc, iters, hc_eps);
  if (mine) comb_row[lane] = v;
}

// hc_pre_norm's layout: rms_norm4_kernel holds a row one float4 per thread, so its warp w sums
// the squares of columns [128 w, 128 w + 128) (a butterfly over the lanes), and the row's sum is
// the butterfly over its ceil(D / 128) warp sums. The fused kernel forms the same warp sums over
// its slice and the same final sum (norm_collapsed_slice), so its normed rows are rms_norm's bits.
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

// Warp 0 of a row's part 0 while the rest of its cluster collapses and norms
// (norm_collapsed_slice): the row's Sinkhorn comb into comb_row. It arrives at the cluster's two
// barriers at once (nothing of this warp's is read by the others) and waits for them after its
// rounds, so that no block leaves while a peer may still read its warp sums.
__device__ inline void comb_beside_norm(const float* mix, const float* base, const float* scale,
                                        int hc, int iters, float hc_eps, int parts,
                                        float* comb_row) {
  if (parts > 1) cluster_arrive();
  comb_by_warp(mix, base, scale, hc, iters, hc_eps, comb_row);
  if (parts > 1) {
    cluster_wait();
    cluster_arrive();
    cluster_wait();
  }
}

// rms_norm of row m from its collapsed columns [d0, d1), which this block holds in `slice`
// (16-byte aligned; slices of whole 128-column warps), its peers (the row's `parts` blocks, one
// cluster) the others: the block's threads from `first` on (`workers` of them, whole warps,
// named barrier 1) form the warp sums of squares of its columns into warp_ss, read the row's
// others from the peers, and write normed[m, d0 .. d1). Called once `slice` is written.
__device__ inline void norm_collapsed_slice(const float* slice, int64_t m, int64_t D, int64_t d0,
                                            int64_t d1, int parts, int first, float norm_eps,
                                            const float* norm_w, NormedOut normed, float* warp_ss) {
  const int workers = blockDim.x - first;
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

}  // namespace deepinfer::cuda::hc_rows

namespace deepinfer::cuda {

// hc_post_pre_norm's one-launch kernel (kernels_hc_post_norm.cu) for launch_hc_post_pre_norm,
// which has checked the arguments; cudaErrorNotSupported (nothing queued) where it does not
// take the shape (hc > 4, D not a multiple of 256 or past kNormMaxCols) or the row's cluster
// is not resident.
cudaError_t launch_hc_post_norm_one_launch(const float* X, const float* y, const float* post,
                                           const float* comb, int64_t M, int64_t hc, int64_t D,
                                           float* out, const float* fn, const float* base,
                                           const float* scale, int iters, float hc_eps,
                                           float norm_eps, const float* norm_w, NormedOut normed,
                                           float* next_post, float* next_comb, float* partial,
                                           cudaStream_t stream);

}  // namespace deepinfer::cuda
