// Device sampling (sampler_kernels.h): the CPU sampler's algorithm (sampler.h) as a parallel
// radix selection, one block per row.
//
// Every cut of a random row (top_k, top_p, the draw) is a crossing in the order (p desc, id asc):
// the first token whose running count or running weight exceeds a target. Weights are integers,
// so running sums are exact and equal to the CPU's whatever the summation order. Per row:
//   1. argmax pass: greedy rows end here; otherwise zmax = max / t.
//   2. level-1 histogram pass over the candidates (select_common.h): count and weight per bucket,
//      then suffix sums, so each bucket's running count / weight before it is known.
//   3. gather pass: the longest run of top buckets holding <= kGather tokens is copied to shared
//      memory and sorted; a crossing inside it is a lookup in its running weights.
//   4. a crossing beyond it descends: one histogram pass for level 2, one for level 3 (the exact p
//      then known), and one ordered pass over the row for the nth id among tokens of that p.
#include <mutex>

#include "sampling/cuda/sampler_kernels.h"
#include "sampling/cuda/select_common.h"

namespace deepinfer::sampling::cuda {

namespace {

using u64 = unsigned long long;  // the type of the 64-bit atomicAdd / shuffle overloads

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;
constexpr u64 kNone = ~0ull;
static_assert(kL1Buckets % kThreads == 0 && kL2Buckets % kThreads == 0 && kGather % kThreads == 0 &&
              kWarps == 32);

// Dynamic shared memory of sample_rows_kernel (about 93 KiB).
struct Smem {
  u64 w1[kL1Buckets];  // level 1: weight per bucket, then suffix sums
  u64 w2[kL2Buckets];  // levels 2 and 3 of a descending crossing
  u64 gkey[kGather];   // the gathered top prefix, keys sorted descending
  u64 gcum[kGather];   // ... and its inclusive running weights
  uint32_t c1[kL1Buckets];
  uint32_t c2[kL2Buckets];
  u64 scan_w[kWarps];
  uint32_t scan_c[kWarps];
  float arg_v[kWarps];
  int32_t arg_i[kWarps];
  u64 bcast;  // one thread writes, all read: always write; sync; read; sync
  uint32_t gcount;
};

struct Row {
  const float* x;
  int64_t V;
  RowMath m;
};

__device__ __forceinline__ float neg_inf() {
  return __int_as_float(0xff800000);
}

// Calls f(i, x[i]) for the indices of the row this thread owns: float4 loads when the row is
// 16-byte aligned (more loads in flight per thread), the tail one by one.
template <class F>
__device__ __forceinline__ void for_each_x(const float* x, int64_t V, F&& f) {
  int64_t done = 0;
  if ((reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    const auto* x4 = reinterpret_cast<const float4*>(x);
    done = V / 4 * 4;
    for (int64_t j = threadIdx.x; j < V / 4; j += kThreads) {
      const float4 v = x4[j];
      f(4 * j, v.x);
      f(4 * j + 1, v.y);
      f(4 * j + 2, v.z);
      f(4 * j + 3, v.w);
    }
  }
  for (int64_t i = done + threadIdx.x; i < V; i += kThreads) f(i, x[i]);
}

// Argmax over non-NaN values, ties -> lowest index; value -inf (index INT32_MAX) when none is
// above -inf. Every thread gets the result.
__device__ void row_argmax(const float* x, int64_t V, Smem& s, float& best_v, int32_t& best_i) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float v = neg_inf();
  int32_t vi = INT32_MAX;
  for_each_x(x, V, [&](int64_t i, float xi) {
    if (xi > v || (xi == v && i < vi)) {  // NaN never wins
      v = xi;
      vi = static_cast<int32_t>(i);
    }
  });
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_down_sync(kFull, v, o);
    const int32_t oi = __shfl_down_sync(kFull, vi, o);
    if (ov > v || (ov == v && oi < vi)) v = ov, vi = oi;
  }
  if (lane == 0) s.arg_v[warp] = v, s.arg_i[warp] = vi;
  __syncthreads();
  v = s.arg_v[lane];
  vi = s.arg_i[lane];
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_down_sync(kFull, v, o);
    const int32_t oi = __shfl_down_sync(kFull, vi, o);
    if (ov > v || (ov == v && oi < vi)) v = ov, vi = oi;
  }
  best_v = __shfl_sync(kFull, v, 0);  // every warp reduced the same 32 values
  best_i = __shfl_sync(kFull, vi, 0);
  __syncthreads();  // arg_v / arg_i are free again
}

