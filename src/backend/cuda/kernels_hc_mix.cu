// The mHC mixing GEMV's partials (hc_mix.cuh): hc_mix_partial_kernel's small blocks for decode
// rows, hc_mix_wide_kernel for prefill rows, the same FMA chains.
#include <algorithm>
#include <climits>

#include "backend/cuda/hc_mix.cuh"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kThreads = 256;

// Block (kRows rows, chunk): each thread computes kRowsPerThread rows x kMixPerThread fn rows
// (or, one task per row group, the sums of squares), sequential FMA chains over the chunk. The
// decode shape (16 rows, 4 x 1) keeps many small blocks; prefill rows take hc_mix_wide_kernel,
// whose chains are the same, so the bits are too.
template <int kRows, int kRowsPerThread, int kMixPerThread>
__global__ void __launch_bounds__(kThreads)
    hc_mix_partial_kernel(const float* X, int64_t M, int64_t W, const float* fn, int nmix,
                          float* partial) {
  wait_for_prior_grid();
  // Rows and fn's rows of the chunk in shared memory, padded by one float so that the threads
  // of a warp (different rows / fn rows, same column) hit different banks.
  extern __shared__ float sm[];
  constexpr int ld = kMixChunk + 1;
  float* xs = sm;               // [kRows][ld]
  float* fs = sm + kRows * ld;  // [nmix][ld]
  const int64_t r0 = int64_t{blockIdx.x} * kRows;
  const int64_t c0 = int64_t{blockIdx.y} * kMixChunk;
  const int rows = static_cast<int>(M - r0 < kRows ? M - r0 : kRows);
  const int len = static_cast<int>(W - c0 < kMixChunk ? W - c0 : kMixChunk);
  // Staged in batches whose loads (non-coherent, so they cannot alias the shared stores) all
  // issue before the batch's stores: loads interleaved with stores went one round trip each.
  // Only the block's rows and fn's rows are staged (a decode row's chunk and fn's: one batch;
  // the tile's absent rows are never summed into a written partial).
  // Where rows are 16-byte aligned (W % 4 == 0, as at every model shape), by float4: a decode
  // block's staging was two thirds of its stall samples one float at a time.
  const bool vec4 = W % 4 == 0 && (reinterpret_cast<uintptr_t>(X) & 15) == 0 &&
                    (reinterpret_cast<uintptr_t>(fn) & 15) == 0;
  if (vec4) {
    constexpr int kBatch = 8, kChunk4 = kMixChunk / 4;
    const int total = (rows + nmix) * kChunk4;  // len % 4 == 0 here
    for (int i0 = 0; i0 < total; i0 += kBatch * kThreads) {
      float4 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * kThreads + threadIdx.x, r = i / kChunk4, k = (i % kChunk4) * 4;
        v[u] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (i < total && k < len) {
          const float* src = r < rows ? X + (r0 + r) * W : fn + (r - rows) * W;
          v[u] = __ldg(reinterpret_cast<const float4*>(src + c0 + k));
        }
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * kThreads + threadIdx.x, r = i / kChunk4, k = (i % kChunk4) * 4;
        if (i >= total) continue;
        float* dst = (r < rows ? xs + r * ld : fs + (r - rows) * ld) + k;
        dst[0] = v[u].x;
        dst[1] = v[u].y;
        dst[2] = v[u].z;
        dst[3] = v[u].w;
      }
    }
  } else {
    constexpr int kBatch = 16;
    const int total = (rows + nmix) * kMixChunk;
    for (int i0 = 0; i0 < total; i0 += kBatch * kThreads) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * kThreads + threadIdx.x, r = i / kMixChunk, k = i % kMixChunk;
        v[u] = 0.f;
        if (i < total && k < len)
          v[u] = r < rows ? __ldg(X + (r0 + r) * W + c0 + k) : __ldg(fn + (r - rows) * W + c0 + k);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * kThreads + threadIdx.x, r = i / kMixChunk;
        if (i < total) (r < rows ? xs + r * ld : fs + (r - rows) * ld)[i % kMixChunk] = v[u];
      }
    }
  }
  __syncthreads();
  // Tasks: (row group, mix group), the last mix group the sums of squares (slot nmix); row group
  // g holds rows g, g + kGroups, ..., so that a warp's lanes read distinct banks (ld is odd). A
  // row's partials never depend on the block's other rows (same chain of FMAs for any M).
  const int64_t nchunks = gridDim.y;
  constexpr int kGroups = kRows / kRowsPerThread;
  const int mix_groups = (nmix + kMixPerThread - 1) / kMixPerThread;
  for (int t = threadIdx.x; t < kGroups * (mix_groups + 1); t += blockDim.x) {
    const int g = t % kGroups, mg = t / kGroups;
    if (g >= rows) continue;
    const float* x = xs + g * ld;  // row i of the group: x + i * kGroups * ld
    float acc[kRowsPerThread][kMixPerThread];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
      for (int c = 0; c < kMixPerThread; ++c) acc[i][c] = 0.f;
    int j0 = nmix, nj = 1;
    if (mg < mix_groups) {
      j0 = mg * kMixPerThread;
      nj = nmix - j0 < kMixPerThread ? nmix - j0 : kMixPerThread;
      const float* f[kMixPerThread];
#pragma unroll
      for (int c = 0; c < kMixPerThread; ++c) f[c] = fs + (c < nj ? j0 + c : j0) * ld;
      for (int k = 0; k < kMixChunk; ++k) {
        float xv[kRowsPerThread], fv[kMixPerThread];
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) xv[i] = x[i * kGroups * ld + k];
#pragma unroll
        for (int c = 0; c < kMixPerThread; ++c) fv[c] = f[c][k];
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
          for (int c = 0; c < kMixPerThread; ++c) acc[i][c] = fmaf(xv[i], fv[c], acc[i][c]);
      }
    } else {
      for (int k = 0; k < kMixChunk; ++k)
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) {
          const float v = x[i * kGroups * ld + k];
          acc[i][0] = fmaf(v, v, acc[i][0]);
        }
    }
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
      for (int c = 0; c < kMixPerThread; ++c)
        if (g + i * kGroups < rows && c < nj)
          partial[((r0 + g + i * kGroups) * nchunks + blockIdx.y) * (nmix + 1) + j0 + c] =
              acc[i][c];
  }
}

