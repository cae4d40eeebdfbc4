// The lightning indexer's scores on Hopper's warpgroup MMA (wgmma, sm_90a), fused:
//   scores[m, e] = scale * sum_h w[m, h] * relu(q[m, h] . k[e])   for e < visible[m], else -inf.
// A warpgroup takes one query: its heads (zero-padded to 64) are the MMA's M, 128 entries its N,
// and the head sum runs on the accumulators (a butterfly across the lanes that hold a column,
// then the four warps through shared memory), so the [M * heads, E] products never reach memory.
// Prefill calls: under the fp16 defaults, a block's four consumer warpgroups take four queries
// and share each key tile of a ring a producer warpgroup fills (indexer_quad_kernel: 36% shorter
// than two queries a block on an H100); with split operands (twice the shared memory a query and
// a tile), two warpgroups take two queries and share each tile (cp.async, double-buffered). Each
// block covers a range of entry tiles; tiles past its queries' visible entries are skipped. Decode
// rows (indexer_scores_batch: each row its own sequence's keys) run one warpgroup per block, one
// row and a range of its entry tiles, splitting the fp32 keys themselves as they stage them (no one
// else reads a row's keys, so a separate split pass would only add a launch and a round trip).
// Precision: q and k are plain fp16 by default, one MMA a product (set_indexer_fp16_q / _k,
// DEEPINFER_CUDA_INDEXER_FP16_Q / _K; DeepSeek's own indexer quantises both to FP8): on the GPU
// the golden fixtures' logits stayed bitwise those of split operands, and no key lo halves are
// made or staged. Either switch off splits that operand into fp16 hi + lo (half_split.cuh) and
// adds its product (lo * hi for q, hi * lo for k); both off, three MMAs, ~fp32 scores. The head
// sum's order differs from the CPU's (fp32 either way).
#include "backend/cuda/half_split.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tma_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

#include <algorithm>

namespace deepinfer::cuda {

namespace {

constexpr int kHeads = 64;   // wgmma M: a query's heads, zero rows above nh
constexpr int kTileE = 128;  // entries per key tile (wgmma N)
constexpr int kThreads = 256;
constexpr int kMaxKd = 2;                         // 64-dim k-tiles (d <= 128)
constexpr int kQSub = kHeads * 128;               // one [64 rows x 64 dims] fp16 tile
constexpr int kKSub = kTileE * 128;               // one [128 rows x 64 dims] fp16 tile
constexpr int kQBytes = 2 * kMaxKd * kQSub;       // a query's hi, lo: 32 KiB
constexpr int kKStageBytes = 2 * kMaxKd * kKSub;  // a key tile's hi, lo: 64 KiB
constexpr int kRedFloats = 2 * 2 * 4 * kTileE;    // [warpgroup][parity][warp][column]
constexpr size_t kSmemBytes = 2 * kQBytes + 2 * kKStageBytes + kRedFloats * 4 + 1024;
constexpr int kMaxTilesPerBlock = 16;

// The prefill kernel under fp16 q and k (the defaults): kQuadQueries queries a block, one consumer
// warpgroup each, sharing every key tile of a kQuadStages-deep ring that a producer warpgroup
// fills.
constexpr int kQuadQueries = 4, kQuadStages = 4;
constexpr int kQuadConsumers = kQuadQueries * 128, kQuadThreads = kQuadConsumers + 128;
// 20 warps leave 96 registers a thread (units of 8 a thread per warp); the producer's warpgroup
// gives up 64 a thread, 16 more for each consumer thread.
constexpr int kQuadProducerRegs = 32, kQuadConsumerRegs = 112;
static_assert(kQuadProducerRegs * 128 + kQuadConsumerRegs * kQuadConsumers <=
                  65536 / kQuadThreads / 8 * 8 * kQuadThreads,
              "the block's registers");
constexpr int kQuadQBytes = kMaxKd * kQSub;                    // a query's fp16: 16 KiB
constexpr int kQuadTileBytes = kMaxKd * kKSub;                 // a key tile's fp16: 32 KiB
constexpr int kQuadRedFloats = kQuadQueries * 2 * 4 * kTileE;  // [query][parity][warp][column]
constexpr int kQuadOffTiles = kQuadQueries * kQuadQBytes;
constexpr int kQuadOffRed = kQuadOffTiles + kQuadStages * kQuadTileBytes;
constexpr int kQuadOffBar = kQuadOffRed + kQuadRedFloats * 4;
constexpr size_t kQuadSmemBytes = kQuadOffBar + 2 * kQuadStages * 8 + 1024;  // + alignment
constexpr int kQuadMaxTilesPerBlock = 32;

struct IndexerArgs {
  const float* q;          // [M, nh, d]
  const uint16_t* k_hi;    // fp16 [E, d] (not per-row mode)
  const uint16_t* k_lo;    // fp16 [E, d]
  const float* w;          // [M, nh]
  const int32_t* visible;  // [M]
  int64_t M, E;
  int nh, d, tiles_per_block;
  float scale;
  float* scores;  // [M, E]; per-row mode: [R, E] (E = N, the widest row)
  int32_t* err;
  const IndexerRow* rows = nullptr;  // per-row mode: blockIdx.x's row and its fp32 keys
  bool split_q = true;               // q as hi + lo; else hi alone (no lo * hi product)
  bool split_k = true;               // k as hi + lo; else hi alone (no hi * lo product, no k_lo)
};

// k's n4 float4 as fp16 halves, hi and lo in two arrays (grid-stride over blockIdx.x); without
// lo, the hi halves alone.
__device__ __forceinline__ void keys_hi_lo(const float* k, int64_t n4, uint16_t* hi, uint16_t* lo) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n4;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(k) + i);
    const float x[4] = {v.x, v.y, v.z, v.w};
    if (lo)
      store_hi_lo(hi + 4 * i, lo + 4 * i, x);
    else
      store_hi(hi + 4 * i, x);
  }
}