// Exclusive scan of (c, w) over the block, in thread order.
__device__ void block_exclusive_scan(uint32_t c, u64 w, uint32_t& oc, u64& ow, Smem& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t ic = c;
  u64 iw = w;
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t tc = __shfl_up_sync(kFull, ic, o);
    const u64 tw = __shfl_up_sync(kFull, iw, o);
    if (lane >= o) ic += tc, iw += tw;
  }
  __syncthreads();  // a previous scan may still read scan_c / scan_w
  if (lane == 31) s.scan_c[warp] = ic, s.scan_w[warp] = iw;
  __syncthreads();
  if (warp == 0) {
    const uint32_t c0 = s.scan_c[lane];
    const u64 w0 = s.scan_w[lane];
    uint32_t vc = c0;
    u64 vw = w0;
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t tc = __shfl_up_sync(kFull, vc, o);
      const u64 tw = __shfl_up_sync(kFull, vw, o);
      if (lane >= o) vc += tc, vw += tw;
    }
    s.scan_c[lane] = vc - c0;  // each lane reads and writes only its own slot
    s.scan_w[lane] = vw - w0;
  }
  __syncthreads();
  oc = s.scan_c[warp] + ic - c;
  ow = s.scan_w[warp] + iw - w;
}

// In place: c[b] = sum of c[b'] for b' >= b (and w alike), over E * kThreads buckets.
template <int E>
__device__ void suffix_sums(uint32_t* c, u64* w, Smem& s) {
  constexpr int n = E * kThreads;
  uint32_t lc[E];
  u64 lw[E];
  uint32_t sc = 0;
  u64 sw = 0;
  for (int e = 0; e < E; ++e) {  // this thread's buckets, from the top down
    const int b = n - 1 - (static_cast<int>(threadIdx.x) * E + e);
    sc += c[b];
    sw += w[b];
    lc[e] = sc;
    lw[e] = sw;
  }
  uint32_t oc;
  u64 ow;
  block_exclusive_scan(sc, sw, oc, ow, s);
  for (int e = 0; e < E; ++e) {
    const int b = n - 1 - (static_cast<int>(threadIdx.x) * E + e);
    c[b] = oc + lc[e];
    w[b] = ow + lw[e];
  }
  __syncthreads();
}

// Count and weight of the candidates with bits in [lo, hi], per bucket ((bits - kPMinBits) >>
// shift) & mask, over n buckets (zeroed first).
__device__ void histogram(const Row& r, uint32_t* c, u64* w, int n, uint32_t lo, uint32_t hi,
                          int shift, uint32_t mask) {
  for (int b = threadIdx.x; b < n; b += kThreads) c[b] = 0, w[b] = 0;
  __syncthreads();
  const DRange range = d_range(lo, hi);
  for_each_x(r.x, r.V, [&](int64_t, float xi) {
    const uint32_t pb = candidate_bits(xi, r.m, range);
    if (pb >= lo && pb <= hi) {  // pb = 0 (not a candidate) is below lo
      const uint32_t b = ((pb - kPMinBits) >> shift) & mask;
      atomicAdd(&c[b], 1u);
      atomicAdd(&w[b], static_cast<u64>(weight_of_bits(pb)));
    }
  });
  __syncthreads();
}