// Prefill rows (hc_mix_partial_kernel's outputs, the same FMA chains: k in order from zero,
// zeros past a short last chunk). A block of 256 rows (a warp's 32) walks chunks blockIdx.y,
// blockIdx.y + gridDim.y, ..., each as two 64-value stages, double-buffered by cp.async, the
// chains' accumulators kept in registers across a chunk's stages. Lane (rg, fg) of a warp takes
// rows rg + 8 i (i < 4) against fn rows 6 fg .. 6 fg + 5 (24 chains) and the squares of row
// rg + 8 fg: per 4 values, 100 FMAs for 11 shared loads (the warp's 8 rows and 4 fn rows one
// wavefront each, rows 68 floats apart). The earlier version (a block of 128 rows, 2 rows x 6 fn
// rows a thread, a whole chunk staged before its sums) issued 8 shared loads per 48 FMAs and
// waited out each chunk's loads: ~2.1x its DRAM time at 65,536 rows. 64-value stages two deep
// beat 32-value stages four deep (rows read 256 contiguous bytes at a time; 1.21 -> 1.14 ms at
// 32,768 rows, H100), and a next-chunk L2 prefetch made either slower (docs/perf.md). nmix <= 24
// (up to 4 streams, the model's); more take the small blocks.
constexpr int kWideWarps = 8, kWideRows = 32 * kWideWarps;
constexpr int kWideK = 64, kWideStages = 2, kWideLd = kWideK + 4;
constexpr int kWideFnGroups = 4, kWideMix = 6, kWideMaxMix = kWideFnGroups * kWideMix;
constexpr int kWideStageFloats = (kWideRows + kWideMaxMix) * kWideLd;
constexpr size_t kWideSmem =
    (static_cast<size_t>(kWideStages) * kWideStageFloats + kWideRows * (kWideMaxMix + 1)) *
    sizeof(float);
static_assert(kMixChunk % kWideK == 0, "whole stages a chunk");
constexpr int kWidePieces = kWideK / 4, kWidePass = 32 * kWideWarps / kWidePieces;
static_assert(kWideRows % kWidePass == 0, "whole passes of the block's rows");

