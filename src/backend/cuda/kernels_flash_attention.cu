// Shared-KV attention with sinks, flash-decoding style. All heads of a query share its keys (V4's
// single K=V head), so one block serves G groups of 16 heads of one query: it stages a chunk of
// 32 keys once in shared memory as fp16 and runs S = Q K^T and O += P V on tensor cores
// (mma.sync m16n8k16, fp32 accumulation) with the online softmax in registers. 4 warps per head
// group split the head dim: each computes a partial S over its quarter of the dims (summed
// through shared memory) and owns that quarter of O (one-wave decode grids: 2 warps per quarter,
// splitting its keys and its O; attention_quarter_warps). Blocks are (query, G head groups,
// range of key units). A row whose keys split (decode) takes them in units of unit_keys keys,
// each an online softmax of its own; the units fold together in order (fold_scales) with the
// sink (fold_finish) either in the block that ran them all (folding launches: every split row's
// units in one block) or by a second kernel from their unnormalised partials (O, max, sum): the
// same operations on the same values either way, so a row's bits depend on its keys alone.
// G = 2 (prefill: blocks enough) stages each key once for 32 heads, halving the L2 -> shared
// traffic that bounds the kernel there; a head's arithmetic is the same for any G.
//
// Precision: the keys (= values, the B operands) are split into two fp16 halves, x = hi + lo
// (lo = fp16(x - hi)), about 21 bits of mantissa; Q and P (the A operands) are one fp16 operand
// each by default (set_attention_fp16_qp, DEEPINFER_CUDA_ATTENTION_FP16_QP): two mma a product,
// hi*hi + hi*lo. Off, they are split too and each product takes three (+ lo*hi): scores and
// outputs as accurate as fp32 math. Plain fp16 for every operand (one mma) was enough to flip
// near-tie indexer and routing decisions downstream in the golden tests, and so were fp16 keys
// with split queries in the CPU emulation of it (docs/perf.md); fp16 Q and P were not. q and
// keys are RMS-normed, well inside fp16's range (values saturate rather than overflow).
#include "backend/cuda/attention_keys.cuh"
#include "backend/cuda/half_split.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"

#include <algorithm>