// The bucket of suffix sums (c, w) where the running count (by_count) or weight crosses t: the
// unique b with S[b] > t >= S[b + 1]. b < 0 when S[0] <= t (a bug). Also the sums before it.
struct Pick {
  int b;
  u64 c_before;
  u64 w_before;
};
__device__ Pick pick_bucket(const uint32_t* c, const u64* w, int n, bool by_count, u64 t, Smem& s) {
  if (threadIdx.x == 0) s.bcast = kNone;
  __syncthreads();
  for (int b = threadIdx.x; b < n; b += kThreads) {
    const u64 at = by_count ? c[b] : w[b];
    const u64 after = b + 1 < n ? (by_count ? c[b + 1] : w[b + 1]) : 0;
    if (at > t && after <= t) s.bcast = static_cast<u64>(b);
  }
  __syncthreads();
  Pick p{-1, 0, 0};
  if (s.bcast != kNone) {
    p.b = static_cast<int>(s.bcast);
    if (p.b + 1 < n) p.c_before = c[p.b + 1], p.w_before = w[p.b + 1];
  }
  __syncthreads();
  return p;
}

// Bitonic sort of key[0, P) descending, P a power of two.
__device__ void sort_desc(u64* key, int P) {
  for (int k = 2; k <= P; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < P; i += kThreads) {
        const int l = i ^ j;
        if (l > i) {  // each pair is handled once, by its lower index
          const u64 a = key[i], b = key[l];
          if ((i & k) == 0 ? a < b : a > b) key[i] = b, key[l] = a;
        }
      }
      __syncthreads();
    }
  }
}

// Step 3: gathers the top buckets into gkey / gcum; returns how many tokens they hold (0: even
// the top bucket is too large). `ok` turns false if the gather disagrees with the histogram.
__device__ uint32_t gather_top(const Row& r, Smem& s, bool& ok) {
  // Suffix counts fall as b rises and c1[last] = 0, so exactly one b is the lowest that fits.
  for (int b = threadIdx.x; b < kL1Buckets; b += kThreads)
    if (s.c1[b] <= kGather && (b == 0 || s.c1[b - 1] > kGather)) s.bcast = static_cast<u64>(b);
  if (threadIdx.x == 0) s.gcount = 0;
  __syncthreads();
  const auto cut = static_cast<uint32_t>(s.bcast);
  const uint32_t n = s.c1[cut];
  __syncthreads();
  if (n == 0) return 0;
  const uint32_t lo = kPMinBits + (cut << kL1Shift);
  const DRange range = d_range(lo, kPOneBits);
  for_each_x(r.x, r.V, [&](int64_t i, float xi) {
    const uint32_t pb = candidate_bits(xi, r.m, range);
    if (pb >= lo) {
      const uint32_t slot = atomicAdd(&s.gcount, 1u);
      if (slot < kGather) s.gkey[slot] = order_key(pb, static_cast<uint32_t>(i));
    }
  });
  int P = 1;
  while (P < static_cast<int>(n)) P <<= 1;
  __syncthreads();
  ok = ok && s.gcount == n;
  for (int j = n + threadIdx.x; j < P; j += kThreads) s.gkey[j] = 0;  // pads sort last
  __syncthreads();
  sort_desc(s.gkey, P);
  // Inclusive running weights, kPerThread consecutive keys per thread.
  constexpr int kPerThread = kGather / kThreads;
  u64 run[kPerThread];
  u64 sum = 0;
  for (int e = 0; e < kPerThread; ++e) {
    const int i = kPerThread * threadIdx.x + e;
    sum += i < static_cast<int>(n) ? weight_of_bits(key_bits(s.gkey[i])) : 0;
    run[e] = sum;
  }
  uint32_t unused;
  u64 before;
  block_exclusive_scan(0, sum, unused, before, s);
  for (int e = 0; e < kPerThread; ++e) {
    const int i = kPerThread * threadIdx.x + e;
    if (i < static_cast<int>(n)) s.gcum[i] = before + run[e];
  }
  __syncthreads();
  return n;
}

