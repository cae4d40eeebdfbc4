// Attention-side kernels: window_pool, comp_idx deduplication, the lightning indexer's head sum
// and a radix-select top-k (the attention itself is in kernels_flash_attention.cu).

#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kThreads = 256;

// The gate of slot s of a window's channel (g and bias at that channel): plus the slot's position
// bias where there is one.
__device__ __forceinline__ float slot_gate(const float* g, const float* bias, int64_t s,
                                           int64_t d) {
  return bias ? g[s * d] + __ldg(bias + s * d) : g[s * d];
}

// One thread per (n, channel): softmax over the S slots of gate (+ slot_bias, nullable), applied
// to kv. A channel whose slots are all -inf has no weights and gets 0.
__global__ void window_pool_kernel(const float* kv, const float* gate, const float* slot_bias,
                                   int64_t N, int64_t S, int64_t d, float* out) {
  wait_for_prior_grid();
  const int64_t total = N * d;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = t / d, c = t % d;
    const float* g = gate + n * S * d + c;
    const float* x = kv + n * S * d + c;
    const float* bias = slot_bias ? slot_bias + c : nullptr;
    float mx = neg_inf();
    for (int64_t s = 0; s < S; ++s) mx = fmaxf(mx, slot_gate(g, bias, s, d));
    if (mx == neg_inf()) {
      out[t] = 0.f;
      continue;
    }
    float den = 0.f, o = 0.f;
    for (int64_t s = 0; s < S; ++s) {
      const float w = expf(slot_gate(g, bias, s, d) - mx);
      den += w;
      o += w * x[s * d];
    }
    out[t] = o / den;
  }
}

// Appends, in row order, the entries of idx positions [j0, j0 + blockDim) whose `keep` is set
// to list (one ballot-prefix round of the block; base is the running count).
__device__ void compact_round(bool keep, int32_t v, int32_t* list, int* warp_counts, int* base) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const unsigned bal = __ballot_sync(0xffffffffu, keep);
  if (lane == 0) warp_counts[warp] = __popc(bal);
  __syncthreads();
  int offset = *base + __popc(bal & ((1u << lane) - 1u));
  for (int w = 0; w < warp; ++w) offset += warp_counts[w];
  if (keep) list[offset] = v;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 0; w < nw; ++w) *base += warp_counts[w];
  __syncthreads();
}

// dedup with a first-occurrence table over the entries (E <= kDedupTableEntries): each idx
// position posts itself with atomicMin on its entry's slot and is kept if it is the first; O(K +
// E) per row instead of the pairwise scan's O(K^2) (25 us for one 512-wide decode row).
constexpr int64_t kDedupTableEntries = 40 * 1024;

__global__ void dedup_table_kernel(const AttnRow* rows, int64_t Kmax, int32_t* list, int32_t* count,
                                   int32_t* err) {
  wait_for_prior_grid();
  extern __shared__ int32_t first[];  // [E]
  __shared__ int warp_counts[32];
  __shared__ int base;
  const int64_t m = blockIdx.x;
  const AttnRow r = rows[m];
  const int64_t K = r.idx ? r.K : 0, E = r.E;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) first[e] = 0x7fffffff;
  if (threadIdx.x == 0) base = 0;
  __syncthreads();
  for (int64_t j = threadIdx.x; j < K; j += blockDim.x) {
    const int32_t v = r.idx[j];
    if (v >= E) flag_error(err, kErrAttentionIdx);
    if (v >= 0 && v < E) atomicMin(&first[v], static_cast<int32_t>(j));
  }
  __syncthreads();
  for (int64_t j0 = 0; j0 < K; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    const int32_t v = j < K ? r.idx[j] : -1;
    const bool keep = v >= 0 && v < E && first[v] == j;
    compact_round(keep, v, list + m * Kmax, warp_counts, &base);
  }
  if (threadIdx.x == 0) count[m] = base;
}