namespace deepinfer::cuda {

namespace {

constexpr int kHeads = kAttnHeadsPerBlock;  // heads per block (the mma M)
constexpr int kChunk = 32;                  // keys per chunk
constexpr int kWarps = 4;                   // per head group
constexpr int kPad = 8;  // fp16 row padding: rows 16 bytes apart in the banks (ldmatrix)

struct AttnParams {
  const float* q;
  int64_t M, H, hd;
  const AttnRow* rows;
  int64_t blocks_per_row;  // > 0 when every row has that many blocks (no search for the row)
  int64_t window;
  const int32_t* list;
  const int32_t* count;
  int64_t Kmax;
  const float* sinks;
  float scale;
  float* part_o;   // [slot][hd]; slot = part_off * H + h * splits + unit
  float* part_ml;  // [slot][2]: running max, running sum
  int32_t* err;
  AttnOutput o;             // out: fp32 (o.out) or bf16, de-rotated or not
  bool pairs;               // attention_stores_pairs
  int64_t unit_keys;        // keys per unit of a split row (a multiple of kChunk)
  int64_t units_per_block;  // units one block of a split row runs (launches that do not fold)
  bool split_a;             // Q and P as hi + lo (three MMAs a product); else hi (two)
};

// The shared memory of a block: Q and a key chunk as hi / lo halves, the warps' partial scores,
// the chunk's key pointers, `raw` (piped: the next chunk's fp32 keys or halves) and the RoPE
// table of the query's position (cos then sin of each pair, for the output's de-rotation).
template <int NT>
constexpr size_t attn_raw_bytes() {
  constexpr size_t ld = 32 * NT + kPad;
  return std::max(kChunk * 32 * NT * sizeof(float), 2 * kChunk * ld * sizeof(__half));
}
// Whether a block streams its next key chunk in while it computes one (`raw` exists): two-group
// blocks (prefill), and the one-wave grids' blocks of two warps per quarter (decode), which
// have an SM each (their registers), so the buffer costs them no residency.
template <int G, int KS>
constexpr bool attn_piped() {
  return G == 2 || KS == 2;
}
template <int NT, int G, int KS>
constexpr size_t attn_smem_bytes() {
  constexpr size_t ld = 32 * NT + kPad;
  return 2 * (kHeads * G + kChunk) * ld * sizeof(__half) + G * kWarps * 16 * 32 * 4 +
         2 * kChunk * sizeof(const float*) + (attn_piped<G, KS>() ? attn_raw_bytes<NT>() : 0) +
         2 * 16 * NT * sizeof(float);
}

// d0 += A B0, d1 += A B1 with every operand as fp16 hi / lo halves: hi * hi + hi * lo + lo * hi
// (lo * lo is below fp32's rounding), in that order; without split_a, A is its hi half alone
// (the last product dropped). a / al: A's halves; b / bl: the two n-tiles' halves as one
// ldmatrix_x4 loads them (b[0..1] tile 0, b[2..3] tile 1).
__device__ __forceinline__ void mma_split_pair(float (&d0)[4], float (&d1)[4],
                                               const uint32_t (&a)[4], const uint32_t (&al)[4],
                                               const uint32_t (&b)[4], const uint32_t (&bl)[4],
                                               bool split_a) {
  mma_f16_16816(d0, a, b[0], b[1]);
  mma_f16_16816(d0, a, bl[0], bl[1]);
  if (split_a) mma_f16_16816(d0, al, b[0], b[1]);
  mma_f16_16816(d1, a, b[2], b[3]);
  mma_f16_16816(d1, a, bl[2], bl[3]);
  if (split_a) mma_f16_16816(d1, al, b[2], b[3]);
}

// Folding unit u's (m_u, sum_u, o_u) into the running (M, L, O) of a row: M' = max(M, m_u),
// L' = L a + sum_u b, O' = O a + o_u b (a, b below; 0 for an empty side), each rounded as written
// here wherever it runs (the block that ran the units, or the merge kernel from their partials).
__device__ __forceinline__ void fold_scales(float M, float m_u, float* a, float* b, float* M1) {
  const float mn = fmaxf(M, m_u);
  *a = M == neg_inf() ? 0.f : expf(M - mn);
  *b = m_u == neg_inf() ? 0.f : expf(m_u - mn);
  *M1 = mn;
}
__device__ __forceinline__ float fold_into(float acc, float a, float v, float b) {
  return __fmaf_rn(acc, a, __fmul_rn(v, b));
}
// The factor a folded row's O takes with the sink: exp(M - mx) / (L exp(M - mx) + exp(sink - mx)).
__device__ __forceinline__ float fold_finish(float M, float L, float sink) {
  const float mx = fmaxf(M, sink);
  const float w = M == neg_inf() ? 0.f : expf(M - mx);
  return __fdiv_rn(w, __fmaf_rn(L, w, expf(sink - mx)));
}

// The row whose blocks include block b (rows' first_block ascend).
__device__ int64_t row_of_block(const AttnRow* rows, int64_t M, int64_t b) {
  int64_t lo = 0, hi = M - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (rows[mid].first_block <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Grid: per row, (block of G head groups g) x (unit range s) blocks; keys [j0, j1) of the query's
// key set: all of them for a row that does not split, else units [u0, u1) (kFold: all units).
// The padded head dim is hdp = 32 * NT, a quarter of it (wdims = 8 * NT) per dim quarter.
// KS warps share a quarter (KS = 2: one-group blocks, where a block has the SM to itself at decode
// and its warps' instruction latency, not throughput, bounds it): each computes the partial
// scores of its 16 of the chunk's 32 keys and owns 8 * NT / KS of the quarter's output dims.
// Every score is the sum of the same quarters' partials, and every output dim the same mma chain,
// for any KS: the same bits.
template <int NT, int G, int KS, bool kFold>
__global__ void __launch_bounds__(kWarps * 32 * G * KS) flash_attention_kernel(AttnParams p) {
  wait_for_prior_grid();
  constexpr int kThreads = kWarps * 32 * G * KS, kBlockHeads = kHeads * G;
  constexpr int hdp = 32 * NT, ld = hdp + kPad, wdims = 8 * NT;
  constexpr int kOwnTiles = NT / KS, kKeyTiles = 4 / KS;  // per warp: 8-dim output, 8-key tiles
  static_assert(kOwnTiles % 2 == 0 && kKeyTiles % 2 == 0, "tiles go by pairs");
  extern __shared__ __align__(16) unsigned char smem[];
  __half* qs = reinterpret_cast<__half*>(smem);                 // [2][16 G][ld]: hi, lo
  __half* ks0 = qs + 2 * kBlockHeads * ld;                      // [2][32][ld]: hi, lo
  float* sp = reinterpret_cast<float*>(ks0 + 2 * kChunk * ld);  // [warp][16 values][32 lanes]
  const float** kptr = reinterpret_cast<const float**>(sp + G * kWarps * 16 * 32);  // [2][32]
  float* raw = reinterpret_cast<float*>(kptr + 2 * kChunk);  // piped: fp32 keys / 2nd key buffer
  float* rope_cs =
      reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(raw) +
                               (attn_piped<G, KS>() ? attn_raw_bytes<NT>() : 0));  // [2][hdp / 2]

  const int64_t m =
      p.blocks_per_row > 0 ? blockIdx.x / p.blocks_per_row : row_of_block(p.rows, p.M, blockIdx.x);
  const AttnRow& row = p.rows[m];
  const int splits = row.splits;  // key units (1: the row's keys in one pass)
  const int64_t local = blockIdx.x - row.first_block;
  const int64_t range = local % row.unit_blocks, g = local / row.unit_blocks;
  const int64_t hd = p.hd;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // Head group in the block, dim quarter, and which of the quarter's KS warps.
  const int hg = warp / (kWarps * KS), wq = warp % kWarps, kh = warp / kWarps % KS;
  const int own0 = wq * wdims + kh * (wdims / KS);  // the warp's first output dim
  const int64_t h0 = g * kBlockHeads;               // the block's first head
  const int gr = lane >> 2, tq = lane & 3;          // mma fragment row / column pair

  const KeySet keys =
      key_set(m, hd, row, p.window, p.list, p.count, p.Kmax, local == 0 && threadIdx.x == 0, p.err);
  const int64_t n = keys.nw + keys.nc, U = p.unit_keys;
  int64_t u0 = 0, u1 = 1, j0 = 0, j1 = n;
  if (splits > 1) {
    u0 = kFold ? 0 : range * p.units_per_block;
    u1 = kFold ? splits : min(u0 + p.units_per_block, int64_t{splits});
    j0 = min(u0 * U, n);
    j1 = min(u1 * U, n);
  }
  const bool vec4 = (hd & 3) == 0 && (reinterpret_cast<uintptr_t>(keys.win) & 15) == 0 &&
                    (reinterpret_cast<uintptr_t>(keys.comp) & 15) == 0;

  // Q as hi/lo fp16, 4 dims per step: the loop has a fixed trip count, so every load is issued
  // before the stores (a dependent chain here cost more than the whole chunk loop at decode).
  const bool q_vec4 = (hd & 3) == 0 && (reinterpret_cast<uintptr_t>(p.q) & 15) == 0;
#pragma unroll
  for (int it = 0; it < kBlockHeads * hdp / 4 / kThreads; ++it) {
    const int i = threadIdx.x + it * kThreads;
    const int r = i / (hdp / 4), d = (i % (hdp / 4)) * 4;
    const int64_t h = h0 + r;
    float v[4] = {0.f, 0.f, 0.f, 0.f};
    if (h < p.H) {
      const float* qr = p.q + (m * p.H + h) * hd;
      if (q_vec4 && d + 3 < hd) {
        const float4 f = __ldg(reinterpret_cast<const float4*>(qr + d));
        v[0] = f.x;
        v[1] = f.y;
        v[2] = f.z;
        v[3] = f.w;
      } else {
        for (int c = 0; c < 4; ++c)
          if (d + c < hd) v[c] = qr[d + c];
      }
    }
    if (p.split_a)
      store_hi_lo(qs + r * ld + d, qs + (kBlockHeads + r) * ld + d, v);
    else
      store_hi(qs + r * ld + d, v);  // no MMA reads Q's lo halves
  }

  float o[kOwnTiles][4];
#pragma unroll
  for (int t = 0; t < kOwnTiles; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
  float run_max[2] = {neg_inf(), neg_inf()}, run_sum[2] = {0.f, 0.f};  // rows gr, gr + 8
  // kFold: the units folded so far (fold_scales).
  float fo[kFold ? kOwnTiles : 1][4] = {};
  float fm[2] = {neg_inf(), neg_inf()}, fl[2] = {0.f, 0.f};
  // A split row's unit u ends: its partial is stored (or zeros for a unit past the row's keys),
  // or folded in, and the next unit starts afresh.
  auto store_unit = [&](int64_t u, bool live) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t h = h0 + hg * kHeads + gr + 8 * r;
      if (h >= p.H) continue;
      const int64_t slot = row.part_off * p.H + h * splits + u;
      float* dst = p.part_o + slot * hd;
#pragma unroll
      for (int t = 0; t < kOwnTiles; ++t)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int64_t d = own0 + t * 8 + tq * 2 + i;
          if (d < hd) dst[d] = live ? o[t][2 * r + i] : 0.f;
        }
      if (wq == 0 && kh == 0 && tq == 0) {
        p.part_ml[slot * 2] = live ? run_max[r] : neg_inf();
        p.part_ml[slot * 2 + 1] = live ? run_sum[r] : 0.f;
      }
    }
  };
  auto end_unit = [&](int64_t u) {
    if constexpr (kFold) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float a, b;
        fold_scales(fm[r], run_max[r], &a, &b, &fm[r]);
        fl[r] = fold_into(fl[r], a, run_sum[r], b);
#pragma unroll
        for (int t = 0; t < kOwnTiles; ++t)
#pragma unroll
          for (int i = 0; i < 2; ++i)
            fo[t][2 * r + i] = fold_into(fo[t][2 * r + i], a, o[t][2 * r + i], b);
      }
    } else {
      store_unit(u, true);
    }
#pragma unroll
    for (int t = 0; t < kOwnTiles; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
    run_max[0] = run_max[1] = neg_inf();
    run_sum[0] = run_sum[1] = 0.f;
  };