__global__ void keys_hi_lo_kernel(const float* k, int64_t n4, uint16_t* hi, uint16_t* lo) {
  wait_for_prior_grid();
  keys_hi_lo(k, n4, hi, lo);
}

// Grid: (query pair, entry range): consecutive blocks share the range's key tiles in L2.
// kPerRow: (row, entry range) with one warpgroup, the row's query and fp32 keys from g.rows: each
// tile lands raw in the second stage's buffer and is split into the first's, where the MMAs read
// it, while the next raw tile loads.
// A key tile's scores for the warpgroup's query: s[64 heads x 128 entries] = q k^T over KD
// 64-dim slices, hi * hi (+ hi * lo for split keys, + lo * hi for a split query) per k16 step.
// One straight run of wgmmas per operand setting: a branch between them, or an accumulator
// write after the fence, makes ptxas wait out every wgmma before the next (C7519).
template <int KD, bool kSplitQ, bool kSplitK>
__device__ __forceinline__ void tile_scores(float (&s)[64], uint32_t qa, uint32_t st) {
  wgmma_fence_operands(s);
  wgmma_fence();
#pragma unroll
  for (int kd = 0; kd < KD; ++kd)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t qo = qa + kd * kQSub + kk * 32, ko = st + kd * kKSub + kk * 32;
      wgmma_m64n128k16_f16(s, wgmma_desc_sw128(qo), wgmma_desc_sw128(ko), kd + kk > 0);
      if constexpr (kSplitK)
        wgmma_m64n128k16_f16(s, wgmma_desc_sw128(qo), wgmma_desc_sw128(ko + kMaxKd * kKSub), 1);
      if constexpr (kSplitQ)
        wgmma_m64n128k16_f16(s, wgmma_desc_sw128(qo + kMaxKd * kQSub), wgmma_desc_sw128(ko), 1);
    }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operands(s);
}