// One block per query row: keeps the first occurrence of each entry >= 0 (duplicates count once,
// like the reference's mask), in row order, so the attention's summation order is deterministic.
// Pairwise scan, for rows whose entries do not fit dedup_table_kernel's table.
__global__ void dedup_kernel(const AttnRow* rows, int64_t Kmax, bool staged, int32_t* list,
                             int32_t* count, int32_t* err) {
  wait_for_prior_grid();
  extern __shared__ int32_t row_s[];
  __shared__ int warp_counts[32];
  __shared__ int base;
  const int64_t m = blockIdx.x;
  const AttnRow r = rows[m];
  const int64_t K = r.idx ? r.K : 0, E = r.E;
  const int32_t* row = r.idx;
  if (staged) {
    for (int64_t j = threadIdx.x; j < K; j += blockDim.x) row_s[j] = row[j];
    row = row_s;
  }
  if (threadIdx.x == 0) base = 0;
  __syncthreads();
  for (int64_t j0 = 0; j0 < K; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    bool keep = false;
    int32_t v = -1;
    if (j < K) {
      v = row[j];
      if (v >= E) flag_error(err, kErrAttentionIdx);
      keep = v >= 0 && v < E;
      for (int64_t i = 0; keep && i < j; ++i) keep = row[i] != v;
    }
    compact_round(keep, v, list + m * Kmax, warp_counts, &base);
  }
  if (threadIdx.x == 0) count[m] = base;
}

// One thread per (query m, entry e): the weighted sum over heads of the rectified per-head dot
// products dots[m, h, e] (heads in order); entries past visible[m] get -inf.
__global__ void indexer_reduce_kernel(const float* dots, int64_t M, int64_t nh, int64_t E,
                                      const float* w, float scale, const int32_t* visible,
                                      float* scores, int32_t* err) {
  wait_for_prior_grid();
  const int64_t total = M * E;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = t / E, e = t % E;
    int64_t vis = visible[m];
    if (vis < 0 || vis > E) {
      if (e == 0) flag_error(err, kErrIndexerVisible);
      vis = vis < 0 ? 0 : E;
    }
    if (e >= vis) {
      scores[t] = neg_inf();
      continue;
    }
    float sum = 0.f;
    for (int64_t h = 0; h < nh; ++h) sum += w[m * nh + h] * fmaxf(dots[(m * nh + h) * E + e], 0.f);
    scores[t] = sum * scale;
  }
}

// indexer_scores_batch: block (row r, 32 entries). q's row [nh, d] and the entries' keys are
// staged in shared memory (q rows padded by one float: lanes read different heads at the same
// dim without bank conflicts); warp w scores entries 4w .. 4w+3, its lanes taking heads
// lane, lane + 32, ..., then a warp sum over the heads.
constexpr int kIdxEntries = 32;
constexpr int kIdxThreads = 256;

__global__ void indexer_rows_kernel(const float* q, int64_t nh, int64_t d, const float* w,
                                    const int32_t* visible, const IndexerRow* rows, int64_t N,
                                    float scale, float* scores, int32_t* err) {
  wait_for_prior_grid();
  extern __shared__ float sm[];
  const IndexerRow row = rows[blockIdx.x];
  const int64_t e0 = int64_t{blockIdx.y} * kIdxEntries;
  float* out = scores + int64_t{blockIdx.x} * N;
  int64_t vis = visible[row.q_row];
  if (vis < 0 || vis > row.E) {
    if (blockIdx.y == 0 && threadIdx.x == 0) flag_error(err, kErrIndexerVisible);
    vis = vis < 0 ? 0 : row.E;
  }
  const int64_t live = vis - e0 < kIdxEntries ? (vis - e0 > 0 ? vis - e0 : 0) : kIdxEntries;
  for (int64_t e = e0 + live + threadIdx.x; e < e0 + kIdxEntries && e < N; e += blockDim.x)
    out[e] = neg_inf();
  if (live == 0) return;
  const int64_t dq = d + 1;
  float* qs = sm;                    // [nh][d + 1]
  float* ks = qs + nh * dq;          // [32][d]
  float* ws = ks + kIdxEntries * d;  // [nh]
  const float* qrow = q + row.q_row * nh * d;
  stage_rows<8>(qrow, nh * d, qs, [&](int64_t i) { return (i / d) * dq + i % d; });
  stage_rows<8>(row.k + e0 * d, live * d, ks, [](int64_t i) { return i; });
  for (int64_t h = threadIdx.x; h < nh; h += blockDim.x) ws[h] = w[row.q_row * nh + h];
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int j = warp * 4; j < warp * 4 + 4 && j < live; ++j) {
    const float* kj = ks + j * d;
    float sum = 0.f;
    for (int64_t h = lane; h < nh; h += 32) {
      const float* qh = qs + h * dq;
      float dot = 0.f;
      for (int64_t i = 0; i < d; ++i) dot = fmaf(qh[i], kj[i], dot);
      sum += ws[h] * fmaxf(dot, 0.f);
    }
    sum = warp_sum(sum);
    if (lane == 0) out[e0 + j] = sum * scale;
  }
}

