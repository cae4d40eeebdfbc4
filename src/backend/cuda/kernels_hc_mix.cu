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

// Prefill rows (hc_mix_partial_kernel's outputs, the same FMA chains: k in order from zero):
// a block of 128 rows walks chunks blockIdx.y, blockIdx.y + gridDim.y, ... (about two blocks per
// SM in all, one buffer each: one block's rows stream in by cp.async while the other sums; with
// one block of two buffers per SM, 8 warps hid too little of the shared loads' latency: ncu
// had it at 50% issue, 35% of DRAM). Each task is 2 rows (g, g + 64) x 6 fn rows read as float4
// along k (8 shared loads per 48 FMAs); a warp's lanes share their fn rows (broadcast) and read
// rows 4 banks apart (ld = 132). The first fn group's tasks also sum their rows' squares (the same
// chain, k in order). A hc = 4 block's 256 tasks keep all 8 warps on the FMAs: with 4 rows per
// task and the squares as tasks of their own, half the warps did all the mixing (241 us per
// 4096 rows, ~4x its HBM time). The outputs go through shared memory so that a row's nmix + 1
// partials leave as one contiguous run (one 4-byte store per lane had the rows 12.8 KB apart:
// 270 -> 242 us per 4096 rows, docs/perf.md).
constexpr int kWideRows = 128, kWideMix = 6, kWideLd = kMixChunk + 4;

constexpr int kWideSmemCap = 227 * 1024;  // Hopper's shared memory per block

// The staged rows, then the block's outputs of a chunk ([kWideRows][nmix + 1]).
size_t mix_wide_smem(int nmix) {
  return (static_cast<size_t>(kWideRows + nmix) * kWideLd +
          static_cast<size_t>(kWideRows) * (nmix + 1)) *
         sizeof(float);
}

// One task of hc_mix_wide_kernel: rows x and x + 64 rows of the staged chunk against fn rows
// j0 .. j0 + 5 (fs), their partials into res (the rows' nmix + 1 slots each); kSquares: also the
// rows' sums of squares (slot nmix). Every chain runs over k in order from zero.
template <bool kSquares>
__device__ __forceinline__ void wide_mix_task(const float* x, const float* fs, int nmix, int j0,
                                              float* res) {
  const int nj = nmix - j0 < kWideMix ? nmix - j0 : kWideMix;
  const float* f[kWideMix];
#pragma unroll
  for (int u = 0; u < kWideMix; ++u) f[u] = fs + (u < nj ? j0 + u : j0) * kWideLd;
  float acc[2][kWideMix], sq[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int u = 0; u < kWideMix; ++u) acc[i][u] = 0.f;
  for (int k = 0; k < kMixChunk; k += 4) {
    float4 xv[2], fv[kWideMix];
#pragma unroll
    for (int i = 0; i < 2; ++i) xv[i] = *reinterpret_cast<const float4*>(x + i * 64 * kWideLd + k);
#pragma unroll
    for (int u = 0; u < kWideMix; ++u) fv[u] = *reinterpret_cast<const float4*>(f[u] + k);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int u = 0; u < kWideMix; ++u) {
        acc[i][u] = fmaf(xv[i].x, fv[u].x, acc[i][u]);
        acc[i][u] = fmaf(xv[i].y, fv[u].y, acc[i][u]);
        acc[i][u] = fmaf(xv[i].z, fv[u].z, acc[i][u]);
        acc[i][u] = fmaf(xv[i].w, fv[u].w, acc[i][u]);
      }
      if (kSquares) {
        sq[i] = fmaf(xv[i].x, xv[i].x, sq[i]);
        sq[i] = fmaf(xv[i].y, xv[i].y, sq[i]);
        sq[i] = fmaf(xv[i].z, xv[i].z, sq[i]);
        sq[i] = fmaf(xv[i].w, xv[i].w, sq[i]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int u = 0; u < kWideMix; ++u)
      if (u < nj) res[64 * i * (nmix + 1) + j0 + u] = acc[i][u];
    if (kSquares) res[64 * i * (nmix + 1) + nmix] = sq[i];
  }
}

