// Mixture-of-experts kernels: the router (scores, bias, top-k or hash lookup, normalised
// weights) and the weighted combine of the experts' outputs.
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mxfp4.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxRouteK = 64;

__device__ __forceinline__ unsigned long long warp_max_u64(unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

// One block per token row. Scores live in shared memory (s, and s + bias when biased); the
// top-k runs as k rounds of a block-wide max over the total-order keys (k is small).
__global__ void route_kernel(const float* logits, int64_t E, int func, const float* bias,
                             const int32_t* tid2eid, int64_t V, const int32_t* ids, int k,
                             float routed_scale, float* weights, int32_t* idx, int32_t* err) {
  wait_for_prior_grid();
  extern __shared__ float sm[];  // s [E], biased [E]
  __shared__ float red[32];
  __shared__ unsigned long long redk[32];
  __shared__ int sel[kMaxRouteK];
  float* s = sm;
  float* sel_v = bias ? sm + E : sm;
  const int64_t m = blockIdx.x;
  const float* x = logits + m * E;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;

  if (func == 0) {
    float mx = neg_inf();
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) mx = fmaxf(mx, x[e]);
    mx = block_max(mx, red);
    float sum = 0.f;
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) sum += (s[e] = expf(x[e] - mx));
    sum = block_sum(sum, red);
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) s[e] /= sum;
  } else if (func == 1) {
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) s[e] = 1.f / (1.f + expf(-x[e]));
  } else {
    // softplus as torch computes it (threshold 20), then sqrt.
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
      s[e] = sqrtf(x[e] > 20.f ? x[e] : log1pf(expf(x[e])));
  }
  if (bias)
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) sel_v[e] = s[e] + bias[e];
  __syncthreads();

  if (tid2eid) {
    if (threadIdx.x == 0) {
      const int32_t id = ids[m];
      const bool id_ok = id >= 0 && id < V;
      if (!id_ok) flag_error(err, kErrRouteId);
      for (int j = 0; j < k; ++j) {
        const int32_t e = id_ok ? tid2eid[int64_t{id} * k + j] : -1;
        const bool ok = e >= 0 && e < E;
        if (id_ok && !ok) flag_error(err, kErrRouteExpert);
        sel[j] = ok ? e : -1;
      }
    }
  } else {
    for (int j = 0; j < k; ++j) {
      unsigned long long best = 0;
      for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
        bool taken = false;
        for (int t = 0; t < j; ++t) taken |= sel[t] == e;
        if (taken) continue;
        const unsigned long long key = topk_key(sel_v[e], e);
        best = key > best ? key : best;
      }
      best = warp_max_u64(best);
      if (lane == 0) redk[warp] = best;
      __syncthreads();
      if (threadIdx.x == 0) {
        unsigned long long b = 0;
        for (int w = 0; w < nw; ++w) b = redk[w] > b ? redk[w] : b;
        sel[j] = static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(b & 0xFFFFFFFFull));
      }
      __syncthreads();
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // Weights come from the unbiased scores, summed in slot order.
    float sum = 0.f;
    for (int j = 0; j < k; ++j) sum += sel[j] >= 0 ? s[sel[j]] : 0.f;
    const float mul = routed_scale / (sum + 1e-20f);
    for (int j = 0; j < k; ++j) {
      weights[m * k + j] = sel[j] >= 0 ? s[sel[j]] * mul : 0.f;
      idx[m * k + j] = sel[j];
    }
  }
}

// Inclusive prefix sums of a and b over the lanes of a warp (all 32 lanes call).
__device__ __forceinline__ void warp_inclusive_scan2(int32_t& a, int32_t& b) {
  const int lane = threadIdx.x & 31;
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t ua = __shfl_up_sync(0xffffffffu, a, o);
    const int32_t ub = __shfl_up_sync(0xffffffffu, b, o);
    if (lane >= o) {
      a += ua;
      b += ub;
    }
  }
}