__global__ void __launch_bounds__(32 * kWideWarps, 1)
    hc_mix_wide_kernel(const float* X, int64_t M, int64_t W, const float* fn, int nmix,
                       float* partial) {
  wait_for_prior_grid();
  extern __shared__ __align__(16) float sm[];
  const int64_t r0 = int64_t{blockIdx.x} * kWideRows;
  const int rows = static_cast<int>(M - r0 < kWideRows ? M - r0 : kWideRows);
  const int64_t nchunks = (W + kMixChunk - 1) / kMixChunk;
  const int64_t my_chunks = (nchunks - blockIdx.y + gridDim.y - 1) / gridDim.y;
  constexpr int kSubs = kMixChunk / kWideK;
  const int64_t stages_total = my_chunks * kSubs;
  const bool aligned = W % 4 == 0 && (reinterpret_cast<uintptr_t>(X) & 15) == 0 &&
                       (reinterpret_cast<uintptr_t>(fn) & 15) == 0;
  // Stage s (chunk blockIdx.y + (s / kSubs) gridDim.y, values kWideK (s % kSubs) ..) into its slot:
  // the block's rows, then fn's nmix rows; zeros for absent rows and past W. Aligned rows
  // (W % 4 == 0: a 4-value piece is all in or all past W) by cp.async, a thread's pieces column
  // 4 (tid % 16) of rows tid / 16 + 16 n; else by plain loads.
  const int pc = 4 * (threadIdx.x % kWidePieces), pr = threadIdx.x / kWidePieces;
  auto stage = [&](int64_t s) {
    float* dst = sm + (s % kWideStages) * kWideStageFloats;
    const int64_t k0 = (blockIdx.y + (s / kSubs) * gridDim.y) * kMixChunk + (s % kSubs) * kWideK;
    if (aligned) {
      const int64_t k = k0 + pc;
      const bool kin = k < W;
#pragma unroll
      for (int n = 0; n < kWideRows / kWidePass; ++n) {
        const int r = pr + kWidePass * n;
        const bool ok = kin && r < rows;
        cp_async16(dst + r * kWideLd + pc, ok ? static_cast<const void*>(X + (r0 + r) * W + k) : fn,
                   ok);
      }
#pragma unroll
      for (int n = 0; n < (kWideMaxMix + kWidePass - 1) / kWidePass; ++n) {
        const int j = pr + kWidePass * n;
        if (j < nmix)
          cp_async16(dst + (kWideRows + j) * kWideLd + pc,
                     kin ? static_cast<const void*>(fn + j * W + k) : fn, kin);
      }
    } else {
      for (int i = threadIdx.x; i < (kWideRows + nmix) * kWideK; i += blockDim.x) {
        const int r = i / kWideK, k = i % kWideK;
        const float* src = r >= kWideRows ? fn + (r - kWideRows) * W
                           : r < rows     ? X + (r0 + r) * W
                                          : nullptr;
        dst[r * kWideLd + k] = src != nullptr && k0 + k < W ? __ldg(src + k0 + k) : 0.f;
      }
    }
  };

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rg = lane & 7, fg = lane >> 3;
  const int wrow = 32 * warp;    // the warp's first row in the block
  const int j0 = kWideMix * fg;  // this lane's first fn row
  const int nj = nmix - j0 < 0 ? 0 : (nmix - j0 < kWideMix ? nmix - j0 : kWideMix);
  int frow[kWideMix];  // fn rows past nmix read row 0, unwritten
#pragma unroll
  for (int u = 0; u < kWideMix; ++u) frow[u] = kWideRows + (u < nj ? j0 + u : 0);
  float acc[4][kWideMix], sq = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int u = 0; u < kWideMix; ++u) acc[i][u] = 0.f;
  float* res = sm + kWideStages * kWideStageFloats + wrow * (nmix + 1);  // the warp's 32 rows
  const int per_row = nmix + 1;
  const int64_t row_stride = nchunks * per_row;

