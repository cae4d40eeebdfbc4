// Manifold-constrained hyper-connections: hc_pre (RMS scale, mixing GEMV, sigmoids, Sinkhorn and
// the collapse fused in one block per row), hc_post, hc_head.
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxMix = (2 + kMaxHc) * kMaxHc;

// mix[j] = rmsnorm_unweighted(x) . fn[j] for j < nmix: the per-row RMS factor is applied to the
// dot products (as the CPU backend does) instead of normalising x. One warp per j; x (one row of
// width W) is re-read from L1/L2 by each warp.
__device__ void row_mixes(const float* x, int64_t W, const float* fn, int nmix, float norm_eps,
                          float* mix, float* red) {
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < W; i += blockDim.x) ss += x[i] * x[i];
  ss = block_sum(ss, red);
  const float inv = 1.f / sqrtf(ss / static_cast<float>(W) + norm_eps);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int j = warp; j < nmix; j += nw) {
    const float* f = fn + j * W;
    float acc = 0.f;
    for (int64_t i = lane; i < W; i += 32) acc += x[i] * f[i];
    acc = warp_sum(acc);
    if (lane == 0) mix[j] = acc * inv;
  }
  __syncthreads();
}

// out[d] = sum_h pre[h] x[h, d], accumulated in stream order like the CPU backend.
__device__ void collapse(const float* x, const float* pre, int hc, int64_t D, float* out) {
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float o = pre[0] * x[d];
    for (int h = 1; h < hc; ++h) o += pre[h] * x[h * D + d];
    out[d] = o;
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

__global__ void hc_pre_kernel(const float* X, int hc, int64_t D, const float* fn, const float* base,
                              const float* scale, int iters, float hc_eps, float norm_eps,
                              float* collapsed, float* post, float* comb) {
  __shared__ float red[32];
  __shared__ float mix[kMaxMix];
  __shared__ float pre[kMaxHc];
  const int64_t m = blockIdx.x, W = hc * D;
  const int nmix = (2 + hc) * hc;
  const float* x = X + m * W;
  row_mixes(x, W, fn, nmix, norm_eps, mix, red);
  if (threadIdx.x == 0) {
    for (int h = 0; h < hc; ++h) {
      pre[h] = sigmoidf_(mix[h] * scale[0] + base[h]) + hc_eps;
      post[m * hc + h] = 2.f * sigmoidf_(mix[hc + h] * scale[1] + base[hc + h]);
    }
    float* c = mix + 2 * hc;  // reuse the mix slots of comb in place
    for (int i = 0; i < hc * hc; ++i) c[i] = c[i] * scale[2] + base[2 * hc + i];
    sinkhorn(c, hc, iters, hc_eps);
    for (int i = 0; i < hc * hc; ++i) comb[m * hc * hc + i] = c[i];
  }
  __syncthreads();
  collapse(x, pre, hc, D, collapsed + m * D);
}

__global__ void hc_head_kernel(const float* X, int hc, int64_t D, const float* fn,
                               const float* base, const float* scale, float hc_eps, float norm_eps,
                               float* out) {
  __shared__ float red[32];
  __shared__ float mix[kMaxHc];
  __shared__ float pre[kMaxHc];
  const int64_t m = blockIdx.x, W = hc * D;
  const float* x = X + m * W;
  row_mixes(x, W, fn, hc, norm_eps, mix, red);
  if (threadIdx.x < hc)
    pre[threadIdx.x] = sigmoidf_(mix[threadIdx.x] * scale[0] + base[threadIdx.x]) + hc_eps;
  __syncthreads();
  collapse(x, pre, hc, D, out + m * D);
}

// One thread per output element (m, h, d); the weight of X[m, j] in stream h is comb[m, j, h].
__global__ void hc_post_kernel(const float* X, const float* y, const float* post, const float* comb,
                               int64_t M, int hc, int64_t D, float* out) {
  const int64_t total = M * hc * D;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = t % D, mh = t / D, m = mh / hc, h = mh % hc;
    float o = post[mh] * y[m * D + d];
    for (int j = 0; j < hc; ++j) o += comb[(m * hc + j) * hc + h] * X[(m * hc + j) * D + d];
    out[t] = o;
  }
}

}  // namespace

cudaError_t launch_hc_pre(const float* X, int64_t M, int64_t hc, int64_t D, const float* fn,
                          const float* base, const float* scale, int iters, float hc_eps,
                          float norm_eps, float* collapsed, float* post, float* comb,
                          cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if (hc < 1 || hc > kMaxHc) return cudaErrorInvalidValue;
  hc_pre_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(
      X, static_cast<int>(hc), D, fn, base, scale, iters, hc_eps, norm_eps, collapsed, post, comb);
  return cudaGetLastError();
}

cudaError_t launch_hc_post(const float* X, const float* y, const float* post, const float* comb,
                           int64_t M, int64_t hc, int64_t D, float* out, cudaStream_t stream) {
  const int64_t total = M * hc * D;
  if (total <= 0) return cudaSuccess;
  hc_post_kernel<<<blocks_for(total < (int64_t{1} << 24) ? total : (int64_t{1} << 24), kThreads),
                   kThreads, 0, stream>>>(X, y, post, comb, M, static_cast<int>(hc), D, out);
  return cudaGetLastError();
}

cudaError_t launch_hc_head(const float* X, int64_t M, int64_t hc, int64_t D, const float* fn,
                           const float* base, const float* scale, float hc_eps, float norm_eps,
                           float* out, cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if (hc < 1 || hc > kMaxHc) return cudaErrorInvalidValue;
  hc_head_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(
      X, static_cast<int>(hc), D, fn, base, scale, hc_eps, norm_eps, out);
  return cudaGetLastError();
}

}  // namespace deepinfer::cuda