// Query q's heads (zero rows past nh, or all for a missing query) as fp16 in the swizzled
// K-major layout at dst, by the 128 threads of a warpgroup (wt: this thread's index in it); with
// kLo also their lo halves, kMaxKd * kQSub bytes on. All loads issue before the stores.
template <int KD, bool kLo>
__device__ __forceinline__ void stage_query(const IndexerArgs& g, int64_t q, int wt,
                                            unsigned char* dst) {
  constexpr int kF4 = kHeads * KD * 16, kPer = kF4 / 128;
  float4 v[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int idx = u * 128 + wt, h = idx / (KD * 16), c4 = idx % (KD * 16);
    v[u] = q < g.M && h < g.nh
               ? __ldg(reinterpret_cast<const float4*>(g.q + (q * g.nh + h) * g.d) + c4)
               : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int idx = u * 128 + wt, h = idx / (KD * 16), dim = (idx % (KD * 16)) * 4;
    const int off =
        (dim / 64) * kQSub + h * 128 + ((((dim % 64) / 8) ^ (h & 7)) * 16) + (dim % 8) * 2;
    const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
    if constexpr (kLo)
      store_hi_lo(dst + off, dst + kMaxKd * kQSub + off, x);
    else
      store_hi(dst + off, x);
  }
}

// A tile's head sum for the calling warpgroup's query: entry wt's (the thread's index in the
// warpgroup) sum over heads of w[h] * relu(s[h, wt]), where this thread holds heads h0 (weight w0)
// and h0 + 8 (w1) at columns 8 j + 2 tq + {0, 1}: s[4 j + {0, 1}] and s[4 j + {2, 3}]. The
// columns sum over a column set's 8 lanes by a butterfly, then over the four warps through red
// ([4 warps][kTileE], a buffer the warpgroup does not touch again before its next barrier) after
// the warpgroup's named barrier bar_id.
__device__ __forceinline__ float head_sum(const float (&s)[64], float w0, float w1, float* red,
                                          uint32_t bar_id) {
  const int wt = threadIdx.x & 127, warp = wt >> 5, lane = wt & 31, tq = lane & 3;
  const bool b2 = lane & 4, b3 = lane & 8, b4 = lane & 16;
  const int grp = (b2 ? 4 : 0) + (b3 ? 2 : 0) + (b4 ? 1 : 0);
  float v[32];
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int c = 0; c < 2; ++c)
      v[2 * j + c] = w0 * fmaxf(s[4 * j + c], 0.f) + w1 * fmaxf(s[4 * j + 2 + c], 0.f);
  // Sum over the 8 lanes of a column set (lane bits 2-4), halving the values each round:
  // afterwards value i is column index c = i + 4 grp of the 32 (16 b2 + 8 b3 + 4 b4).
  float r1[16], r2[8], r3[4];
#pragma unroll
  for (int i = 0; i < 16; ++i)
    r1[i] = (b2 ? v[i + 16] : v[i]) + __shfl_xor_sync(0xffffffffu, b2 ? v[i] : v[i + 16], 4);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    r2[i] = (b3 ? r1[i + 8] : r1[i]) + __shfl_xor_sync(0xffffffffu, b3 ? r1[i] : r1[i + 8], 8);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    r3[i] = (b4 ? r2[i + 4] : r2[i]) + __shfl_xor_sync(0xffffffffu, b4 ? r2[i] : r2[i + 4], 16);
#pragma unroll
  for (int i = 0; i < 4; ++i)  // c = 2 j + (i & 1) with j = 2 grp + i / 2
    red[warp * kTileE + 16 * grp + 8 * (i >> 1) + 2 * tq + (i & 1)] = r3[i];
  named_barrier_sync(bar_id, 128);  // this warpgroup only
  return red[wt] + red[kTileE + wt] + red[2 * kTileE + wt] + red[3 * kTileE + wt];
}