// One block: counting sort of the R (token, slot) pairs by expert. Placement within an expert
// uses atomics (any order): every consumer computes a row independently of its neighbours.
__global__ void moe_plan_kernel(const int32_t* idx, int64_t R, int k, int64_t E, int tile_rows,
                                int32_t* offsets, int32_t* row_token, int32_t* where,
                                int32_t* tiles, int32_t* num_tiles, int32_t* err) {
  wait_for_prior_grid();
  extern __shared__ int32_t plan_smem[];  // count [E], cursor [E]
  int32_t* count = plan_smem;
  int32_t* cursor = plan_smem + E;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < R; i += blockDim.x) {
    const int32_t e = idx[i];
    if (e >= 0 && e < E)
      atomicAdd(&count[e], 1);
    else
      flag_error(err, kErrMoeExpert);
  }
  __syncthreads();
  // Offsets and tiles by a block-wide exclusive scan: thread t owns experts [t * per, ...).
  __shared__ int32_t warp_rows[32], warp_tiles[32];
  const int64_t per = (E + blockDim.x - 1) / blockDim.x, e0 = threadIdx.x * per;
  const int64_t e1 = e0 + per < E ? e0 + per : E;
  int32_t rows = 0, nt = 0;
  for (int64_t e = e0; e < e1; ++e) {
    rows += count[e];
    nt += (count[e] + tile_rows - 1) / tile_rows;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int32_t rows_in = rows, tiles_in = nt;  // inclusive scans within the warp
  warp_inclusive_scan2(rows_in, tiles_in);
  if (lane == 31) {
    warp_rows[warp] = rows_in;
    warp_tiles[warp] = tiles_in;
  }
  __syncthreads();
  if (warp == 0) {
    int32_t r = lane < nw ? warp_rows[lane] : 0, t = lane < nw ? warp_tiles[lane] : 0;
    warp_inclusive_scan2(r, t);
    if (lane < nw) {
      warp_rows[lane] = r;
      warp_tiles[lane] = t;
    }
  }
  __syncthreads();
  int32_t run = rows_in - rows + (warp > 0 ? warp_rows[warp - 1] : 0);
  int32_t tile = tiles_in - nt + (warp > 0 ? warp_tiles[warp - 1] : 0);
  for (int64_t e = e0; e < e1; ++e) {
    offsets[e] = run;
    cursor[e] = run;
    for (int32_t r = run; r < run + count[e]; r += tile_rows) {
      tiles[2 * tile] = static_cast<int32_t>(e);
      tiles[2 * tile + 1] = r;
      ++tile;
    }
    run += count[e];
  }
  if (threadIdx.x == blockDim.x - 1) {
    offsets[E] = run;
    *num_tiles = tile;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < R; i += blockDim.x) {
    const int32_t e = idx[i];
    int32_t r = -1;
    if (e >= 0 && e < E) {
      r = atomicAdd(&cursor[e], 1);
      row_token[r] = static_cast<int32_t>(i / k);
    }
    where[i] = r;
  }
}

// out[m, d] += sum_j weights[m, j] * y[where[m, j], d], slots in order (deterministic); pairs
// with where < 0 (an invalid expert, already flagged) add nothing.
__global__ void combine_kernel(const float* y, const int32_t* where, const float* w, int64_t M,
                               int64_t k, int64_t D, float* out) {
  wait_for_prior_grid();
  const int64_t total = M * D;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = t / D, d = t % D;
    float o = out[t];
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = where[m * k + j];
      if (r >= 0) o = __fmaf_rn(w[m * k + j], y[r * D + d], o);
    }
    out[t] = o;
  }
}