  // Staging map: each thread copies 4 columns of every rstep-th key row.
  constexpr int per_row = hdp / 4, rstep = kThreads / per_row;
  constexpr int kRowsPerThread = kChunk / rstep;
  static_assert(rstep >= 1 && kRowsPerThread >= 1, "the threads cover a chunk's rows");
  constexpr int kStageBatch = kRowsPerThread < 16 ? kRowsPerThread : 16;
  static_assert(kRowsPerThread % kStageBatch == 0, "staging batches cover the chunk");
  const int col4 = threadIdx.x % per_row, row0 = threadIdx.x / per_row;

  // Piped with 16-byte key rows: the next chunk's fp32 keys stream into `raw` by cp.async while
  // this one computes, and the key list entries for the chunk after are loaded a chunk ahead
  // (warp 0), so no global round trip sits between two chunks' tensor-core work. With the keys
  // already split (row.win_h: a prefill's keys serve many queries) the next chunk's halves
  // stream straight into a second key buffer (`raw`), no conversion. The same values reach the
  // key buffer every way.
  const bool pipe = attn_piped<G, KS>() && vec4;
  const bool halves = pipe && keys.win_h != nullptr && (hd & 7) == 0;
  __half* ks1 = reinterpret_cast<__half*>(raw);
  __half* ks = ks0;  // the chunk being computed
  const int d4 = col4 * 4;
  int32_t next_entry = 0;  // warp 0, pipe: list entry of key row c0 + 2 * kChunk + lane
  auto issue_chunk = [&](int buf) {
    if (halves) {
      // A key row's hdp / 4 16-byte chunks: hi's hdp / 8, then lo's.
      __half* dst = buf ? ks1 : ks0;
      const int hl = col4 / (hdp / 8), dim0 = (col4 % (hdp / 8)) * 8;
#pragma unroll
      for (int u = 0; u < kRowsPerThread; ++u) {
        const int j = row0 + u * rstep;
        const auto* kr = reinterpret_cast<const uint16_t*>(kptr[buf * kChunk + j]);
        const bool ok = kr && dim0 < hd;
        cp_async16(dst + (hl * kChunk + j) * ld + dim0,
                   ok ? static_cast<const void*>(kr + hl * hd + dim0) : p.q, ok);
      }
    } else {
#pragma unroll
      for (int u = 0; u < kRowsPerThread; ++u) {
        const int j = row0 + u * rstep;
        const float* kr = kptr[buf * kChunk + j];
        cp_async16(raw + j * hdp + d4, kr && d4 < hd ? kr + d4 : p.q, kr && d4 < hd);
      }
    }
    cp_async_commit();
  };
  auto load_entry = [&](int64_t j) { return j < j1 ? keys.entry(j) : 0; };
  auto row_ptr = [&](int64_t j, int32_t e) -> const float* {
    if (j >= j1) return nullptr;
    return halves ? reinterpret_cast<const float*>(keys.halves_at(j, e)) : keys.row_at(j, e);
  };
  if (pipe && j0 < j1) {
    if (threadIdx.x < kChunk) {
      kptr[threadIdx.x] = row_ptr(j0 + threadIdx.x, load_entry(j0 + threadIdx.x));
      next_entry = load_entry(j0 + kChunk + threadIdx.x);
    }
    __syncthreads();
    issue_chunk(0);
  }