constexpr int kTopkThreads = 512;
// Rows up to this many columns are staged in shared memory as 32-bit keys.
constexpr int64_t kTopkStageMax = 32768;

// The value part of topk_key: larger = earlier, NaN lowest.
__device__ __forceinline__ uint32_t topk_value_key(float v) {
  return static_cast<uint32_t>(topk_key(v, 0) >> 32);
}

// One block per row: an MSB-first radix select over the 32-bit value keys (8 bits a pass) finds
// the k-th largest value T and how many of the entries equal to T belong to the top k (the
// lowest indices first); the k keys are gathered and bitonic-sorted in shared memory.
__global__ void __launch_bounds__(kTopkThreads)
    topk_kernel(const float* scores, int64_t N, int k, int P, bool staged, int32_t* idx) {
  wait_for_prior_grid();
  // [P] (twice for a sort in registers), then the staged row [N] (uint32)
  extern __shared__ unsigned long long buf[];
  uint32_t* vals = reinterpret_cast<uint32_t*>(buf + (P <= kTopkThreads ? 2 * P : P));
  __shared__ unsigned hist[256];
  __shared__ uint32_t s_prefix, s_mask;
  __shared__ int s_need, s_count, s_equal;
  __shared__ int warp_counts[kTopkThreads / 32];
  const float* row = scores + blockIdx.x * N;
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_mask = 0;
    s_need = k;
    s_count = 0;
    s_equal = 0;
  }
  if (staged)
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) vals[i] = topk_value_key(row[i]);
  __syncthreads();
  auto key_of = [&](int64_t i) { return staged ? vals[i] : topk_value_key(row[i]); };
  auto full_key = [&](int64_t i, uint32_t v) {
    return (static_cast<unsigned long long>(v) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(i));
  };
  if (k >= N) {  // every entry
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) buf[i] = full_key(i, key_of(i));
  } else {
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
      __syncthreads();
      const uint32_t prefix = s_prefix, mask = s_mask;
      for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
        const uint32_t key = key_of(i);
        if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
      }
      __syncthreads();
      // Warp 0 finds the bin holding the s_need-th largest key: each lane sums 8 bins (from
      // the top), a prefix over lanes locates the lane, that lane walks its 8 bins.
      if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        unsigned c[8], lsum = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          c[i] = hist[255 - lane * 8 - i];
          lsum += c[i];
        }
        unsigned incl = lsum;
        for (int o = 1; o < 32; o <<= 1) {
          const unsigned v = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= o) incl += v;
        }
        const unsigned excl = incl - lsum, need = static_cast<unsigned>(s_need);
        const unsigned here = __ballot_sync(0xffffffffu, excl < need && incl >= need);
        if (lane == __ffs(here) - 1) {
          unsigned cum = excl;
          for (int i = 0; i < 8; ++i) {
            if (cum + c[i] >= need) {
              s_prefix |= static_cast<uint32_t>(255 - lane * 8 - i) << shift;
              s_need -= static_cast<int>(cum);
              s_equal = static_cast<int>(c[i]);  // entries in the bin (after the last pass: == T)
              break;
            }
            cum += c[i];
          }
        }
        if (lane == 0) s_mask |= 255u << shift;
      }
      __syncthreads();
    }
    // Entries above T all belong; of those equal to T, the s_need lowest indices (all of them
    // when that is every one, the usual case; else in index order, a ballot prefix a round).
    const uint32_t T = s_prefix;
    const int need = s_need;
    const bool all_equal = s_equal == need;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const uint32_t key = key_of(i);
      if (key > T || (all_equal && key == T)) buf[atomicAdd(&s_count, 1)] = full_key(i, key);
    }
    if (!all_equal) {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      int taken = 0;  // equal entries taken by earlier rounds (the same in every thread)
      for (int64_t i0 = 0; i0 < N && taken < need; i0 += blockDim.x) {
        const int64_t i = i0 + threadIdx.x;
        const bool eq = i < N && key_of(i) == T;
        const unsigned bal = __ballot_sync(0xffffffffu, eq);
        if (lane == 0) warp_counts[warp] = __popc(bal);
        __syncthreads();
        int rank = taken + __popc(bal & ((1u << lane) - 1u));
        for (int w = 0; w < warp; ++w) rank += warp_counts[w];
        if (eq && rank < need) buf[atomicAdd(&s_count, 1)] = full_key(i, T);
        for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) taken += warp_counts[w];
        __syncthreads();
      }
    }
  }
  for (int p = k + threadIdx.x; p < P; p += blockDim.x) buf[p] = 0;
  __syncthreads();
  if (P <= kTopkThreads) {
    // One key per thread, the same bitonic network in registers: strides below 32 by warp
    // shuffles, the others through shared memory (alternating buffers, one barrier a stage), so
    // the same order. The shared-memory network spent ~12k cycles of a 1024-entry call's ~19k
    // in its 45 stages (a barrier or warp sync and a dependent load-compare-store each).
    const int t = threadIdx.x;
    unsigned long long key = t < P ? buf[t] : 0;
    unsigned long long* const bufs[2] = {buf, buf + P};
    int flip = 0;
    for (int size = 2; size <= P; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        unsigned long long other;
        if (stride < 32) {
          other = __shfl_xor_sync(0xffffffffu, key, stride);
        } else {
          unsigned long long* b = bufs[flip];
          flip ^= 1;
          if (t < P) b[t] = key;
          __syncthreads();
          other = t < P ? b[t ^ stride] : 0;
        }
        // The pair (i, i + stride) leaves (max, min) where it sorts descending ((i & size) ==
        // 0), else (min, max).
        const bool lower = (t & stride) == 0, desc = ((t & ~stride) & size) == 0;
        const bool take_max = lower == desc;
        key = take_max == (key > other) ? key : other;
      }
    }
    if (t < k) {
      const int64_t i = 0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFull);
      idx[blockIdx.x * int64_t{k} + t] = row[i] > neg_inf() ? static_cast<int32_t>(i) : -1;
    }
    return;
  }
  // Bitonic sort. Pair t of a stage is (i, i + stride), i = t's position with a zero bit
  // inserted at stride (powers of two: masks, not divisions). Below stride 64 the pairs 32 c ..
  // 32 c + 31 stay inside entries 64 c .. 64 c + 63, and a thread takes the same pairs in every
  // stage, so between two such stages each warp needs only itself in step, not the block.
  for (int size = 2; size <= P; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < P / 2; t += blockDim.x) {
        const int i = ((t & ~(stride - 1)) << 1) | (t & (stride - 1)), j = i + stride;
        const unsigned long long a = buf[i], b = buf[j];
        const bool desc = (i & size) == 0;
        if (desc ? a < b : a > b) {
          buf[i] = b;
          buf[j] = a;
        }
      }
      // (The next size's first stride is this size; after the last stage every thread reads.)
      const int next = stride > 1 ? stride >> 1 : size;
      if (stride < 64 && next < 64 && !(stride == 1 && size == P))
        __syncwarp();
      else
        __syncthreads();
    }
  }
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const int64_t i = 0xFFFFFFFFu - static_cast<uint32_t>(buf[j] & 0xFFFFFFFFull);
    // -inf (and NaN) mark entries that may not be picked.
    idx[blockIdx.x * int64_t{k} + j] = row[i] > neg_inf() ? static_cast<int32_t>(i) : -1;
  }
}

}  // namespace