// The same, 4 columns per thread (D % 4 == 0, 16-byte aligned rows): a quarter of the where /
// weight loads and 16-byte accesses; each output's sum is the same chain.
__global__ void combine4_kernel(const float* y, const int32_t* where, const float* w, int64_t M,
                                int64_t k, int64_t D, float* out) {
  wait_for_prior_grid();
  const int64_t D4 = D / 4, total = M * D4;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = t / D4, d = (t % D4) * 4;
    float4* o = reinterpret_cast<float4*>(out + m * D + d);
    *o = moe_combine4(*o, y, where, w, m, k, D, d);
  }
}

// One thread a 32-byte k tile: the checkpoint's order in, the resident order (mxfp4.cuh) out.
__global__ void mxfp4_resident_order_kernel(uint8_t* data, int64_t tiles) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tiles) return;
  uint4* p = reinterpret_cast<uint4*>(data + i * 32);
  const uint4 v[2] = {p[0], p[1]};
  uint8_t tile[32];
  memcpy(tile, v, 32);
  uint32_t out[8];
#pragma unroll
  for (int w = 0; w < 8; ++w) out[w] = mxfp4_resident_word(tile, w);
  p[0] = make_uint4(out[0], out[1], out[2], out[3]);
  p[1] = make_uint4(out[4], out[5], out[6], out[7]);
}

}  // namespace

cudaError_t launch_route(const float* logits, int64_t M, int64_t E, int func, const float* bias,
                         const int32_t* tid2eid, int64_t V, const int32_t* ids, int k,
                         float routed_scale, float* weights, int32_t* idx, int32_t* err,
                         cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if (k > kMaxRouteK || M > 0x7fffffff) return cudaErrorInvalidValue;
  const size_t smem = static_cast<size_t>(bias ? 2 : 1) * E * sizeof(float);
  if (smem > 48 * 1024) return cudaErrorInvalidValue;
  return launch_kernel(route_kernel, static_cast<unsigned>(M), kThreads, smem, stream, logits, E,
                       func, bias, tid2eid, V, ids, k, routed_scale, weights, idx, err);
}

cudaError_t launch_moe_plan(const int32_t* idx, int64_t R, int k, int64_t E, int tile_rows,
                            int32_t* offsets, int32_t* row_token, int32_t* where, int32_t* tiles,
                            int32_t* num_tiles, int32_t* err, cudaStream_t stream) {
  if (E <= 0 || E > kMaxPlanExperts || k <= 0 || tile_rows <= 0) return cudaErrorInvalidValue;
  return launch_kernel(moe_plan_kernel, 1, 1024, static_cast<size_t>(2 * E) * sizeof(int32_t),
                       stream, idx, R, k, E, tile_rows, offsets, row_token, where, tiles, num_tiles,
                       err);
}

cudaError_t launch_moe_combine(const float* y, const int32_t* where, const float* weights,
                               int64_t M, int64_t k, int64_t D, float* out, cudaStream_t stream) {
  const int64_t total = M * D;
  if (total <= 0 || k <= 0) return cudaSuccess;
  if (D % 4 == 0 && aligned16(y) && aligned16(out)) {
    const int64_t quads = total / 4;
    const int64_t capped = quads < (int64_t{1} << 24) ? quads : (int64_t{1} << 24);
    return launch_kernel(combine4_kernel, blocks_for(capped, kThreads), kThreads, 0, stream, y,
                         where, weights, M, k, D, out);
  }
  const int64_t capped = total < (int64_t{1} << 24) ? total : (int64_t{1} << 24);
  return launch_kernel(combine_kernel, blocks_for(capped, kThreads), kThreads, 0, stream, y, where,
                       weights, M, k, D, out);
}

cudaError_t launch_mxfp4_resident_order(uint8_t* data, int64_t tiles, cudaStream_t stream) {
  if (tiles <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  return launch_kernel(mxfp4_resident_order_kernel,
                       dim3(static_cast<unsigned>((tiles + kThreads - 1) / kThreads)),
                       dim3(kThreads), 0, stream, data, tiles);
}

}  // namespace deepinfer::cuda