  int it = 0;
  for (int64_t c0 = j0; c0 < j1; c0 += kChunk, ++it) {
    const int cn = static_cast<int>(j1 - c0 < kChunk ? j1 - c0 : kChunk);
    if (halves) {
      cp_async_wait_all();
      const int nb = (it + 1) & 1;
      if (threadIdx.x < kChunk)
        kptr[nb * kChunk + threadIdx.x] = row_ptr(c0 + kChunk + threadIdx.x, next_entry);
      // This chunk has landed in its buffer, the other one's reads (the previous chunk) are
      // done, and the next chunk's rows are known.
      __syncthreads();
      ks = it & 1 ? ks1 : ks0;
      if (c0 + kChunk < j1) {
        issue_chunk(nb);
        if (threadIdx.x < kChunk) next_entry = load_entry(c0 + 2 * kChunk + threadIdx.x);
      }
    } else if (pipe) {
      cp_async_wait_all();
      __syncthreads();  // the chunk has landed; the previous chunk's ks reads are done
#pragma unroll 4
      for (int u = 0; u < kRowsPerThread; ++u) {
        const int j = row0 + u * rstep;
        const float4 v = *reinterpret_cast<const float4*>(raw + j * hdp + d4);
        const float x[4] = {v.x, v.y, v.z, v.w};
        store_hi_lo(ks + j * ld + d4, ks + (kChunk + j) * ld + d4, x);
      }
      const int nb = (it + 1) & 1;
      if (threadIdx.x < kChunk)
        kptr[nb * kChunk + threadIdx.x] = row_ptr(c0 + kChunk + threadIdx.x, next_entry);
      __syncthreads();  // ks is ready, raw is free, the next chunk's rows are known
      if (c0 + kChunk < j1) {
        issue_chunk(nb);
        if (threadIdx.x < kChunk) next_entry = load_entry(c0 + 2 * kChunk + threadIdx.x);
      }
    } else {
      if (threadIdx.x < kChunk)
        kptr[threadIdx.x] = threadIdx.x < cn ? keys.row(c0 + threadIdx.x) : nullptr;
      __syncthreads();  // also: the previous chunk's ks reads are done
      // In batches of kStageBatch rows: every load of a batch is issued before its conversions
      // and stores (load, convert, store row by row left one global round trip per row: ~10 us
      // per chunk at decode).
#pragma unroll
      for (int b0 = 0; b0 < kRowsPerThread; b0 += kStageBatch) {
        const int d = col4 * 4;
        float4 v[kStageBatch];
#pragma unroll
        for (int u = 0; u < kStageBatch; ++u) {
          const float* kr = kptr[row0 + (b0 + u) * rstep];
          v[u] = make_float4(0.f, 0.f, 0.f, 0.f);
          if (kr) {
            if (vec4 && d + 3 < hd) {
              v[u] = __ldg(reinterpret_cast<const float4*>(kr + d));
            } else {
              if (d < hd) v[u].x = kr[d];
              if (d + 1 < hd) v[u].y = kr[d + 1];
              if (d + 2 < hd) v[u].z = kr[d + 2];
              if (d + 3 < hd) v[u].w = kr[d + 3];
            }
          }
        }
#pragma unroll
        for (int u = 0; u < kStageBatch; ++u) {
          const int j = row0 + (b0 + u) * rstep;
          const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
          store_hi_lo(ks + j * ld + d, ks + (kChunk + j) * ld + d, x);
        }
      }
      __syncthreads();
    }

    // Partial S [16 x 32 / KS] over this quarter's dims: the warp's key tiles of 8, from
    // kh * kKeyTiles on.
    float sk[kKeyTiles][4];
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t) sk[t][0] = sk[t][1] = sk[t][2] = sk[t][3] = 0.f;
    const int mat = lane >> 3, mrow = lane & 7;
#pragma unroll
    for (int kk = 0; kk < wdims / 16; ++kk) {
      const int d0 = wq * wdims + kk * 16;
      uint32_t a[4], al[4] = {0u, 0u, 0u, 0u};
      const int qoff = (hg * kHeads + mrow + (mat & 1) * 8) * ld + d0 + (mat >> 1) * 8;
      ldmatrix_x4(a, qs + qoff);
      if (p.split_a) ldmatrix_x4(al, qs + kBlockHeads * ld + qoff);
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; nt += 2) {
        uint32_t b[4], bl[4];  // key tiles nt, nt + 1 of the warp's
        const int koff =
            ((kh * kKeyTiles + nt) * 8 + mrow + (mat >> 1) * 8) * ld + d0 + (mat & 1) * 8;
        ldmatrix_x4(b, ks + koff);
        ldmatrix_x4(bl, ks + kChunk * ld + koff);
        mma_split_pair(sk[nt], sk[nt + 1], a, al, b, bl, p.split_a);
      }
    }
    const int quarter = hg * kWarps + wq;
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        sp[(quarter * 16 + (kh * kKeyTiles + t) * 4 + i) * 32 + lane] = sk[t][i];
    __syncthreads();
    // The whole chunk's scores in every warp of the head group: the quarters' partials in order.
    float s[4][4];