cudaError_t launch_window_pool(const float* kv, const float* gate, const float* slot_bias,
                               int64_t N, int64_t S, int64_t d, float* out, cudaStream_t stream) {
  const int64_t total = N * d;
  if (total <= 0) return cudaSuccess;
  const int64_t capped = total < (int64_t{1} << 24) ? total : (int64_t{1} << 24);
  return launch_kernel(window_pool_kernel, blocks_for(capped, kThreads), kThreads, 0, stream, kv,
                       gate, slot_bias, N, S, d, out);
}

cudaError_t launch_dedup_idx(const AttnRow* rows, int64_t M, int64_t Kmax, int64_t Emax,
                             int32_t* list, int32_t* count, int32_t* err, cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if (M > 0x7fffffff) return cudaErrorInvalidValue;
  if (Emax <= kDedupTableEntries) {
    static const cudaError_t attr =
        cudaFuncSetAttribute(dedup_table_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kDedupTableEntries * sizeof(int32_t)));
    if (attr != cudaSuccess) return attr;
    return launch_kernel(dedup_table_kernel, static_cast<unsigned>(M), kThreads,
                         static_cast<size_t>(Emax > 0 ? Emax : 1) * sizeof(int32_t), stream, rows,
                         Kmax, list, count, err);
  }
  const bool staged = Kmax * sizeof(int32_t) <= 32 * 1024;
  return launch_kernel(dedup_kernel, static_cast<unsigned>(M), kThreads,
                       staged ? Kmax * sizeof(int32_t) : 0, stream, rows, Kmax, staged, list, count,
                       err);
}