#pragma unroll
  for (int s = 0; s < kWideStages - 1; ++s) {
    if (s < stages_total) stage(s);
    cp_async_commit();
  }
  for (int64_t s = 0; s < stages_total; ++s) {
    cp_async_wait<kWideStages - 2>();
    __syncthreads();  // stage s landed (every thread's part); slot s - 1 is read by all
    if (s + kWideStages - 1 < stages_total) stage(s + kWideStages - 1);
    cp_async_commit();
    const float* xs = sm + (s % kWideStages) * kWideStageFloats;
    const float* xr = xs + (wrow + rg) * kWideLd;
    const float* xq = xs + (wrow + rg + 8 * fg) * kWideLd;  // the row this lane squares
#pragma unroll
    for (int k = 0; k < kWideK; k += 4) {
      float4 xv[4], fv[kWideMix];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        xv[i] = *reinterpret_cast<const float4*>(xr + 8 * i * kWideLd + k);
#pragma unroll
      for (int u = 0; u < kWideMix; ++u)
        fv[u] = *reinterpret_cast<const float4*>(xs + frow[u] * kWideLd + k);
      const float4 q = *reinterpret_cast<const float4*>(xq + k);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int u = 0; u < kWideMix; ++u) {
          acc[i][u] = fmaf(xv[i].x, fv[u].x, acc[i][u]);
          acc[i][u] = fmaf(xv[i].y, fv[u].y, acc[i][u]);
          acc[i][u] = fmaf(xv[i].z, fv[u].z, acc[i][u]);
          acc[i][u] = fmaf(xv[i].w, fv[u].w, acc[i][u]);
        }
      sq = fmaf(q.x, q.x, sq);
      sq = fmaf(q.y, q.y, sq);
      sq = fmaf(q.z, q.z, sq);
      sq = fmaf(q.w, q.w, sq);
    }
    if (s % kSubs == kSubs - 1) {
      // The chunk's partials: through the warp's rows in shared memory, so that a row's nmix + 1
      // leave as one contiguous run; then the chains start again from zero.
      const int64_t c = blockIdx.y + (s / kSubs) * gridDim.y;
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int u = 0; u < kWideMix; ++u) {
          if (u < nj) res[(rg + 8 * i) * per_row + j0 + u] = acc[i][u];
          acc[i][u] = 0.f;
        }
      res[(rg + 8 * fg) * per_row + nmix] = sq;
      sq = 0.f;
      __syncwarp();
      const int wrows = rows - wrow < 32 ? rows - wrow : 32;
      if (lane < per_row) {
        float* dst = partial + (r0 + wrow) * row_stride + c * per_row + lane;
        for (int r = 0; r < wrows; ++r) dst[r * row_stride] = res[r * per_row + lane];
      }
      __syncwarp();  // res is read out before the next chunk's partials
    }
  }
  cp_async_wait<0>();
}

template <int kRows, int kRowsPerThread, int kMixPerThread>
cudaError_t launch_mix_shape(const float* X, int64_t M, int64_t W, const float* fn, int nmix,
                             float* partial, int64_t chunks, cudaStream_t stream) {
  const int64_t tiles = (M + kRows - 1) / kRows;
  if (tiles > INT_MAX) return cudaErrorInvalidValue;
  auto* kernel = hc_mix_partial_kernel<kRows, kRowsPerThread, kMixPerThread>;
  const size_t smem = static_cast<size_t>(kRows + nmix) * (kMixChunk + 1) * sizeof(float);
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (kRows + kMaxMix) * (kMixChunk + 1) * static_cast<int>(sizeof(float)));
  if (attr != cudaSuccess) return attr;
  return launch_kernel(kernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks)),
                       kThreads, smem, stream, X, M, W, fn, nmix, partial);
}

}  // namespace

cudaError_t launch_mix_partial(const float* X, int64_t M, int64_t W, const float* fn, int nmix,
                               float* partial, int* nchunks, int sms, cudaStream_t stream) {
  const int64_t chunks = (W + kMixChunk - 1) / kMixChunk;
  if (chunks > 65535) return cudaErrorInvalidValue;
  *nchunks = static_cast<int>(chunks);
  // Up to a decode batch's rows: small blocks, so a few rows still spread over the device; so
  // too past the wide kernel's fn rows (more than 4 streams).
  if (M <= 256 || nmix > kWideMaxMix)
    return launch_mix_shape<16, 4, 1>(X, M, W, fn, nmix, partial, chunks, stream);
  const int64_t tiles = (M + kWideRows - 1) / kWideRows;
  if (tiles > INT_MAX) return cudaErrorInvalidValue;
  static const cudaError_t attr = cudaFuncSetAttribute(
      hc_mix_wide_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kWideSmem));
  if (attr != cudaSuccess) return attr;
  // One block an SM: row tiles, each split over walkers of its chunks while tiles are fewer
  // than SMs (one wave).
  const int64_t walkers = std::max<int64_t>(1, std::min<int64_t>(chunks, std::max(sms, 1) / tiles));
  return launch_kernel(hc_mix_wide_kernel,
                       dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(walkers)),
                       32 * kWideWarps, kWideSmem, stream, X, M, W, fn, nmix, partial);
}

}  // namespace deepinfer::cuda