#pragma unroll
    for (int t = 0; t < 4; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) v += sp[((hg * kWarps + w) * 16 + t * 4 + i) * 32 + lane];
        const int key = t * 8 + tq * 2 + (i & 1);
        s[t][i] = key < cn ? v * p.scale : neg_inf();
      }

    // Online softmax of rows gr (values i = 0, 1) and gr + 8 (i = 2, 3); a row lives in the 4
    // lanes of one quad.
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1]));
      mx = fmaxf(mx,
                 fmaxf(fmaxf(s[2][2 * r], s[2][2 * r + 1]), fmaxf(s[3][2 * r], s[3][2 * r + 1])));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float nmax = fmaxf(run_max[r], mx);
      corr[r] = run_max[r] == neg_inf() ? 0.f : expf(run_max[r] - nmax);
      float sum = 0.f;
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int i = 2 * r; i < 2 * r + 2; ++i) {
          s[t][i] = nmax == neg_inf() ? 0.f : expf(s[t][i] - nmax);
          sum += s[t][i];
        }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      run_sum[r] = run_sum[r] * corr[r] + sum;
      run_max[r] = nmax;
    }
#pragma unroll
    for (int t = 0; t < kOwnTiles; ++t) {
      o[t][0] *= corr[0];
      o[t][1] *= corr[0];
      o[t][2] *= corr[1];
      o[t][3] *= corr[1];
    }
    // O += P V over this warp's dims; P's accumulator layout is the mma A layout.
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      uint32_t a[4], al[4];
      const float* pv[4] = {&s[2 * kk][0], &s[2 * kk][2], &s[2 * kk + 1][0], &s[2 * kk + 1][2]};
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // probabilities: no saturation needed
        const __half2 h = __floats2half2_rn(pv[i][0], pv[i][1]);
        const float2 hf = __half22float2(h);
        a[i] = half2_bits(h);
        al[i] = p.split_a ? pack_half2(pv[i][0] - hf.x, pv[i][1] - hf.y) : 0u;
      }