__global__ void __launch_bounds__(kThreads)
    hc_mix_wide_kernel(const float* X, int64_t M, int64_t W, const float* fn, int nmix,
                       float* partial) {
  wait_for_prior_grid();
  extern __shared__ __align__(16) float sm[];
  const int srcs = kWideRows + nmix;  // staged rows: x's, then fn's
  const int64_t r0 = int64_t{blockIdx.x} * kWideRows;
  const int rows = static_cast<int>(M - r0 < kWideRows ? M - r0 : kWideRows);
  const int64_t nchunks = (W + kMixChunk - 1) / kMixChunk;
  auto src_row = [&](int r, int64_t c0) -> const float* {
    return r < kWideRows ? (r < rows ? X + (r0 + r) * W + c0 : nullptr)
                         : fn + (r - kWideRows) * W + c0;
  };
  const bool aligned = W % 4 == 0 && (reinterpret_cast<uintptr_t>(X) & 15) == 0 &&
                       (reinterpret_cast<uintptr_t>(fn) & 15) == 0;
  // Chunk c into the buffer: by cp.async (zeros for absent rows) when whole and aligned, else
  // by plain loads (a short last chunk, whose zeros past len keep the chains' length).
  auto stage = [&](int64_t c) {
    float* dst = sm;
    const int64_t c0 = c * kMixChunk;
    const int len = static_cast<int>(W - c0 < kMixChunk ? W - c0 : kMixChunk);
    if (aligned && len == kMixChunk) {
      constexpr int kPerRow = kMixChunk / 4;
      for (int i = threadIdx.x; i < srcs * kPerRow; i += kThreads) {
        const float* s = src_row(i / kPerRow, c0);
        cp_async16(dst + (i / kPerRow) * kWideLd + (i % kPerRow) * 4,
                   s ? static_cast<const void*>(s + (i % kPerRow) * 4) : fn, s != nullptr);
      }
    } else {
      for (int i = threadIdx.x; i < srcs * kMixChunk; i += kThreads) {
        const int r = i / kMixChunk, k = i % kMixChunk;
        const float* s = src_row(r, c0);
        dst[r * kWideLd + k] = s && k < len ? __ldg(s + k) : 0.f;
      }
    }
    cp_async_commit();
  };
  const int64_t row_stride = nchunks * (nmix + 1);
  const int mix_groups = (nmix + kWideMix - 1) / kWideMix, mix_tasks = 64 * mix_groups;
  for (int64_t c = blockIdx.y; c < nchunks; c += gridDim.y) {
    stage(c);
    cp_async_wait<0>();
    __syncthreads();                             // chunk c has landed (every thread's part)
    const float* xs = sm;                        // [kWideRows][kWideLd]
    const float* fs = xs + kWideRows * kWideLd;  // [nmix][kWideLd]
    float* res = sm + srcs * kWideLd;            // [kWideRows][nmix + 1]
    for (int t = threadIdx.x; t < mix_tasks; t += kThreads) {
      const int g = t % 64, j0 = (t / 64) * kWideMix;
      // The first fn group's tasks also sum their rows' squares (warp-uniform: a warp's tasks
      // share j0).
      if (j0 == 0)
        wide_mix_task<true>(xs + g * kWideLd, fs, nmix, j0, res + g * (nmix + 1));
      else
        wide_mix_task<false>(xs + g * kWideLd, fs, nmix, j0, res + g * (nmix + 1));
    }
    __syncthreads();  // res is complete
    const int per_row = nmix + 1;
    for (int i = threadIdx.x; i < rows * per_row; i += kThreads)
      partial[(r0 + i / per_row) * row_stride + c * per_row + i % per_row] = res[i];
    __syncthreads();  // the rows and res are read out: the next chunk may overwrite them
  }
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
  // too where the wide kernel's buffer would not fit (hc > 11).
  if (M <= 256 || mix_wide_smem(nmix) > static_cast<size_t>(kWideSmemCap))
    return launch_mix_shape<16, 4, 1>(X, M, W, fn, nmix, partial, chunks, stream);
  const int64_t tiles = (M + kWideRows - 1) / kWideRows;
  if (tiles > INT_MAX) return cudaErrorInvalidValue;
  static const cudaError_t attr = cudaFuncSetAttribute(
      hc_mix_wide_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kWideSmemCap);
  if (attr != cudaSuccess) return attr;
  // About two blocks per SM (two fit), each walking its share of the chunks: one block's rows
  // stream in while the other sums.
  const int64_t walkers =
      std::max<int64_t>(1, std::min<int64_t>(chunks, 2 * std::max(sms, 1) / tiles));
  return launch_kernel(hc_mix_wide_kernel,
                       dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(walkers)), kThreads,
                       mix_wide_smem(nmix), stream, X, M, W, fn, nmix, partial);
}

}  // namespace deepinfer::cuda
