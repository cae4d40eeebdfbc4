// hc_post_pre_norm of decode rows in one launch: the expansion, the next site's mixing partials,
// and hc_pre_norm's weights, collapse and rms_norm, with a row's blocks one thread block cluster
// instead of two kernels (hc_post_mix_kernel, then hc_pre_norm_kernel after the grid-wide wait).
// The same functions on the same values in the same order (hc_rows.cuh), so the same bits.
#include <climits>

#include "backend/cuda/hc_rows.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tma_ptx.cuh"

namespace deepinfer::cuda {

namespace {

using namespace hc_rows;

// Columns a block owns (of every stream), one thread each: two mixing chunks a stream.
constexpr int kCols = 256;
constexpr int kHalves = kCols / kMixChunk;
// A row's blocks: D / kCols, one cluster (16: V4's 4096 columns, a non-portable cluster size).
constexpr int kMaxParts = kNormMaxCols / kCols;
// fn's staged rows: 16-byte aligned, 4 floats apart in banks, so a quarter warp's float4 reads of
// 8 consecutive rows cover the 32 banks once.
constexpr int kLd = kMixChunk + 4;

// The dynamic shared memory of a block: fn's rows over its chunks [hc * kHalves][nmix][kLd],
// then its expanded columns [hc][kCols].
size_t smem_bytes(int hc, int nmix) {
  return (static_cast<size_t>(hc) * kHalves * nmix * kLd + static_cast<size_t>(hc) * kCols) *
         sizeof(float);
}

// Grid (row, part), the parts of a row one cluster; part p owns columns [256 p, 256 p + 256).
// Each block: starts fn's rows over its chunks towards shared memory (weights: before the wait),
// expands its columns
// (hc_post_column: written to out and kept in shared memory), forms its chunks' mixing partials
// by hc_post_mix_kernel's chains, publishes them (global memory, fenced, then the cluster
// barrier), and then runs hc_pre_norm_kernel's steps on its columns, the collapse from the
// expanded values it holds. kHead: the head's site instead (hc_head_kernel's weights from its hc
// mixes, no post or comb, then the final rms_norm); out null: the expansion is not written.
template <int kHcMax, bool kHead>
__global__ void __launch_bounds__(kCols)
    hc_post_norm_kernel(const float* X, const float* y, const float* post, const float* comb,
                        int hc, int64_t D, const float* fn, int nmix, float* out, float* partial,
                        const float* base, const float* scale, int iters, float hc_eps,
                        float norm_eps, const float* norm_w, NormedOut normed, float* next_post,
                        float* next_comb) {
  extern __shared__ __align__(16) float sm[];
  __shared__ __align__(16) float slice[kCols];
  __shared__ float mix[kMaxMix + 1];
  __shared__ float pre[kMaxHc];
  __shared__ float warp_ss[kNormMaxCols / kNormWarpCols];
  const int chunks = hc * kHalves;       // local chunk lc: stream lc / 2, half lc % 2
  float* fs = sm;                        // [chunks][nmix][kLd]
  float* xs = sm + chunks * nmix * kLd;  // [hc][kCols]
  const int64_t m = blockIdx.x, W = hc * D, per_stream = D / kMixChunk;
  const int nchunks = static_cast<int>(hc * per_stream);
  const int parts = gridDim.y, t = threadIdx.x;
  const int64_t d0 = int64_t{blockIdx.y} * kCols, d1 = d0 + kCols;
  auto chunk_of = [&](int lc) {  // the chunk's index in the row's partials
    return static_cast<int>((lc / kHalves) * per_stream + d0 / kMixChunk + lc % kHalves);
  };
  // fn's rows over the block's chunks (weights: in flight while the kernel before drains and the
  // columns expand). On sm_90 by bulk copies, one a 512-byte row chunk from warp 0 (16 blocks a
  // row pull fn's 1.5 MB, so each SM's own load slots would bound it); else by cp.async.
#if DI_HAVE_WGMMA
  __shared__ uint64_t fn_landed;
  if (t == 0) mbarrier_init(&fn_landed, 1);
  __syncthreads();
  if (t < 32) {
    if (t == 0) mbarrier_arrive_expect_tx(&fn_landed, chunks * nmix * kMixChunk * 4);
    __syncwarp();
    for (int r = t; r < chunks * nmix; r += 32)
      bulk_load(fs + r * kLd, fn + (r % nmix) * W + int64_t{chunk_of(r / nmix)} * kMixChunk,
                kMixChunk * 4, &fn_landed);
  }
#else
  {
    int lc = 0, j = t / 32;  // the row lc * nmix + j, stepped without division
    for (; j >= nmix; j -= nmix) ++lc;
    while (lc < chunks) {
      cp_async16(fs + (lc * nmix + j) * kLd + 4 * (t % 32),
                 fn + j * W + int64_t{chunk_of(lc)} * kMixChunk + 4 * (t % 32), true);
      for (j += kCols / 32; j >= nmix; j -= nmix) ++lc;
    }
    cp_async_commit();
  }
#endif
  wait_for_prior_grid();
  const int64_t d = d0 + t;
  hc_post_column<kHcMax>(X, y, post, comb, m, hc, D, d, [&](int h, float o) {
    if (out) out[(m * hc + h) * D + d] = o;
    xs[h * kCols + t] = o;
  });
#if DI_HAVE_WGMMA
  mbarrier_wait(&fn_landed, 0);
#else
  cp_async_wait_all();
#endif
  __syncthreads();
  for (int task = t; task < chunks * (nmix + 1); task += kCols) {
    const int lc = task / (nmix + 1), s = task % (nmix + 1);
    const float4* x =
        reinterpret_cast<const float4*>(xs + (lc / kHalves) * kCols + (lc % kHalves) * kMixChunk);
    // hc_post_mix_kernel's chain, k from 0 up, four k a shared-memory read.
    const float4* f = reinterpret_cast<const float4*>(s < nmix ? fs + (lc * nmix + s) * kLd : xs);
    float acc = 0.f;
    for (int q = 0; q < kMixChunk / 4; ++q) {
      const float4 a = x[q], b = s < nmix ? f[q] : a;
      acc = fmaf(a.x, b.x, acc);
      acc = fmaf(a.y, b.y, acc);
      acc = fmaf(a.z, b.z, acc);
      acc = fmaf(a.w, b.w, acc);
    }
    partial[(m * nchunks + chunk_of(lc)) * (nmix + 1) + s] = acc;
  }
  __threadfence();  // the partials are visible device-wide before the row's blocks read them
  if (parts > 1) {
    cluster_arrive();
    cluster_wait();
  } else {
    __syncthreads();
  }
  const bool part0 = blockIdx.y == 0;
  if constexpr (kHead) {
    head_weights(partial, m, nchunks, hc, W, base, scale, hc_eps, norm_eps, mix, pre);
  } else {
    row_weights(partial, m, nchunks, hc, W, base, scale, hc_eps, norm_eps, part0, mix, pre,
                next_post);
    if (part0 && t < 32) {
      comb_beside_norm(mix, base, scale, hc, iters, hc_eps, parts, next_comb + m * hc * hc);
      return;
    }
  }
  // collapse()'s arithmetic on the expanded values held here.
  const int first = !kHead && part0 ? 32 : 0;
  for (int i = t - first; i < kCols; i += kCols - first) {
    float o = pre[0] * xs[i];
    for (int h = 1; h < hc; ++h) o = fmaf(pre[h], xs[h * kCols + i], o);
    slice[i] = o;
  }
  norm_collapsed_slice(slice, m, D, d0, d1, parts, first, norm_eps, norm_w, normed, warp_ss);
}

}  // namespace

namespace {

// A one-launch kernel of the site (nmix mixes) over M rows, or cudaErrorNotSupported (nothing
// queued) where it does not take the shape or the row's cluster is not resident.
template <bool kHead>
cudaError_t launch_one(const float* X, const float* y, const float* post, const float* comb,
                       int64_t M, int64_t hc, int64_t D, float* out, const float* fn, int nmix,
                       const float* base, const float* scale, int iters, float hc_eps,
                       float norm_eps, const float* norm_w, NormedOut normed, float* next_post,
                       float* next_comb, float* partial, cudaStream_t stream) {
  const int64_t parts = D / kCols;
  if (M < 1 || M > INT_MAX || hc < 1 || hc > 4 || D % kCols != 0 || parts > kMaxParts)
    return cudaErrorNotSupported;
  auto* kernel = hc_post_norm_kernel<4, kHead>;
  const size_t smem = smem_bytes(static_cast<int>(hc), nmix);
  static const cudaError_t attr = [&] {
    const int most = kHead ? 4 : (2 + 4) * 4;  // fn's rows at 4 streams
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem_bytes(4, most)));
    if (e != cudaSuccess) return e;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  }();
  if (attr != cudaSuccess) {
    cudaGetLastError();  // not sticky: the caller's path without it serves
    return cudaErrorNotSupported;
  }
  if (parts > 1 && !clusters_resident(reinterpret_cast<const void*>(kernel), kCols, smem,
                                      static_cast<int>(parts), M))
    return cudaErrorNotSupported;
  return launch_kernel_clustered(
      kernel, dim3(static_cast<unsigned>(M), static_cast<unsigned>(parts)), kCols, smem, stream,
      dim3(1, static_cast<unsigned>(parts), 1), X, y, post, comb, static_cast<int>(hc), D, fn, nmix,
      out, partial, base, scale, iters, hc_eps, norm_eps, norm_w, normed, next_post, next_comb);
}

}  // namespace