#pragma unroll
      for (int t = 0; t < kOwnTiles; t += 2) {
        uint32_t b[4], bl[4];  // dim tiles t, t + 1 of the warp's
        const int d0 = own0 + t * 8;
        const int voff = (kk * 16 + mrow + (mat & 1) * 8) * ld + d0 + (mat >> 1) * 8;
        ldmatrix_x4_trans(b, ks + voff);
        ldmatrix_x4_trans(bl, ks + kChunk * ld + voff);
        mma_split_pair(o[t], o[t + 1], a, al, b, bl, p.split_a);
      }
    }
    // Units end on chunk boundaries (unit_keys is whole chunks from key 0).
    if (splits > 1 && (c0 + kChunk >= j1 || (c0 + kChunk) % U == 0)) end_unit(c0 / U);
  }
  // Units of the range past the row's keys (the split counts the most keys the row could see).
  if (!kFold && splits > 1)
    for (int64_t u = max(u0, (n + U - 1) / U); u < u1; ++u) store_unit(u, false);

  // The rows written here: unsplit ones, and folded ones (partials are de-rotated as they merge).
  const bool folded = kFold && splits > 1;
  if (splits > 1 && !kFold) return;
  const bool derotate = p.o.rope_pos != nullptr;
  if (derotate) {
    rope_table(p.o.rope_pos[m], p.o.rope_freq, p.o.rope_R, rope_cs);
    __syncthreads();
  }
  // Rows gr, gr + 8 = heads h0 + gr, h0 + gr + 8; columns 2 tq, 2 tq + 1 of each dim tile.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t h = h0 + hg * kHeads + gr + 8 * r;
    if (h >= p.H) continue;
    float mul;
    if (folded) {
      mul = fold_finish(fm[r], fl[r], p.sinks[h]);
    } else {
      const float sink = p.sinks[h], mx = fmaxf(run_max[r], sink);
      const float w = run_max[r] == neg_inf() ? 0.f : expf(run_max[r] - mx);
      const float den = run_sum[r] * w + expf(sink - mx);
      mul = w / den;
    }
    auto value = [&](int t, int i) {
      return folded ? __fmul_rn(fo[t][2 * r + i], mul) : o[t][2 * r + i] * mul;
    };
    if (p.pairs) {  // pairs (d, d + 1) whole: de-rotated, fp32 or bf16
      const int64_t at = (m * p.H + h) * hd;
      const int first = derotate ? static_cast<int>(hd - 2 * p.o.rope_R) : hdp;
#pragma unroll
      for (int t = 0; t < kOwnTiles; ++t) {
        const int d = own0 + t * 8 + tq * 2;
        if (d >= hd) continue;
        float v0 = value(t, 0), v1 = value(t, 1);
        if (d >= first) {
          const int i = (d - first) / 2;
          rotate_by(v0, v1, rope_cs[i], rope_cs[p.o.rope_R + i]);
        }
        store_out_pair(p.o, at, d, v0, v1);
      }
    } else {  // fp32 only (launch_attention)
      float* dst = p.o.out + (m * p.H + h) * hd;
#pragma unroll
      for (int t = 0; t < kOwnTiles; ++t)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int64_t d = own0 + t * 8 + tq * 2 + i;
          if (d < hd) dst[d] = value(t, i);
        }
    }
  }
}

// One block per (query, head) of the rows whose units left partials: folds them in unit order
// and finishes with the sink as a folding block does (the same bits), then writes the head like
// the main kernel (store_out_pair). A thread takes dims 2 t, 2 t + 1 and the pair kMergeThreads
// pairs on (hd <= 4 kMergeThreads).
constexpr int kMergeThreads = 128;
static_assert(kMaxAttnHeadDim <= 4 * kMergeThreads, "two pairs of dims per merging thread");
__global__ void __launch_bounds__(kMergeThreads)
    flash_attention_merge_kernel(const AttnRow* rows, const float* part_o, const float* part_ml,
                                 int64_t hd, const float* sinks, int64_t H, AttnOutput out,
                                 bool pairs) {
  wait_for_prior_grid();
  const int64_t mh = blockIdx.x, m = mh / H, h = mh % H;
  const int splits = rows[m].splits;
  if (splits <= 1) return;
  const int64_t slot0 = rows[m].part_off * H + h * splits;
  const float* ml = part_ml + slot0 * 2;
  const int d0 = 2 * threadIdx.x, d1 = d0 + 2 * kMergeThreads;
  float o[4] = {0.f, 0.f, 0.f, 0.f}, M = neg_inf(), L = 0.f;
#pragma unroll 4
  for (int u = 0; u < splits; ++u) {
    const float* po = part_o + (slot0 + u) * hd;
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int d = (i < 2 ? d0 : d1) + (i & 1);
      v[i] = d < hd ? po[d] : 0.f;
    }
    float a, b;
    fold_scales(M, ml[2 * u], &a, &b, &M);
    L = fold_into(L, a, ml[2 * u + 1], b);
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] = fold_into(o[i], a, v[i], b);
  }
  const float mul = fold_finish(M, L, sinks[h]);
  const int64_t first = hd - 2 * out.rope_R;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int d = k ? d1 : d0;
    float v0 = __fmul_rn(o[2 * k], mul), v1 = __fmul_rn(o[2 * k + 1], mul);
    if (!pairs) {  // fp32 only (launch_attention)
      if (d < hd) out.out[mh * hd + d] = v0;
      if (d + 1 < hd) out.out[mh * hd + d + 1] = v1;
      continue;
    }
    if (d >= hd) continue;
    if (out.rope_pos && d >= first) {
      float cf, sf;
      rope_cos_sin(out.rope_pos[m], out.rope_freq[(d - first) / 2], -1.f, &cf, &sf);
      rotate_by(v0, v1, cf, sf);
    }
    store_out_pair(out, mh * hd, d, v0, v1);
  }
}