cudaError_t launch_indexer_reduce(const float* dots, int64_t M, int64_t nh, int64_t E,
                                  const float* w, float scale, const int32_t* visible,
                                  float* scores, int32_t* err, cudaStream_t stream) {
  const int64_t total = M * E;
  if (total <= 0) return cudaSuccess;
  const int64_t capped = total < (int64_t{1} << 24) ? total : (int64_t{1} << 24);
  return launch_kernel(indexer_reduce_kernel, blocks_for(capped, kThreads), kThreads, 0, stream,
                       dots, M, nh, E, w, scale, visible, scores, err);
}

int64_t indexer_rows_smem(int64_t nh, int64_t d) {
  return (nh * (d + 1) + kIdxEntries * d + nh) * static_cast<int64_t>(sizeof(float));
}

cudaError_t launch_indexer_rows(const float* q, int64_t nh, int64_t d, const float* w,
                                const int32_t* visible, const IndexerRow* rows, int64_t R,
                                int64_t N, float scale, float* scores, int32_t* err,
                                cudaStream_t stream) {
  if (R <= 0 || N <= 0) return cudaSuccess;
  const int64_t tiles = (N + kIdxEntries - 1) / kIdxEntries;
  const int64_t smem = indexer_rows_smem(nh, d);
  if (R > 0x7fffffff || tiles > 65535 || smem > 200 * 1024) return cudaErrorInvalidValue;
  static const cudaError_t attr = cudaFuncSetAttribute(
      indexer_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  if (attr != cudaSuccess) return attr;
  return launch_kernel(indexer_rows_kernel,
                       dim3(static_cast<unsigned>(R), static_cast<unsigned>(tiles)), kIdxThreads,
                       static_cast<size_t>(smem), stream, q, nh, d, w, visible, rows, N, scale,
                       scores, err);
}

cudaError_t launch_topk(const float* scores, int64_t M, int64_t N, int k, int32_t* idx,
                        cudaStream_t stream) {
  if (M <= 0 || k <= 0) return cudaSuccess;
  if (k > kMaxTopk || N > 0xFFFFFFFFll || M > 0x7fffffff) return cudaErrorInvalidValue;
  int P = 1;
  while (P < k) P <<= 1;
  // Sorts of up to a key per thread take a second buffer (topk_kernel).
  const size_t sort_bytes = P * sizeof(unsigned long long) * (P <= kTopkThreads ? 2 : 1);
  const bool staged = N <= kTopkStageMax;
  const size_t bytes = sort_bytes + (staged ? static_cast<size_t>(N) * sizeof(uint32_t) : 0);
  static const cudaError_t attr = cudaFuncSetAttribute(
      topk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(kMaxTopk * sizeof(unsigned long long) + kTopkStageMax * sizeof(uint32_t)));
  if (attr != cudaSuccess) return attr;
  return launch_kernel(topk_kernel, static_cast<unsigned>(M), kTopkThreads, bytes, stream, scores,
                       N, k, P, staged, idx);
}

}  // namespace deepinfer::cuda