template <int KD, bool kPerRow>
__global__ void __launch_bounds__(kPerRow ? 128 : kThreads, 1) indexer_wgmma_kernel(IndexerArgs g) {
  wait_for_prior_grid();
#if DI_HAVE_WGMMA
  constexpr int NT = kPerRow ? 128 : kThreads, kQueries = kPerRow ? 1 : 2;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const uint32_t sbase = smem_u32(smem);
  unsigned char* qs = smem;                       // [queries][hi, lo][KD][64 rows][128 B]
  unsigned char* ks = smem + kQueries * kQBytes;  // [2 stages][hi, lo][KD][128 rows][128 B]
  float* red = reinterpret_cast<float*>(ks + 2 * kKStageBytes);

  const int tid = threadIdx.x, wg = tid >> 7, wt = tid & 127, warp = wt >> 5, lane = tid & 31;
  // The block's queries (a per-row block: its row's, the other one absent), their keys and
  // output rows.
  int64_t q_a = int64_t{blockIdx.x} * 2, q_b = q_a + 1, E = g.E;
  const uint16_t *k_hi = g.k_hi, *k_lo = g.k_lo;
  const float* k_raw = nullptr;
  if constexpr (kPerRow) {
    const IndexerRow& row = g.rows[blockIdx.x];
    q_a = row.q_row;
    q_b = g.M;
    E = row.E;
    k_raw = row.k;
  }
  const int64_t q = wg ? q_b : q_a;
  const int64_t e_begin = int64_t{blockIdx.y} * g.tiles_per_block * kTileE;
  const int64_t e_end = min(g.E, e_begin + int64_t{g.tiles_per_block} * kTileE);
  // Visible entries of the block's queries (a bad value is flagged and clamped, like the
  // unfused path's reduction).
  int64_t vis[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t qi = i ? q_b : q_a;
    int64_t v = 0;
    if (qi < g.M) {
      v = g.visible[qi];
      if (v < 0 || v > E) {
        if (blockIdx.y == 0 && tid == 0) flag_error(g.err, kErrIndexerVisible);
        v = v < 0 ? 0 : E;
      }
    }
    vis[i] = v;
  }
  const int64_t live_end = min(e_end, max(vis[0], vis[1]));
  const int live =
      live_end > e_begin ? static_cast<int>((live_end - e_begin + kTileE - 1) / kTileE) : 0;
  const int64_t my_vis = vis[wg];

  auto load_tile = [&](int t) {
    unsigned char* st = ks + (t & 1) * kKStageBytes;
    const int64_t e0 = e_begin + int64_t{t} * kTileE;
    constexpr int kRowChunks = KD * 8, kChunks = 2 * kTileE * kRowChunks;
#pragma unroll
    for (int u = 0; u < kChunks / NT; ++u) {
      const int i = u * NT + tid, hl = i / (kTileE * kRowChunks), r = (i / kRowChunks) % kTileE;
      if (hl == 1 && !g.split_k) break;  // the lo halves (the same u for every thread): unread
      const int c = i % kRowChunks, kd = c / 8, lc = c % 8;
      const int64_t e = e0 + r;
      const uint16_t* src = (hl ? k_lo : k_hi) + (e < E ? e : 0) * g.d + c * 8;
      cp_async16(st + (hl * kMaxKd + kd) * kKSub + r * 128 + ((lc ^ (r & 7)) * 16), src, e < E);
    }
    cp_async_commit();
  };
  // Per-row mode: tile t's fp32 rows (d floats each, zeros past E) into the raw buffer (the
  // second stage's), then split into the first stage in load_tile's layout.
  unsigned char* raw = ks + kKStageBytes;
  auto load_raw = [&](int t) {
    const int64_t e0 = e_begin + int64_t{t} * kTileE;
    constexpr int kRowF4 = KD * 16, kF4 = kTileE * kRowF4;
#pragma unroll
    for (int u = 0; u < kF4 / NT; ++u) {
      const int i = u * NT + tid, r = i / kRowF4, c = i % kRowF4;
      const int64_t e = e0 + r;
      cp_async16(raw + i * 16, k_raw + (e < E ? e : 0) * g.d + c * 4, e < E);
    }
    cp_async_commit();
  };
  auto split_raw = [&] {
    constexpr int kRowChunks = KD * 8;
#pragma unroll 4
    for (int i = tid; i < kTileE * kRowChunks; i += NT) {
      const int r = i / kRowChunks, c = i % kRowChunks, kd = c / 8, lc = c % 8;
      const float4* src = reinterpret_cast<const float4*>(raw) + 2 * i;
      const float4 a = src[0], b = src[1];
      const float xa[4] = {a.x, a.y, a.z, a.w}, xb[4] = {b.x, b.y, b.z, b.w};
      unsigned char* hi = ks + kd * kKSub + r * 128 + ((lc ^ (r & 7)) * 16);
      unsigned char* lo = hi + kMaxKd * kKSub;
      if (g.split_k) {
        store_hi_lo(hi, lo, xa);
        store_hi_lo(hi + 8, lo + 8, xb);
      } else {
        store_hi(hi, xa);
        store_hi(hi + 8, xb);
      }
    }
  };

  if (live > 0) {
    if constexpr (kPerRow)
      load_raw(0);
    else
      load_tile(0);
    stage_query<KD, true>(g, q, wt, qs + wg * kQBytes);
  }

  // This thread's accumulator rows are heads h0 and h0 + 8.
  const int h0 = warp * 16 + (lane >> 2);
  const float w0 = q < g.M && h0 < g.nh ? g.w[q * g.nh + h0] : 0.f;
  const float w1 = q < g.M && h0 + 8 < g.nh ? g.w[q * g.nh + h0 + 8] : 0.f;
  const uint32_t qa = sbase + wg * kQBytes;
  float s[64];
  for (int t = 0; t < live; ++t) {
    cp_async_wait_all();
    if constexpr (kPerRow) {
      __syncthreads();  // the raw tile landed; tile t - 1's MMAs are done with the first stage
      split_raw();
    }
    fence_proxy_async_smem();  // the cp.async tiles, the split keys and (t == 0) the query
    __syncthreads();           // everyone's parts landed; tile t - 1's MMAs are done
    if (t + 1 < live) {
      if constexpr (kPerRow)
        load_raw(t + 1);
      else
        load_tile(t + 1);
    }
    const uint32_t st = sbase + kQueries * kQBytes + (kPerRow ? 0 : (t & 1) * kKStageBytes);
    if (g.split_k)
      g.split_q ? tile_scores<KD, true, true>(s, qa, st) : tile_scores<KD, false, true>(s, qa, st);
    else
      g.split_q ? tile_scores<KD, true, false>(s, qa, st)
                : tile_scores<KD, false, false>(s, qa, st);

    const float sum = head_sum(s, w0, w1, red + (wg * 2 + (t & 1)) * 4 * kTileE, 1 + wg);
    const int64_t e = e_begin + int64_t{t} * kTileE + wt;
    if (q < g.M && e < e_end)
      g.scores[(kPerRow ? int64_t{blockIdx.x} : q) * g.E + e] =
          e < my_vis ? sum * g.scale : neg_inf();
  }
  // Entry tiles past both queries' visible entries (and a row's columns past its keys).
  const int64_t dead0 = e_begin + int64_t{live} * kTileE;
  if (q < g.M)
    for (int64_t e = dead0 + wt; e < e_end; e += 128)
      g.scores[(kPerRow ? int64_t{blockIdx.x} : q) * g.E + e] = neg_inf();
#else
  __trap();  // launched only on sm_90a devices (wgmma_available)
#endif
}