template <int NT, int G, int KS, bool kFold>
cudaError_t launch_nt_g(const AttnParams& p, unsigned blocks, cudaStream_t stream) {
  constexpr size_t bytes = attn_smem_bytes<NT, G, KS>();
  auto* kernel = flash_attention_kernel<NT, G, KS, kFold>;
  static const cudaError_t attr = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (attr != cudaSuccess) return attr;
  return launch_kernel(kernel, blocks, kWarps * 32 * G * KS, bytes, stream, p);
}

// Folding launches take one-group blocks of two warps per quarter (one for head dims up to 64),
// whatever attention_quarter_warps says: the fold's running O costs registers the other shapes
// do not have.
template <int NT>
cudaError_t launch_nt(const AttnParams& p, int groups_per_block, int quarter_warps, bool fold,
                      unsigned blocks, cudaStream_t stream) {
  if (fold) {
    if constexpr (NT >= 4)
      return launch_nt_g<NT, 1, 2, true>(p, blocks, stream);
    else
      return launch_nt_g<NT, 1, 1, true>(p, blocks, stream);
  }
  if (groups_per_block == 2) return launch_nt_g<NT, 2, 1, false>(p, blocks, stream);
  if constexpr (NT >= 4)
    if (quarter_warps == 2) return launch_nt_g<NT, 1, 2, false>(p, blocks, stream);
  return launch_nt_g<NT, 1, 1, false>(p, blocks, stream);
}

// The tunables' values (set_attention_pair_blocks, set_attention_split_keys,
// set_attention_fp16_qp).
int64_t pair_blocks_per_sm = kAttentionPairBlocksPerSm;
int64_t unit_keys = kAttentionSplitKeys;
bool fp16_qp = true;  // DEEPINFER_CUDA_ATTENTION_FP16_QP's default

}  // namespace

void set_attention_fp16_qp(bool on) {
  fp16_qp = on;
}

bool attention_fp16_qp() {
  return fp16_qp;
}

void set_attention_split_keys(int64_t keys) {
  unit_keys = std::max<int64_t>((keys + kChunk - 1) / kChunk, 1) * kChunk;
}

int64_t attention_split_keys() {
  return unit_keys;
}

void set_attention_pair_blocks(int64_t per_sm) {
  pair_blocks_per_sm = std::max<int64_t>(per_sm, 0);
}

int attention_groups_per_block(int64_t M, int64_t H, int num_sms) {
  const int64_t groups = (H + kHeads - 1) / kHeads;
  // Pairs where the one-group grid has pair_blocks_per_sm blocks per SM or more (prefill).
  return groups >= 2 && M * groups >=
                            pair_blocks_per_sm * static_cast<int64_t>(num_sms > 0 ? num_sms : 132)
             ? 2
             : 1;
}

int attention_quarter_warps(int groups_per_block, int64_t hd, int64_t blocks, int num_sms) {
  return groups_per_block == 1 && hd > 64 && blocks <= (num_sms > 0 ? num_sms : 132) ? 2 : 1;
}

int attention_splits(int64_t M, int64_t H, int64_t max_keys, int num_sms) {
  const int64_t groups = (H + kHeads - 1) / kHeads;
  const int64_t target = 3 * static_cast<int64_t>(num_sms > 0 ? num_sms : 132);
  if (M * groups >= target || max_keys <= unit_keys) return 1;
  // ceil(max_keys / unit_keys) without max_keys + unit_keys - 1, which overflows near INT64_MAX.
  const int64_t units = max_keys / unit_keys + (max_keys % unit_keys != 0);
  return static_cast<int>(std::min<int64_t>(units, kMaxAttnUnits));
}