cudaError_t launch_hc_post_norm_one_launch(const float* X, const float* y, const float* post,
                                           const float* comb, int64_t M, int64_t hc, int64_t D,
                                           float* out, const float* fn, const float* base,
                                           const float* scale, int iters, float hc_eps,
                                           float norm_eps, const float* norm_w, NormedOut normed,
                                           float* next_post, float* next_comb, float* partial,
                                           cudaStream_t stream) {
  return launch_one<false>(X, y, post, comb, M, hc, D, out, fn, static_cast<int>((2 + hc) * hc),
                           base, scale, iters, hc_eps, norm_eps, norm_w, normed, next_post,
                           next_comb, partial, stream);
}

cudaError_t launch_hc_post_head_norm(const float* X, const float* y, const float* post,
                                     const float* comb, int64_t M, int64_t hc, int64_t D,
                                     const float* fn, const float* base, const float* scale,
                                     float hc_eps, float norm_eps, const float* norm_w,
                                     NormedOut normed, float* partial, cudaStream_t stream) {
  if (!hc_post_mix_fused(M, hc, D, norm_w, normed.ptr()) ||
      (reinterpret_cast<uintptr_t>(fn) & 15) != 0)
    return cudaErrorNotSupported;
  return launch_one<true>(X, y, post, comb, M, hc, D, nullptr, fn, static_cast<int>(hc), base,
                          scale, 0, hc_eps, norm_eps, norm_w, normed, nullptr, nullptr, partial,
                          stream);
}

}  // namespace deepinfer::cuda