// The id of the nth (0-based) token, by ascending id, among the candidates with p bits `pb`:
// an ordered pass over the row, kThreads ids at a time. -1 if there are not that many (a bug).
__device__ int32_t nth_id_with_bits(const Row& r, uint32_t pb, u64 nth, Smem& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const DRange range = d_range(pb, pb);
  u64 seen = 0;
  for (int64_t base = 0; base < r.V; base += kThreads) {  // uniform trip count for the ballot
    const int64_t i = base + threadIdx.x;
    const bool hit = i < r.V && candidate_bits(r.x[i], r.m, range) == pb;
    const unsigned ballot = __ballot_sync(kFull, hit);
    if (lane == 0) s.scan_c[warp] = __popc(ballot);
    __syncthreads();
    u64 before = __popc(ballot & ((1u << lane) - 1u)), total = 0;
    for (int k = 0; k < kWarps; ++k) {
      const uint32_t v = s.scan_c[k];
      total += v;
      if (k < warp) before += v;
    }
    if (hit && seen + before == nth) s.bcast = static_cast<u64>(i);
    seen += total;
    __syncthreads();
    if (seen > nth) {
      const auto id = static_cast<int32_t>(s.bcast);
      __syncthreads();
      return id;
    }
  }
  return -1;
}

// The crossing (select_common.h) of the running count (by_count) or weight at `target`.
__device__ Crossing crossing(const Row& r, Smem& s, uint32_t n_gathered, bool by_count,
                             u64 target) {
  if (n_gathered > 0 && target < (by_count ? n_gathered : s.gcum[n_gathered - 1])) {
    u64 i = target;
    if (!by_count) {  // the unique i with gcum[i - 1] <= target < gcum[i]
      if (threadIdx.x == 0) s.bcast = kNone;
      __syncthreads();
      for (uint32_t j = threadIdx.x; j < n_gathered; j += kThreads)
        if (s.gcum[j] > target && (j == 0 || s.gcum[j - 1] <= target)) s.bcast = j;
      __syncthreads();
      i = s.bcast;
      __syncthreads();
      if (i == kNone) return {-1, 0};
    }
    return {key_id(s.gkey[i]), s.gcum[i]};
  }
  // Descend: level 1 from the suffix sums, levels 2 and 3 by histogram passes.
  const Pick p1 = pick_bucket(s.c1, s.w1, kL1Buckets, by_count, target, s);
  if (p1.b < 0) return {-1, 0};
  u64 c_before = p1.c_before, w_before = p1.w_before;
  uint32_t lo = kPMinBits + (static_cast<uint32_t>(p1.b) << kL1Shift);
  histogram(r, s.c2, s.w2, kL2Buckets, lo, lo + (1u << kL1Shift) - 1, kL2Shift, kL2Buckets - 1);
  suffix_sums<kL2Buckets / kThreads>(s.c2, s.w2, s);
  const Pick p2 =
      pick_bucket(s.c2, s.w2, kL2Buckets, by_count, target - (by_count ? c_before : w_before), s);
  if (p2.b < 0) return {-1, 0};
  c_before += p2.c_before, w_before += p2.w_before;
  lo += static_cast<uint32_t>(p2.b) << kL2Shift;
  histogram(r, s.c2, s.w2, kL2Buckets, lo, lo + (1u << kL2Shift) - 1, 0, kL3Buckets - 1);
  suffix_sums<kL2Buckets / kThreads>(s.c2, s.w2, s);
  const Pick p3 =
      pick_bucket(s.c2, s.w2, kL2Buckets, by_count, target - (by_count ? c_before : w_before), s);
  if (p3.b < 0) return {-1, 0};
  c_before += p3.c_before, w_before += p3.w_before;
  // One p left, so one weight: the crossing is the nth of its tokens by id.
  const uint32_t pb = lo + static_cast<uint32_t>(p3.b);
  const u64 w = weight_of_bits(pb);
  const u64 nth = by_count ? target - c_before : (target - w_before) / w;
  return {nth_id_with_bits(r, pb, nth, s), w_before + (nth + 1) * w};
}