// The prefill scores under fp16 q and k (one MMA a product; the defaults): the arithmetic of
// indexer_wgmma_kernel<KD, false> (tile_scores, head_sum), so the same bits, with kQuadQueries
// queries a block sharing each key tile instead of two. Block (query quad, entry range): a
// producer warpgroup copies the range's live tiles (fp16, made by keys_hi_lo_kernel) by cp.async
// into a kQuadStages-deep ring, each copy completing on its stage's mbarrier; consumer
// warpgroup w scores query 4 blockIdx.x + w against each tile and releases the stage after its
// head sum's barrier. The consumers drift apart within the ring, so one's head sum runs beside
// another's MMAs (the two-query kernel synchronises its block every tile, leaving the tensor
// cores idle through every head sum), and a tile crosses L2 once per four queries.
template <int KD>
__global__ void __launch_bounds__(kQuadThreads, 1) indexer_quad_kernel(IndexerArgs g) {
  wait_for_prior_grid();
#if DI_HAVE_WGMMA
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const uint32_t sbase = smem_u32(smem);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kQuadOffBar);
  uint64_t* empty = full + kQuadStages;
  const int tid = threadIdx.x, wg = tid >> 7, wt = tid & 127;
  if (tid == 0)
    for (int st = 0; st < kQuadStages; ++st) {
      mbarrier_init(&full[st], 128);            // every producer thread's copies
      mbarrier_init(&empty[st], kQuadQueries);  // every consumer warpgroup's head sum
    }
  __syncthreads();

  const int64_t q0 = int64_t{blockIdx.x} * kQuadQueries;
  const int64_t e_begin = int64_t{blockIdx.y} * g.tiles_per_block * kTileE;
  const int64_t e_end = min(g.E, e_begin + int64_t{g.tiles_per_block} * kTileE);
  // Visible entries of the block's queries (a bad value flagged and clamped, as the two-query
  // kernel does); the live tiles reach the furthest.
  int64_t live_end = e_begin, my_vis = 0;
  for (int i = 0; i < kQuadQueries; ++i) {
    const int64_t qi = q0 + i;
    if (qi >= g.M) break;
    int64_t v = g.visible[qi];
    if (v < 0 || v > g.E) {
      if (blockIdx.y == 0 && tid == 0) flag_error(g.err, kErrIndexerVisible);
      v = v < 0 ? 0 : g.E;
    }
    if (i == wg) my_vis = v;
    live_end = max(live_end, min(e_end, v));
  }
  const int live = static_cast<int>((live_end - e_begin + kTileE - 1) / kTileE);

  if (wg == kQuadQueries) {
    // Producer: the live tiles, hi halves only, into the ring.
    setmaxnreg_dec<kQuadProducerRegs>();
    Ring<kQuadStages> ring;
    constexpr int kRowChunks = KD * 8;
    for (int t = 0; t < live; ++t, ++ring.use) {
      const int64_t e0 = e_begin + int64_t{t} * kTileE;
      mbarrier_wait(&empty[ring.slot()], ring.parity() ^ 1);
      unsigned char* st = smem + kQuadOffTiles + ring.slot() * kQuadTileBytes;
#pragma unroll 4
      for (int i = wt; i < kTileE * kRowChunks; i += 128) {
        const int r = i / kRowChunks, c = i % kRowChunks, kd = c / 8, lc = c % 8;
        const int64_t e = e0 + r;
        cp_async16(st + kd * kKSub + r * 128 + ((lc ^ (r & 7)) * 16),
                   g.k_hi + (e < g.E ? e : 0) * g.d + c * 8, e < g.E);
      }
      cp_async_mbarrier_arrive(&full[ring.slot()]);
    }
    cp_async_wait_all();
    return;
  }

  // Consumers.
  setmaxnreg_inc<kQuadConsumerRegs>();
  const int64_t q = q0 + wg;
  const int warp = wt >> 5, lane = tid & 31;
  unsigned char* my_q = smem + wg * kQuadQBytes;
  if (live > 0) {
    stage_query<KD, false>(g, q, wt, my_q);
    fence_proxy_async_smem();         // the query, for wgmma's reads
    named_barrier_sync(1 + wg, 128);  // ... every thread's part of it
  }
  const int h0 = warp * 16 + (lane >> 2);
  const float w0 = q < g.M && h0 < g.nh ? g.w[q * g.nh + h0] : 0.f;
  const float w1 = q < g.M && h0 + 8 < g.nh ? g.w[q * g.nh + h0 + 8] : 0.f;
  const uint32_t qa = sbase + wg * kQuadQBytes;
  float* red = reinterpret_cast<float*>(smem + kQuadOffRed) + wg * 2 * 4 * kTileE;
  float s[64];
  Ring<kQuadStages> ring;
  for (int t = 0; t < live; ++t, ++ring.use) {
    mbarrier_wait(&full[ring.slot()], ring.parity());
    fence_proxy_async_smem();  // the producer's cp.async writes, for wgmma's reads
    tile_scores<KD, false, false>(
        s, qa, sbase + kQuadOffTiles + static_cast<uint32_t>(ring.slot() * kQuadTileBytes));
    const float sum = head_sum(s, w0, w1, red + (t & 1) * 4 * kTileE, 1 + wg);
    // Past head_sum's barrier every warp of this warpgroup has waited out its MMAs.
    if (wt == 0) mbarrier_arrive(&empty[ring.slot()]);
    const int64_t e = e_begin + int64_t{t} * kTileE + wt;
    if (q < g.M && e < e_end) g.scores[q * g.E + e] = e < my_vis ? sum * g.scale : neg_inf();
  }
  // Entry tiles past every query's visible entries.
  if (q < g.M)
    for (int64_t e = e_begin + int64_t{live} * kTileE + wt; e < e_end; e += 128)
      g.scores[q * g.E + e] = neg_inf();