AttnUnitPlan attention_unit_plan(int64_t split_rows, int64_t units, int64_t H, int num_sms) {
  const int64_t groups = (H + kHeads - 1) / kHeads, sms = num_sms > 0 ? num_sms : 132;
  if (split_rows <= 0) return {};
  // A block per SM at least: the rows' blocks fold their units (no partials, no merge).
  if (split_rows * groups >= sms) return {true, 1};
  // Else spread the units over about a block per SM (two warps per dim quarter), each running
  // consecutive units (32-key units at batch 8, 4k context: 7.54 ms a step at two blocks per SM,
  // 7.49 at one; docs/perf.md).
  return {false, std::max<int64_t>(1, (units * groups + sms - 1) / sms)};
}

cudaError_t launch_attention(const float* q, int64_t M, int64_t H, int64_t hd, const AttnRow* rows,
                             int groups_per_block, int quarter_warps, int64_t blocks,
                             bool rows_uniform, const AttnUnitPlan& units, int64_t window,
                             const int32_t* list, const int32_t* count, int64_t Kmax,
                             const float* sinks, float scale, float* workspace,
                             int64_t partial_slots, const AttnOutput& out, int32_t* err,
                             cudaStream_t stream) {
  if (M <= 0 || H <= 0) return cudaSuccess;
  // Exactly one output; bf16 and the de-rotation write whole pairs.
  const bool pairs = attention_stores_pairs(
      hd, out.out ? static_cast<const void*>(out.out) : out.out_bf16, out.out_bf16 != nullptr);
  if ((out.out == nullptr) == (out.out_bf16 == nullptr) ||
      ((out.out_bf16 || out.rope_pos) && !pairs) || out.rope_R < 0 || 2 * out.rope_R > hd ||
      (out.rope_pos && (!out.rope_freq || out.rope_R == 0)))
    return cudaErrorInvalidValue;
  const int64_t groups =
      (H + kHeads * groups_per_block - 1) / (kHeads * groups_per_block);  // per row and split
  if (hd < 1 || hd > kMaxAttnHeadDim || (groups_per_block != 1 && groups_per_block != 2) ||
      (quarter_warps != 1 && (quarter_warps != 2 || groups_per_block != 1 || hd <= 64)) ||
      (units.fold && groups_per_block != 1) || units.units_per_block < 1 || blocks < M * groups ||
      blocks > 0x7fffffff || M * H > 0x7fffffff)
    return cudaErrorInvalidValue;
  const bool any_split = partial_slots > 0;
  if (any_split && !workspace) return cudaErrorInvalidValue;
  const int64_t blocks_per_row = rows_uniform && blocks % M == 0 ? blocks / M : 0;
  const AttnParams p{q,
                     M,
                     H,
                     hd,
                     rows,
                     blocks_per_row,
                     window,
                     list,
                     count,
                     Kmax,
                     sinks,
                     scale,
                     workspace,
                     any_split ? workspace + partial_slots * hd : nullptr,
                     err,
                     out,
                     pairs,
                     unit_keys,
                     units.units_per_block,
                     !attention_fp16_qp()};
  const unsigned nblocks = static_cast<unsigned>(blocks);
  const int g = groups_per_block, qw = quarter_warps;
  const bool fold = units.fold;
  cudaError_t e;
  if (hd <= 64)
    e = launch_nt<2>(p, g, qw, fold, nblocks, stream);
  else if (hd <= 128)
    e = launch_nt<4>(p, g, qw, fold, nblocks, stream);
  else if (hd <= 256)
    e = launch_nt<8>(p, g, qw, fold, nblocks, stream);
  else
    e = launch_nt<16>(p, g, qw, fold, nblocks, stream);
  if (e != cudaSuccess || !any_split) return e;
  return launch_kernel(flash_attention_merge_kernel, static_cast<unsigned>(M * H), kMergeThreads, 0,
                       stream, rows, p.part_o, p.part_ml, hd, sinks, H, out, pairs);
}

namespace {

__global__ void split_keys_kernel(const float* src, int64_t rows, int64_t hd4, uint16_t* dst) {
  wait_for_prior_grid();
  const int64_t n = rows * hd4;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / hd4, c = i % hd4;
    const float4 v = __ldg(reinterpret_cast<const float4*>(src) + i);
    const float x[4] = {v.x, v.y, v.z, v.w};
    uint16_t* row = dst + r * 8 * hd4;  // 2 hd halves
    store_hi_lo(row + 4 * c, row + 4 * (hd4 + c), x);
  }
}

}  // namespace

cudaError_t launch_split_keys(const float* src, int64_t rows, int64_t hd, uint16_t* dst,
                              cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (hd % 4 != 0 || (reinterpret_cast<uintptr_t>(src) & 15) != 0) return cudaErrorInvalidValue;
  return launch_kernel(split_keys_kernel, blocks_for(rows * hd / 4, 256), 256, 0, stream, src, rows,
                       hd / 4, dst);
}

}  // namespace deepinfer::cuda