__global__ void __launch_bounds__(kThreads)
    sample_rows_kernel(const float* __restrict__ logits, int64_t V,
                       const RowParams* __restrict__ rows, int32_t* __restrict__ tokens,
                       int32_t* __restrict__ status, int32_t* __restrict__ next_ids) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(smem_raw);
  const RowParams rp = rows[blockIdx.x];
  // Every branch below is uniform over the block: it depends on shared or row values only.
  auto finish = [&](int32_t token, int32_t st) {
    if (threadIdx.x != 0) return;
    tokens[blockIdx.x] = token, status[blockIdx.x] = st;
    // The next step's input id: a failed row feeds token 0 (its request is aborted and the
    // step's result for it dropped), so one bad row cannot trip the embedding's range check.
    if (next_ids) next_ids[rp.row] = st == kRowOk && token >= 0 && token < V ? token : 0;
  };
  const float* x = logits + rp.row * V;

  float xmax;
  int32_t imax;
  row_argmax(x, V, s, xmax, imax);
  if (!(xmax > neg_inf())) return finish(-1, kRowAllMasked);
  if (rp.greedy) return finish(imax, kRowOk);
  const Row r{x, V, {rp.temperature, div_rn(xmax, rp.temperature), rp.min_p}};
  if (!(r.m.zmax > neg_inf())) return finish(-1, kRowAllMasked);

  histogram(r, s.c1, s.w1, kL1Buckets, kPMinBits, kPOneBits, kL1Shift, 0xFFFu);
  suffix_sums<kL1Buckets / kThreads>(s.c1, s.w1, s);
  const u64 n_cand = s.c1[0];
  const u64 mass = s.w1[0];
  if (n_cand == 0) return finish(-1, kRowInternal);  // the top token always is one
  bool ok = true;
  const uint32_t n_gathered = gather_top(r, s, ok);
  const int32_t id = select_token(rp, n_cand, mass, [&](bool by_count, u64 target) {
    return crossing(r, s, n_gathered, by_count, target);
  });
  ok = ok && id >= 0 && id < V;
  finish(ok ? id : -1, ok ? kRowOk : kRowInternal);
}

__global__ void apply_edits_kernel(float* __restrict__ logits, int64_t V,
                                   const RowParams* __restrict__ rows,
                                   const LogitEdit* __restrict__ edits, int64_t n) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const LogitEdit e = edits[k];
  const RowParams& rp = rows[e.slot];
  float* px = logits + rp.row * V + e.token;
  *px = edit_logit(*px, e, rp);
}

}  // namespace

cudaError_t launch_apply_edits(float* logits, int64_t V, const RowParams* rows,
                               const LogitEdit* edits, int64_t n_edits, cudaStream_t stream) {
  if (n_edits <= 0) return cudaSuccess;
  constexpr int kBlock = 256;
  const int64_t blocks = (n_edits + kBlock - 1) / kBlock;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  apply_edits_kernel<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(logits, V, rows, edits,
                                                                           n_edits);
  return cudaGetLastError();
}

cudaError_t launch_sample_rows(const float* logits, int64_t V, const RowParams* rows,
                               int64_t n_rows, int32_t* tokens, int32_t* status, int32_t* next_ids,
                               cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  if (n_rows > 0x7fffffff || V <= 0 || V >= (int64_t{1} << 23)) return cudaErrorInvalidValue;
  static std::once_flag once;
  static cudaError_t attr = cudaSuccess;
  std::call_once(once, [] {
    attr = cudaFuncSetAttribute(sample_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(sizeof(Smem)));
  });
  if (attr != cudaSuccess) return attr;
  sample_rows_kernel<<<static_cast<unsigned>(n_rows), kThreads, sizeof(Smem), stream>>>(
      logits, V, rows, tokens, status, next_ids);
  return cudaGetLastError();
}

}  // namespace deepinfer::sampling::cuda