#else
  __trap();  // launched only on sm_90a devices (wgmma_available)
#endif
}

// Entry tiles per block for `units` (query pairs, quads or rows) over `tiles` entry tiles: about
// per_sm blocks per SM, at most cap tiles each.
int64_t tiles_per_block(int64_t units, int64_t tiles, int64_t per_sm, int sms,
                        int64_t cap = kMaxTilesPerBlock) {
  return std::max<int64_t>(1, std::min<int64_t>({cap, tiles, units * tiles / (per_sm * sms)}));
}

// The kernel's arguments: the prefill shape's keys, or none (per-row mode sets g.rows).
IndexerArgs indexer_args(const float* q, const uint16_t* k_hi, const uint16_t* k_lo, const float* w,
                         const int32_t* visible, int64_t M, int64_t E, int64_t nh, int64_t d,
                         int64_t tpb, float scale, float* scores, int32_t* err) {
  IndexerArgs a{q,
                k_hi,
                k_lo,
                w,
                visible,
                M,
                E,
                static_cast<int>(nh),
                static_cast<int>(d),
                static_cast<int>(tpb),
                scale,
                scores,
                err};
  a.split_q = !indexer_fp16_q();
  a.split_k = !indexer_fp16_k();
  return a;
}

bool fp16_q = true, fp16_k = true;  // set_indexer_fp16_q / _k; the variables' defaults

template <bool kPerRow>
cudaError_t launch_scores(const IndexerArgs& a, dim3 grid, cudaStream_t stream) {
  constexpr size_t smem = kSmemBytes - (kPerRow ? kQBytes : 0);
  auto* kernel = a.d == 128 ? indexer_wgmma_kernel<2, kPerRow> : indexer_wgmma_kernel<1, kPerRow>;
  static const cudaError_t attr[2] = {
      cudaFuncSetAttribute(indexer_wgmma_kernel<1, kPerRow>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
      cudaFuncSetAttribute(indexer_wgmma_kernel<2, kPerRow>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem))};
  if (attr[a.d == 128] != cudaSuccess) return attr[a.d == 128];
  return launch_kernel(kernel, grid, kPerRow ? 128 : kThreads, smem, stream, a);
}

}  // namespace

void set_indexer_fp16_q(bool on) {
  fp16_q = on;
}

bool indexer_fp16_q() {
  return fp16_q;
}

void set_indexer_fp16_k(bool on) {
  fp16_k = on;
}

bool indexer_fp16_k() {
  return fp16_k;
}

bool indexer_wgmma_supported(int64_t nh, int64_t d) {
  return nh >= 1 && nh <= kHeads && (d == 64 || d == 128);
}

cudaError_t launch_indexer_wgmma(const float* q, const float* k, int64_t M, int64_t nh, int64_t d,
                                 int64_t E, const float* w, float scale, const int32_t* visible,
                                 uint16_t* k_halves, float* scores, int sms, int32_t* err,
                                 cudaStream_t stream) {
  if (M <= 0 || E <= 0) return cudaSuccess;
  if (!indexer_wgmma_supported(nh, d)) return cudaErrorInvalidValue;
  uint16_t* k_hi = k_halves;
  uint16_t* k_lo = indexer_fp16_k() ? nullptr : k_halves + E * d;
  const int64_t n4 = E * d / 4;
  const cudaError_t split =
      launch_kernel(keys_hi_lo_kernel, blocks_for(n4, 256), 256, 0, stream, k, n4, k_hi, k_lo);
  if (split != cudaSuccess) return split;
  const int64_t tiles = (E + kTileE - 1) / kTileE;
  if (indexer_fp16_q() && indexer_fp16_k()) {
    // About two blocks per SM (one fits), up to kQuadMaxTilesPerBlock tiles each.
    const int64_t quads = (M + kQuadQueries - 1) / kQuadQueries;
    const int64_t tpb = tiles_per_block(quads, tiles, 2, sms, kQuadMaxTilesPerBlock);
    const int64_t ranges = (tiles + tpb - 1) / tpb;
    if (quads > 0x7fffffff || ranges > 65535) return cudaErrorInvalidValue;
    const IndexerArgs a =
        indexer_args(q, k_hi, nullptr, w, visible, M, E, nh, d, tpb, scale, scores, err);
    static const cudaError_t attr[2] = {
        cudaFuncSetAttribute(indexer_quad_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kQuadSmemBytes)),
        cudaFuncSetAttribute(indexer_quad_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kQuadSmemBytes))};
    if (attr[d == 128] != cudaSuccess) return attr[d == 128];
    return launch_kernel(d == 128 ? indexer_quad_kernel<2> : indexer_quad_kernel<1>,
                         dim3(static_cast<unsigned>(quads), static_cast<unsigned>(ranges)),
                         kQuadThreads, kQuadSmemBytes, stream, a);
  }
  // Enough blocks for ~4 per SM.
  const int64_t pairs = (M + 1) / 2;
  const int64_t tpb = tiles_per_block(pairs, tiles, 4, sms);
  const int64_t ranges = (tiles + tpb - 1) / tpb;
  if (pairs > 0x7fffffff || ranges > 65535) return cudaErrorInvalidValue;
  const IndexerArgs a =
      indexer_args(q, k_hi, k_lo, w, visible, M, E, nh, d, tpb, scale, scores, err);
  return launch_scores<false>(a, dim3(static_cast<unsigned>(pairs), static_cast<unsigned>(ranges)),
                              stream);
}

cudaError_t launch_indexer_rows_wgmma(const float* q, int64_t M, int64_t nh, int64_t d,
                                      const float* w, const int32_t* visible,
                                      const IndexerRow* rows, int64_t R, int64_t N, float scale,
                                      float* scores, int sms, int32_t* err, cudaStream_t stream) {
  if (R <= 0 || N <= 0) return cudaSuccess;
  if (!indexer_wgmma_supported(nh, d)) return cudaErrorInvalidValue;
  // About two blocks per SM (one fits).
  const int64_t tiles = (N + kTileE - 1) / kTileE;
  const int64_t tpb = tiles_per_block(R, tiles, 2, sms);
  const int64_t ranges = (tiles + tpb - 1) / tpb;
  if (R > 0x7fffffff || ranges > 65535) return cudaErrorInvalidValue;
  IndexerArgs a =
      indexer_args(q, nullptr, nullptr, w, visible, M, N, nh, d, tpb, scale, scores, err);
  a.rows = rows;
  return launch_scores<true>(a, dim3(static_cast<unsigned>(R), static_cast<unsigned>(ranges)),
                             stream);
}

}  // namespace deepinfer::cuda
