// The tensor-core tiles behind the routed experts' grouped GEMMs (kernels_grouped_gemm.cu) and
// the decode-sized dense products (kernels_dense_gemm.cu): mma.sync m16n8k16, bf16 operands, fp32
// accumulation. Three uses:
//   up:    act[r, i] = swiglu(x[row_token[r]] . w1[e, i], x[row_token[r]] . w3[e, i])  (bf16 out;
//          a block computes BN/2 gate and the matching BN/2 up features, paired in the epilogue)
//   down:  y[r, d] = act[r] . w2[e, d]                                                (fp32 out)
//   dense: out[m, n] (+)= x[m] . w[n], the decode-sized products of matmul / grouped_matmul
//          (bf16 x, or a row or two of fp32 x kept resident as bf16: launch_dense_gemm_f32)
// Weight tiles stream in with cp.async through a multi-stage ring, overlapped with the
// tensor-core work. Tile shapes: Wide (64 rows x 128 columns, 2 stages) for prefill-sized work;
// Narrow (16 x 64, 4 stages) for decode, where an expert has a few rows and the weight bytes in
// flight set the speed; Thin (16 x 16, one warp, 8 stages) for dense products of
// <= 16 rows (Narrow up to kDenseNarrowMaxRows, Wide past it). Every output accumulates its 16-wide
// k chunks in increasing order in one register (dense products split over K: one register chain per
// segment, segments added in order), so every shape gives the same bits for a row. Device code and
// launch helpers only: each .cu that includes this instantiates the modes it launches.
#pragma once

#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/mxfp4.cuh"

#include <cooperative_groups.h>

#include <algorithm>
#include <type_traits>

namespace deepinfer::cuda {

// Not in an anonymous namespace: the two .cu files share these templates (each instantiates its
// own modes).
namespace gemm_tiles {

constexpr int kBK = 64;       // k per stage: a tile row is 8 chunks of 16 bytes
constexpr int kLd = kBK + 8;  // bf16 row stride of the staged tiles (16-byte rows apart in banks)

// BM x BN block tile, WARPS_M x WARPS_N warps (each (BM / WARPS_M) x (BN / WARPS_N), multiples
// of 16), STAGES-deep cp.async ring.
template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct TileShape {
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int STAGES = STAGES_;
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;
  static constexpr int MI = WTM / 16, NJ = WTN / 16;
  static constexpr int kEpiLd = BN + 4;
  static constexpr size_t kStageBytes = static_cast<size_t>(STAGES) * (BM + BN) * kLd * 2;
  static constexpr size_t kEpiBytes = static_cast<size_t>(BM) * kEpiLd * 4;
  static constexpr size_t kSmemBytes = kStageBytes > kEpiBytes ? kStageBytes : kEpiBytes;
  static constexpr int kAccPerThread = MI * 2 * NJ * 4;  // accumulators per thread
  static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tiles are multiples of 16");
  static_assert((BN * 8) % kThreads == 0 && (BM * 8) % kThreads == 0 && (BM * 16) % kThreads == 0,
                "loaders cover the tiles evenly");
};
using Wide = TileShape<64, 128, 2, 4, 2>;
using Narrow = TileShape<16, 64, 1, 4, 4>;
// Dense products of one to 16 rows (decode): one warp per 16 columns, 8 stages deep, so that a
// 4096-wide output still spreads over 256 blocks with ~14 KB of weights in flight each.
using Thin = TileShape<16, 16, 1, 1, 8>;

// kUp / kDown: the experts' two GEMMs over the plan's tiles. kDense: one plain product out[M, N]
// (+)= x[M, K] w[N, K]^T of bf16 x (cp.async-staged like down's activations; staging fp32 rows
// through registers a stage ahead left a decode row's product latency-bound), batched over
// blockIdx.y.
// kDenseSplitGemm: the same with K split into segments (its own instantiation, so unsplit
// products and the experts keep the plain loop's code).
enum Mode { kUpGemm, kDownGemm, kDenseGemm, kDenseSplitGemm };

// Up-GEMM tiles staging their fp32 A rows by cp.async (stages_f32_a): A's stages in fp32.
template <typename T>
inline constexpr size_t f32a_stage_bytes = static_cast<size_t>(T::STAGES) *
                                           (T::BM * (kBK + 8) * 4 + T::BN * kLd * 2);
// Dense products summing K segments in turn keep the running sum past the stages,
// [output][thread] (one float per accumulator; registers would cost the widest tile half its
// occupancy).
template <typename T>
inline constexpr size_t running_sum_bytes = static_cast<size_t>(T::kAccPerThread) * T::kThreads * 4;

// The up GEMM's fp32 A rows (x gathered by row_token): on Narrow tiles (decode) they stream in
// by cp.async with the weight stages and are rounded to bf16 as the fragments are read; on Wide
// tiles they go through registers a stage ahead, rounded as they are stored (the same values).
// Through registers, each Narrow stage waited on its own A load: ~1 us per 8 KB k tile of
// weights, the expert GEMMs' bound at batch 1.
template <Mode kMode, typename T>
inline constexpr bool stages_f32_a = (kMode == kUpGemm) && (T::BM == Narrow::BM);
template <Mode kMode, typename T>
inline constexpr size_t tile_smem_bytes = !stages_f32_a<kMode, T>              ? T::kSmemBytes
                                          : f32a_stage_bytes<T> > T::kEpiBytes ? f32a_stage_bytes<T>
                                                                               : T::kEpiBytes;

struct GroupedArgs {
  const float* x_f32;      // up: x [*, K] fp32, rows gathered through row_token
  const uint16_t* x_bf16;  // down: act [R, K] bf16; dense: x [M, ldx] bf16
  const int32_t* row_token;
  const int32_t* offsets;  // [E + 1]
  const int32_t* tiles;    // [max_tiles] packed (expert, first row)
  const int32_t* num_tiles;
  const uint16_t* w1;  // [E, N, K] (down: w2; dense: w [N, ldw])
  const uint16_t* w3;  // up only
  int64_t N, K;
  float limit;
  uint16_t* act_out;  // up: [R, N] bf16
  float* y_out;       // down: [R, N] fp32; dense: out [M, ldo]
  // dense only: rows, leading dimensions and batch strides (elements), accumulate into out
  int64_t M = 0, ldx = 0, ldw = 0, ldo = 0, sx = 0, sw = 0, so = 0;
  bool accumulate = false;
  // dense only: K split into `splits` segments of seg_tiles k tiles (blockIdx.z); with more than
  // one, partials [batch][splits][M][N] and one arrival counter per output tile (zero between
  // calls: the last block to arrive sums the partials in segment order and resets it).
  int splits = 1, seg_tiles = 0;
  float* partials = nullptr;
  int32_t* counters = nullptr;
  // the split's blocks of an output tile form one thread block cluster (blockIdx.z its rank),
  // and segment 0's block sums the others' partials out of their shared memory instead
  bool cluster_split = false;
  // down only: the MoE combine of the call's c_tokens tokens (k slots each) into c_out, done
  // for each column tile by the tile's last block to finish (counters [column tiles], zero
  // between calls), so no combine kernel follows; the sums launch_moe_combine makes.
  const int32_t* c_where = nullptr;
  const float* c_weights = nullptr;
  float* c_out = nullptr;
  int64_t c_tokens = 0, c_k = 0;
  // kFp4 (the experts' GEMMs on MXFP4 weights, w1 / w3 unused): packed [E, N, K / 2] and
  // scales [E, K / 32, N] (kernels.h, Mxfp4Matrix); q3 / qs3 up only.
  const uint8_t *q1 = nullptr, *q3 = nullptr, *qs1 = nullptr, *qs3 = nullptr;
};

// Clusters of a split's segments: at most this many (the portable cluster size); more segments
// take the workspace and counters.
constexpr int kMaxClusterSplits = 8;

// The end of a split dense product: this block's partial (segment blockIdx.z) goes to the
// workspace; the block that arrives last at its output tile sums the tile's partials in segment
// order (so a row's bits depend on N and K, never on M or on which block came last), adds out's
// old values when accumulating, writes out and resets the tile's counter for the next call.
template <typename T>
__device__ __forceinline__ void dense_split_epilogue(const GroupedArgs& g,
                                                     const float (&acc)[T::MI][2 * T::NJ][4],
                                                     int64_t r0, int rows, int64_t n0,
                                                     int64_t col_tiles, int64_t slot, int64_t ct) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wm = warp % T::WARPS_M, wn = warp / T::WARPS_M;
  const int gr = lane >> 2, tq = lane & 3;
  const int64_t b = blockIdx.y, plane = g.M * g.N;
  float* part = g.partials + b * g.splits * plane;
  float* dst = g.y_out + b * g.so;
  // The outputs this thread's accumulators hold: offsets in a partial plane (-1: outside the
  // product; a split product's workspace fits 32-bit offsets, launch_dense_gemm checks).
  constexpr int kOut = T::MI * 2 * (2 * T::NJ) * 2;
  int32_t at[kOut];
#pragma unroll
  for (int i = 0; i < T::MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 2 * T::NJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int o = ((i * 2 + h) * 2 * T::NJ + j) * 2 + e;
          const int r = wm * T::WTM + i * 16 + gr + 8 * h;
          const int64_t n = n0 + wn * T::WTN + j * 8 + tq * 2 + e;
          const bool in = r < rows && n < g.N;
          at[o] = in ? static_cast<int32_t>((r0 + r) * g.N + n) : -1;
          if (in) part[blockIdx.z * plane + at[o]] = acc[i][j][2 * h + e];
        }
  __threadfence();  // the partial is visible device-wide before the arrival is counted
  __syncthreads();
  __shared__ int last;
  int32_t* counter = g.counters + (b * ((g.M + T::BM - 1) / T::BM) + slot) * col_tiles + ct;
  if (tid == 0) last = atomicAdd(counter, 1) == g.splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();  // the other blocks' partials are read after their arrivals
  // Sum in segment order, kChunk segments' loads in flight at once (one L2 round trip each
  // chunk instead of one per load).
  constexpr int kChunk = kOut >= 32 ? 1 : 32 / kOut;
  float sum[kOut];
  for (int s0 = 0; s0 < g.splits; s0 += kChunk) {
    float p[kChunk][kOut];
#pragma unroll
    for (int c = 0; c < kChunk; ++c)
#pragma unroll
      for (int o = 0; o < kOut; ++o)
        p[c][o] = s0 + c < g.splits && at[o] >= 0 ? __ldcg(part + (s0 + c) * plane + at[o]) : 0.f;
#pragma unroll
    for (int c = 0; c < kChunk; ++c)
#pragma unroll
      for (int o = 0; o < kOut; ++o)
        if (s0 + c < g.splits) sum[o] = s0 + c == 0 ? p[c][o] : sum[o] + p[c][o];
  }
#pragma unroll
  for (int o = 0; o < kOut; ++o)
    if (at[o] >= 0) {
      float* d = dst + (at[o] / g.N) * g.ldo + at[o] % g.N;
      *d = g.accumulate ? sum[o] + *d : sum[o];
    }
  if (tid == 0) *counter = 0;
}

// The end of a split dense product whose segments form a cluster: each block leaves its partial
// in its shared memory (over the drained stages), and segment 0's block adds the others' to its
// own in segment order, the order dense_split_epilogue sums in (the same bits), into acc; it
// returns true there, and the caller writes acc out as an unsplit product would. The other blocks
// return false once segment 0 has read their partials.
template <typename T>
__device__ __forceinline__ bool dense_cluster_epilogue(const GroupedArgs& g,
                                                       float (&acc)[T::MI][2 * T::NJ][4],
                                                       unsigned char* smem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  constexpr int kAcc = T::kAccPerThread, NT = T::kThreads;
  constexpr int kMaxOthers = kMaxClusterSplits - 1;
  static_assert(
      static_cast<size_t>(kAcc) * NT * 4 <= static_cast<size_t>(T::STAGES) * T::BN * kLd * 2,
      "the partial fits in the weight stages");
  float* mine = reinterpret_cast<float*>(smem);  // [acc][thread]
  const int tid = threadIdx.x;
  __syncthreads();  // the last stage is no longer read
#pragma unroll
  for (int i = 0; i < T::MI; ++i)
#pragma unroll
    for (int j = 0; j < 2 * T::NJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) mine[((i * 2 * T::NJ + j) * 4 + e) * NT + tid] = acc[i][j][e];
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every segment's partial is written and visible in the cluster
  const bool first = cluster.block_rank() == 0;
  if (first) {
    // kBatch segments' remote loads in flight at once (all of them for the one-warp tiles),
    // then added in segment order.
    constexpr int kBatch = kAcc * kMaxOthers <= 64 ? kMaxOthers : (64 / kAcc > 0 ? 64 / kAcc : 1);
    for (int s0 = 1; s0 < g.splits; s0 += kBatch) {
      float p[kBatch][kAcc];
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        if (s0 + b < g.splits) {
          const float* theirs = cluster.map_shared_rank(mine, s0 + b);
#pragma unroll
          for (int a = 0; a < kAcc; ++a) p[b][a] = theirs[a * NT + tid];
        }
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        if (s0 + b < g.splits) {
#pragma unroll
          for (int i = 0; i < T::MI; ++i)
#pragma unroll
            for (int j = 0; j < 2 * T::NJ; ++j)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[i][j][e] += p[b][(i * 2 * T::NJ + j) * 4 + e];
        }
    }
  }
  cluster.sync();  // segment 0 has read the others' shared memory: they may exit
  return first;
#else
  return false;  // clusters are launched on sm_90+ only
#endif
}

// A dense product of a row or two with fp32 x keeps the block's whole A (its rows x its K
// segment, as bf16) in shared memory, converted once at the start while the first weight
// stages load: no cast kernel ahead of the product (~2 us each in a decode step). Thin tiles,
// weights only in the stages. Up to set_dense_resident_a's elements of A per block (at most
// kResidentAMaxElems; 4096 by default: wo_b's 2752-value segments 25.2 -> 23.8 us against the cast
// path, measured on the H200). Deeper (12) or shallower (4, 6) weight rings measured slower.
constexpr int64_t kResidentAMaxElems = 8192;

// The bf16 row stride of a resident A over `seg_tiles` k tiles (16-byte rows, banks staggered).
__host__ __device__ constexpr int64_t resident_lda(int64_t seg_tiles) {
  return seg_tiles * kBK + 8;
}

// The dynamic shared memory of a resident-A block: its weight stages, then M rows of A over
// seg_tiles k tiles and a zero line.
inline size_t resident_smem(int64_t M, int64_t seg_tiles) {
  return static_cast<size_t>(Thin::STAGES) * Thin::BN * kLd * 2 +
         static_cast<size_t>(M * resident_lda(seg_tiles) + 16) * 2;
}

// The packed weight stages of kFp4 tiles: a row's 32 bytes a k tile, rows 48 bytes apart (a
// warp's words of eight rows fall at most two to a bank), then the k tile's two scale groups
// [2][BN].
constexpr int kPackedLd = 48;

// Grid: (tile slot) x (column tile) [x batch]. kUp: columns are BN/2 features of w1 then the
// same of w3. kResA (dense modes, g.x_f32): A resident in shared memory after the weight stages.
// kFp4 (kUp / kDown): MXFP4 weights (g.q*), staged packed and widened as the fragments are read
// into the values dequantising gives, so the outputs are the bf16 weights' bits; K % 64 == 0.
template <Mode kMode, typename T, bool kResA = false, bool kFp4 = false>
__global__ void __launch_bounds__(T::kThreads) grouped_gemm_kernel(GroupedArgs g) {
  constexpr bool kUp = kMode == kUpGemm, kDown = kMode == kDownGemm;
  constexpr bool kSplit = kMode == kDenseSplitGemm;
  // kResA and the experts' down GEMM wait after their first weight stages are in flight
  // (nothing writes weights): they stream in while the kernel before drains. The down GEMM's
  // plan is complete by then: the up GEMM before it triggers its dependents only after its own
  // wait, which the plan's kernel precedes (read past L1 all the same, __ldcg).
  constexpr bool kEarlyWeights = kResA || kDown;
  if constexpr (!kEarlyWeights) wait_for_prior_grid();
  constexpr bool kDense = kMode == kDenseGemm || kSplit;
  static_assert(!kResA || kDense, "resident A is for dense products");
  static_assert(!kFp4 || kUp || kDown, "MXFP4 weights are the experts'");
  constexpr bool kAStaged = stages_f32_a<kMode, T>;  // fp32 A rows by cp.async
  constexpr bool kAF32 = kUp && !kAStaged;  // fp32 A rows through registers (else bf16 by cp.async)
  constexpr int BM = T::BM, BN = T::BN, S = T::STAGES, NT = T::kThreads;
  constexpr int kLdF = kBK + 8;  // fp32 row stride of staged A (half-warps' float2 reads hit
                                 // distinct banks)
  extern __shared__ __align__(16) unsigned char smem[];
  float* Af = reinterpret_cast<float*>(smem);                  // kAStaged: [S][BM][kLdF]
  __nv_bfloat16* As = reinterpret_cast<__nv_bfloat16*>(smem);  // [S][BM][kLd] (not kResA)
  __nv_bfloat16* Bs = kAStaged ? reinterpret_cast<__nv_bfloat16*>(Af + S * BM * kLdF)
                               : As + (kResA ? 0 : S * BM * kLd);  // [S][BN][kLd]
  __nv_bfloat16* Ares = Bs + S * BN * kLd;                         // kResA: [rows][lda], zeros
  unsigned char* Bp = reinterpret_cast<unsigned char*>(Bs);        // kFp4: [S][BN][kPackedLd]
  unsigned char* Sc = Bp + S * BN * kPackedLd;                     // kFp4: [S][2][BN]
  static_assert(!kFp4 || S * BN * (kPackedLd + 2) <= S * BN * kLd * 2, "packed stages fit");

  constexpr int kFeat = kUp ? BN / 2 : BN;  // output features per block
  const int64_t col_tiles = (g.N + kFeat - 1) / kFeat;
  // A dense product's blocks take the row tiles of a column tile one after the other, so the
  // blocks sharing a weight tile run side by side and read it from HBM once (row tiles first,
  // a 64-row product's four 16-row tiles read each weight tile four times: batch 64 -2%).
  const int64_t row_tiles = gridDim.x / col_tiles;
  const int64_t slot = kDense ? blockIdx.x % row_tiles : blockIdx.x / col_tiles;
  const int64_t ct = kDense ? blockIdx.x / row_tiles : blockIdx.x % col_tiles;
  const int64_t n0 = ct * kFeat;
  const int64_t K = g.K;
  int64_t r0 = 0, ldw = K;
  int rows = 0;
  const uint16_t *w1 = nullptr, *w3 = nullptr;
  const uint8_t *p1 = nullptr, *p3 = nullptr, *ps1 = nullptr, *ps3 = nullptr;  // kFp4
  const uint16_t* x_bf16 = g.x_bf16;
  int64_t ldx = K;
  if constexpr (kDense) {
    r0 = slot * BM;
    if (r0 >= g.M) return;
    rows = g.M - r0 < BM ? static_cast<int>(g.M - r0) : BM;
    ldw = g.ldw;
    ldx = g.ldx;
    w1 = g.w1 + blockIdx.y * g.sw;
    x_bf16 += blockIdx.y * g.sx;
  } else {
    // The tile count and this slot's entry in one round trip (the entry is in the buffer's
    // max_tiles, read even past the count, used only below it).
    const int32_t num_tiles = __ldcg(g.num_tiles), e = __ldcg(g.tiles + 2 * slot);
    r0 = __ldcg(g.tiles + 2 * slot + 1);
    if (slot >= num_tiles) return;
    if constexpr (kFp4) {
      p1 = g.q1 + static_cast<int64_t>(e) * g.N * (K / 2);
      ps1 = g.qs1 + static_cast<int64_t>(e) * (K / 32) * g.N;
      if constexpr (kUp) {
        p3 = g.q3 + static_cast<int64_t>(e) * g.N * (K / 2);
        ps3 = g.qs3 + static_cast<int64_t>(e) * (K / 32) * g.N;
      }
    } else {
      w1 = g.w1 + static_cast<int64_t>(e) * g.N * K;
      if constexpr (kUp) w3 = g.w3 + static_cast<int64_t>(e) * g.N * K;
    }
    // The row count and (up) the row tokens are two more dependent loads before the ring's
    // first copies: the first stages' weight lines start towards L2 meanwhile (one 128-byte
    // line per row and stage, threads tid % 8 < S - 1 of each row, the rows the loader
    // below gives each thread).
    if (!kFp4 && static_cast<int>(threadIdx.x & 7) < S - 1) {
      const int64_t k = static_cast<int64_t>(threadIdx.x & 7) * kBK;
#pragma unroll
      for (int i = 0; i < BN * 8 / NT; ++i) {
        const int br = static_cast<int>(threadIdx.x >> 3) + (NT / 8) * i;
        const int64_t n = kUp ? n0 + br % (BN / 2) : n0 + br;
        if (n < g.N && k < K) prefetch_l2((kUp && br >= BN / 2 ? w3 : w1) + n * K + k);
      }
    }
    const int64_t r_end = __ldcg(g.offsets + e + 1);
    rows = r_end - r0 < BM ? static_cast<int>(r_end - r0) : BM;
  }

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wm = warp % T::WARPS_M, wn = warp / T::WARPS_M;

  // Loader maps. B and bf16 A: thread -> 16-byte chunk column tid % 8 of rows tid / 8 + (NT/8) i.
  // fp32 A: 4 floats at column (tid % 16) * 4 of rows tid / 16 + (NT/16) i.
  constexpr int kBLoads = BN * 8 / NT, kALoads = BM * 8 / NT, kAF32Loads = BM * 16 / NT;
  const int bc = (tid & 7) * 8, ac = (tid & 15) * 4;
  const float* a_src[kAF32Loads];
  const uint16_t* ab_src[kALoads];
  if constexpr (kUp) {
#pragma unroll
    for (int i = 0; i < kAF32Loads; ++i) {
      const int r = (tid >> 4) + (NT / 16) * i;
      a_src[i] = r < rows ? g.x_f32 + static_cast<int64_t>(g.row_token[r0 + r]) * K : nullptr;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int r = (tid >> 3) + (NT / 8) * i;
      ab_src[i] = r < rows ? x_bf16 + (r0 + r) * ldx : nullptr;
    }
  }
  const uint16_t* b_src[kBLoads];
  bool b_ok[kBLoads];
#pragma unroll
  for (int i = 0; i < kBLoads; ++i) {
    const int br = (tid >> 3) + (NT / 8) * i;
    const int64_t n = kUp ? n0 + br % (BN / 2) : n0 + br;
    const uint16_t* base = kUp && br >= BN / 2 ? w3 : w1;
    b_ok[i] = n < g.N;
    b_src[i] = base + (b_ok[i] ? n : 0) * ldw;
  }
  // kFp4 loader maps: 16-byte chunk tid % 2 of packed rows tid / 2 + (NT/2) i; threads below
  // kSChunks a 16-row run of one scale group (g.N % 16 == 0: a run is all in or all out).
  constexpr int kPLoads = kFp4 ? BN * 2 / NT : 1, kSChunks = 2 * BN / 16;
  static_assert(!kFp4 || ((BN * 2) % NT == 0 && kSChunks <= NT), "packed loaders cover the tiles");
  const uint8_t* p_src[kPLoads];
  int p_dst[kPLoads];
  const uint8_t* s_src = nullptr;
  int s_dst = 0;
  if constexpr (kFp4) {
#pragma unroll
    for (int i = 0; i < kPLoads; ++i) {
      const int br = (tid >> 1) + (NT / 2) * i;
      const int64_t n = kUp ? n0 + br % (BN / 2) : n0 + br;
      p_src[i] = n < g.N ? (kUp && br >= BN / 2 ? p3 : p1) + n * (K / 2) + (tid & 1) * 16 : nullptr;
      p_dst[i] = br * kPackedLd + (tid & 1) * 16;
    }
    const int sg = tid / (BN / 16), sr = (tid % (BN / 16)) * 16;
    const bool second = kUp && sr >= BN / 2;
    const int64_t sn = n0 + (second ? sr - BN / 2 : sr);
    if (tid < kSChunks && sn < g.N) s_src = (second ? ps3 : ps1) + sg * g.N + sn;
    s_dst = sg * BN + sr;
  }

  // k tiles [kt0, KT) of this block: all of K, or one segment of a split product.
  int KT = static_cast<int>((K + kBK - 1) / kBK), kt0 = 0;
  if constexpr (kSplit) {
    kt0 = static_cast<int>(blockIdx.z) * g.seg_tiles;
    if (gridDim.z > 1) KT = min(KT, kt0 + g.seg_tiles);
  }
  // Weights (and staged A) of stage kt by cp.async, one group per call; `a` / `w` false leaves
  // A / the weights out (the down GEMM's first stages: weights before its wait, A after).
  auto load_stage = [&](int kt, bool w = true, bool a = true) {
    if (kt < KT) {
      const int buf = (kt - kt0) % S;
      const int64_t k = static_cast<int64_t>(kt) * kBK + bc;
      const bool kin = k < K;
      if (w && kFp4) {  // whole k tiles: kt < KT is in
#pragma unroll
        for (int i = 0; i < kPLoads; ++i)
          cp_async16(Bp + buf * BN * kPackedLd + p_dst[i],
                     p_src[i] ? p_src[i] + static_cast<int64_t>(kt) * (kBK / 2) : g.q1,
                     p_src[i] != nullptr);
        if (tid < kSChunks)
          cp_async16(Sc + buf * 2 * BN + s_dst,
                     s_src ? s_src + 2 * static_cast<int64_t>(kt) * g.N : g.qs1, s_src != nullptr);
      } else if (w) {
#pragma unroll
        for (int i = 0; i < kBLoads; ++i)
          cp_async16(Bs + (buf * BN + (tid >> 3) + (NT / 8) * i) * kLd + bc,
                     b_src[i] + (kin ? k : 0), b_ok[i] && kin);
      }
      if (a) {
        if constexpr (kAStaged) {
          const int64_t ka = static_cast<int64_t>(kt) * kBK + ac;  // K % 8 == 0: whole chunks
          const bool ain = ka < K;
          // A tile's rows past `rows` are not staged at all (a decode expert's 15 of 16): an
          // output row reads only its own row of A, and those rows' outputs are never stored.
#pragma unroll
          for (int i = 0; i < kAF32Loads; ++i)
            if (a_src[i])
              cp_async16(Af + (buf * BM + (tid >> 4) + (NT / 16) * i) * kLdF + ac,
                         a_src[i] + (ain ? ka : 0), ain);
        } else if constexpr (!kAF32 && !kResA) {
#pragma unroll
          for (int i = 0; i < kALoads; ++i)
            if (ab_src[i])
              cp_async16(As + (buf * BM + (tid >> 3) + (NT / 8) * i) * kLd + bc,
                         ab_src[i] + (kin ? k : 0), kin);
        }
      }
    }
    cp_async_commit();  // empty past the end, so the group count stays uniform
  };
  float4 a_reg[kAF32Loads];
  auto load_a = [&](int kt) {  // up only: fp32 rows gathered into registers
    const int64_t k = static_cast<int64_t>(kt) * kBK + ac;
#pragma unroll
    for (int i = 0; i < kAF32Loads; ++i)
      a_reg[i] = a_src[i] && k < K ? __ldg(reinterpret_cast<const float4*>(a_src[i] + k))
                                   : make_float4(0.f, 0.f, 0.f, 0.f);
  };
  auto store_a = [&](int kt) {  // up only: registers -> bf16 tile of stage kt (kt0 is 0)
    const int buf = kt % S;
#pragma unroll
    for (int i = 0; i < kAF32Loads; ++i) {
      uint2 v;
      v.x = pack_bf16(a_reg[i].x, a_reg[i].y);
      v.y = pack_bf16(a_reg[i].z, a_reg[i].w);
      *reinterpret_cast<uint2*>(As + (buf * BM + (tid >> 4) + (NT / 16) * i) * kLd + ac) = v;
    }
  };

  float acc[T::MI][2 * T::NJ][4];
#pragma unroll
  for (int i = 0; i < T::MI; ++i)
#pragma unroll
    for (int j = 0; j < 2 * T::NJ; ++j)
      acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

  // The first S - 1 stages before the loop. The down GEMM's: the weight stages before its wait,
  // then the A stages, so the loop's wait for stage kt (all but S - 2 groups) still covers both.
  constexpr int kFirstStages = S - 1;
#pragma unroll
  for (int st = 0; st < kFirstStages; ++st) load_stage(kt0 + st, true, !kDown);
  if constexpr (kEarlyWeights) wait_for_prior_grid();
  if constexpr (kDown)
#pragma unroll
    for (int st = 0; st < kFirstStages; ++st) load_stage(kt0 + st, false, true);
  // Once its last weight stage is queued, the kernel after this one may be scheduled: its blocks
  // take the SMs this grid's leave while it computes its last stages (it still waits for this
  // grid to finish before touching its outputs). Batch 1 2.638 -> 2.617 ms, 64k 2.752 -> 2.730.
  if (KT - kt0 <= S - 1) trigger_dependents();
  if constexpr (kAF32) {
    load_a(0);
    store_a(0);
  }
  // kResA: this block's rows of x over its k tiles [kt0, KT) as bf16 (zeros past K), loaded
  // while the weight stages above are in flight; a 16-byte zero line stands in for the tile's
  // rows past `rows`.
  const int64_t lda = resident_lda(KT - kt0);
  __nv_bfloat16* a_zero = Ares + rows * lda;
  if constexpr (kResA) {
    // 32-bit positions stepped without division (a 64-bit divide per load made this prologue
    // ~1800 instructions, half a one-row product's time in ncu's samples).
    const float* xa = g.x_f32 + blockIdx.y * g.sx + r0 * g.ldx + static_cast<int64_t>(kt0) * kBK;
    const int per_row = (KT - kt0) * (kBK / 4);  // float4s of a row's segment (a multiple of 16)
    const int k_left = static_cast<int>(K - static_cast<int64_t>(kt0) * kBK);  // valid k
    constexpr int kBatch = 16;                  // float4 loads in flight per thread
    int r = tid / per_row, k4 = tid % per_row;  // this thread's next float4 (row, column)
    while (r < rows) {
      float4 v[kBatch];
      int vr[kBatch], vk[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        vr[u] = r;
        vk[u] = k4 * 4;
        v[u] = r < rows && vk[u] < k_left
                   ? __ldg(reinterpret_cast<const float4*>(xa + r * g.ldx + vk[u]))
                   : make_float4(0.f, 0.f, 0.f, 0.f);
        for (k4 += NT; k4 >= per_row; k4 -= per_row) ++r;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (vr[u] < rows)
          *reinterpret_cast<uint2*>(Ares + vr[u] * lda + vk[u]) =
              make_uint2(pack_bf16(v[u].x, v[u].y), pack_bf16(v[u].z, v[u].w));
    }
    if (tid < 2) reinterpret_cast<uint4*>(a_zero)[tid] = make_uint4(0u, 0u, 0u, 0u);
    __syncthreads();
  }
  // A split product on a one-block-per-tile grid (gridDim.z == 1) sums its segments here, one
  // after the other, in the order the split grid's last block does (running sum in shared
  // memory past the stages).
  const bool in_block_split = kSplit && gridDim.z == 1;
  float* total = reinterpret_cast<float*>(smem + T::kSmemBytes) + tid;  // [acc][thread]
  int seg_left = g.seg_tiles;  // k tiles left in the current segment (no modulo in the loop)
  const int mat = lane >> 3, mrow = lane & 7;
  for (int kt = kt0; kt < KT; ++kt) {
    const int buf = (kt - kt0) % S;
    cp_async_wait<S - 2>();  // stage kt has landed (this thread's part)
    __syncthreads();         // ... everyone's, and stage kt - 1 is no longer read
    load_stage(kt + S - 1);
    if (kt + S - 1 == KT - 1) trigger_dependents();  // the last weight stage is queued
    if constexpr (kAF32)
      if (kt + 1 < KT) load_a(kt + 1);
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
      uint32_t a[T::MI][4], b[T::NJ][4];
#pragma unroll
      for (int i = 0; i < T::MI; ++i) {
        const int ar = wm * T::WTM + i * 16 + mrow + (mat & 1) * 8;
        if constexpr (kAStaged) {
          // the fragment ldmatrix_x4 would give: rows lane / 4 (+ 8), k pairs (lane % 4) * 2 (+ 8)
          const float* f =
              Af + (buf * BM + wm * T::WTM + i * 16 + (lane >> 2)) * kLdF + ks + (lane & 3) * 2;
          const float2 v0 = *reinterpret_cast<const float2*>(f);
          const float2 v1 = *reinterpret_cast<const float2*>(f + 8 * kLdF);
          const float2 v2 = *reinterpret_cast<const float2*>(f + 8);
          const float2 v3 = *reinterpret_cast<const float2*>(f + 8 * kLdF + 8);
          a[i][0] = pack_bf16(v0.x, v0.y);
          a[i][1] = pack_bf16(v1.x, v1.y);
          a[i][2] = pack_bf16(v2.x, v2.y);
          a[i][3] = pack_bf16(v3.x, v3.y);
        } else if constexpr (kResA) {
          ldmatrix_x4(
              a[i], ar < rows ? Ares + ar * lda + (kt - kt0) * kBK + ks + (mat >> 1) * 8 : a_zero);
        } else {
          ldmatrix_x4(a[i], As + (buf * BM + ar) * kLd + ks + (mat >> 1) * 8);
        }
      }
      if constexpr (kFp4) {
        // ldmatrix_x4's fragments: rows (lane / 4) (+ 8) of the pair, k pairs 2 (lane % 4) (+ 8)
        // of chunk ks / 16: pairs 2 (ks / 16 % 2) and + 1 of word ks / 32 of run lane % 4 of a
        // packed row (mxfp4.cuh).
        const unsigned char* bp = Bp + buf * BN * kPackedLd + (lane & 3) * 8 + (ks / 32) * 4;
        const unsigned char* sc = Sc + buf * 2 * BN + (ks / 32) * BN;
        const int pair = 2 * ((ks / 16) & 1);
#pragma unroll
        for (int j = 0; j < T::NJ; ++j)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int nr = wn * T::WTN + j * 16 + half * 8 + (lane >> 2);
            const uint32_t mul = mxfp4_scale_mul(sc[nr]);
            const uint32_t w = *reinterpret_cast<const uint32_t*>(bp + nr * kPackedLd);
            b[j][2 * half] = widen_e2m1_pair(w, pair, mul);
            b[j][2 * half + 1] = widen_e2m1_pair(w, pair + 1, mul);
          }
      } else {
#pragma unroll
        for (int j = 0; j < T::NJ; ++j)
          ldmatrix_x4(b[j], Bs + (buf * BN + wn * T::WTN + j * 16 + mrow + (mat >> 1) * 8) * kLd +
                                ks + (mat & 1) * 8);
      }
#pragma unroll
      for (int i = 0; i < T::MI; ++i)
#pragma unroll
        for (int j = 0; j < T::NJ; ++j) {
          mma_bf16_16816(acc[i][2 * j], a[i], b[j][0], b[j][1]);
          mma_bf16_16816(acc[i][2 * j + 1], a[i], b[j][2], b[j][3]);
        }
    }
    if constexpr (kAF32)
      if (kt + 1 < KT) store_a(kt + 1);
    if constexpr (kSplit)
      if (in_block_split && (--seg_left == 0 || kt + 1 == KT)) {
        // A segment ends: add its chain to the sum of the earlier ones, in segment order.
        const bool first = kt + 1 <= g.seg_tiles;
        seg_left = g.seg_tiles;
#pragma unroll
        for (int i = 0; i < T::MI; ++i)
#pragma unroll
          for (int j = 0; j < 2 * T::NJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              float* t = total + ((i * 2 * T::NJ + j) * 4 + e) * T::kThreads;
              *t = first ? acc[i][j][e] : *t + acc[i][j][e];
              acc[i][j][e] = 0.f;
            }
      }
  }
  cp_async_wait<0>();

  const int gr = lane >> 2, tq = lane & 3;
  if constexpr (kSplit) {
    if (in_block_split) {
#pragma unroll
      for (int i = 0; i < T::MI; ++i)
#pragma unroll
        for (int j = 0; j < 2 * T::NJ; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[i][j][e] = total[((i * 2 * T::NJ + j) * 4 + e) * T::kThreads];
    } else if (g.cluster_split) {
      if (!dense_cluster_epilogue<T>(g, acc, smem)) return;
    } else {
      // The workspace serves one-warp tiles only (wider ones split over blocks in clusters or
      // not at all): kept out of their code, its registers cost the 64-row tile half its blocks.
      if constexpr (std::is_same_v<T, Thin>)
        dense_split_epilogue<T>(g, acc, r0, rows, n0, col_tiles, slot, ct);
      return;
    }
  }
  if constexpr (!kUp) {
#pragma unroll
    for (int i = 0; i < T::MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm * T::WTM + i * 16 + gr + 8 * h;
        if (r >= rows) continue;
        float* dst =
            kDense ? g.y_out + blockIdx.y * g.so + (r0 + r) * g.ldo : g.y_out + (r0 + r) * g.N;
#pragma unroll
        for (int j = 0; j < 2 * T::NJ; ++j) {
          const int64_t n = n0 + wn * T::WTN + j * 8 + tq * 2;
          float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
          if (kDense && g.accumulate) {
            if (n < g.N) v0 += dst[n];
            if (n + 1 < g.N) v1 += dst[n + 1];
          }
          if (n + 1 < g.N &&
              (!kDense || (g.ldo % 2 == 0 && (reinterpret_cast<uintptr_t>(dst) & 7) == 0))) {
            *reinterpret_cast<float2*>(dst + n) = make_float2(v0, v1);
          } else {
            if (n < g.N) dst[n] = v0;
            if (n + 1 < g.N) dst[n + 1] = v1;
          }
        }
      }
    if constexpr (kMode == kDownGemm)
      if (g.c_out) {
        // Count this block's arrival at its column tile once its rows of y are visible; the
        // last of the call's tiles combines the tile's columns of every token.
        __threadfence();
        __syncthreads();
        __shared__ int last;
        if (tid == 0) last = atomicAdd(g.counters + ct, 1) == *g.num_tiles - 1;
        __syncthreads();
        if (!last) return;
        __threadfence();  // the other blocks' rows are read after their arrivals
        for (int64_t t = tid; t < g.c_tokens * (BN / 4); t += NT) {
          const int64_t m = t / (BN / 4), d = n0 + (t % (BN / 4)) * 4;
          if (d >= g.N) continue;
          float4* o = reinterpret_cast<float4*>(g.c_out + m * g.N + d);
          *o = moe_combine4(*o, g.y_out, g.c_where, g.c_weights, m, g.c_k, g.N, d);
        }
        if (tid == 0) g.counters[ct] = 0;
      }
    return;
  }
  // Up: gate (columns 0 .. BN/2-1) and up (BN/2 .. BN-1) meet in shared memory.
  __syncthreads();
  float* Es = reinterpret_cast<float*>(smem);  // [BM][kEpiLd]
#pragma unroll
  for (int i = 0; i < T::MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 2 * T::NJ; ++j) {
        const int r = wm * T::WTM + i * 16 + gr + 8 * h, c = wn * T::WTN + j * 8 + tq * 2;
        Es[r * T::kEpiLd + c] = acc[i][j][2 * h];
        Es[r * T::kEpiLd + c + 1] = acc[i][j][2 * h + 1];
      }
  __syncthreads();
  for (int t = tid; t < BM * (BN / 2); t += NT) {
    const int r = t / (BN / 2), c = t % (BN / 2);
    const int64_t n = n0 + c;
    if (r >= rows || n >= g.N) continue;
    g.act_out[static_cast<int64_t>(r0 + r) * g.N + n] =
        f32_to_bf16_bits(swiglu1(Es[r * T::kEpiLd + c], Es[r * T::kEpiLd + BN / 2 + c], g.limit));
  }
}

// Whether a split's segments sum in clusters of z blocks (kMaxClusterSplits at most).
template <typename Kernel>
bool clusters_fit(Kernel kernel, int threads, size_t smem, int z, int64_t clusters) {
  return z <= kMaxClusterSplits &&
         clusters_resident(reinterpret_cast<const void*>(kernel), threads, smem, z, clusters);
}

// How a split dense product's segments run: in turn in each block (a running sum), on blocks of
// their own (a cluster's where its clusters are resident, else summed through the workspace),
// or in clusters where resident and in turn otherwise (no workspace).
enum class SplitRun { kInTurn, kOverBlocks, kClustersOrInTurn };

// The most dynamic shared memory grouped_gemm_kernel<kMode, T> takes (the running sum of
// in-block segments only where they occur: a one-row tile's 6 blocks per SM would not fit it),
// made its limit once; the error of that, if any.
template <Mode kMode, typename T, bool kFp4 = false>
cudaError_t set_smem_limit() {
  constexpr size_t max_smem =
      tile_smem_bytes<kMode, T> + (kMode == kDenseSplitGemm ? running_sum_bytes<T> : 0);
  static const cudaError_t attr =
      cudaFuncSetAttribute(grouped_gemm_kernel<kMode, T, false, kFp4>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(max_smem));
  return attr;
}

// Whether the segments of a split product on T tiles (max_tiles row slots) sum in clusters.
template <typename T>
bool dense_tiles_in_cluster(const GroupedArgs& a, int64_t max_tiles, int64_t batch) {
  const int64_t col_tiles = (a.N + T::BN - 1) / T::BN;
  return set_smem_limit<kDenseSplitGemm, T>() == cudaSuccess &&
         clusters_fit(grouped_gemm_kernel<kDenseSplitGemm, T>, T::kThreads,
                      tile_smem_bytes<kDenseSplitGemm, T>, a.splits, batch * max_tiles * col_tiles);
}

template <Mode kMode, typename T, bool kFp4 = false>
cudaError_t launch_grouped(const GroupedArgs& a, int64_t max_tiles, int64_t batch,
                           cudaStream_t stream, SplitRun run = SplitRun::kInTurn) {
  constexpr int64_t feat = kMode == kUpGemm ? T::BN / 2 : T::BN;
  const int64_t col_tiles = (a.N + feat - 1) / feat;
  if (max_tiles * col_tiles > 0x7fffffff || batch > 65535) return cudaErrorInvalidValue;
  constexpr size_t base_smem = tile_smem_bytes<kMode, T>;
  constexpr size_t max_smem = base_smem + (kMode == kDenseSplitGemm ? running_sum_bytes<T> : 0);
  if (const cudaError_t attr = set_smem_limit<kMode, T, kFp4>(); attr != cudaSuccess) return attr;
  GroupedArgs b = a;
  if constexpr (kMode == kDenseSplitGemm)  // (the experts' file instantiates no split kernel)
    b.cluster_split =
        run != SplitRun::kInTurn && a.splits > 1 && dense_tiles_in_cluster<T>(a, max_tiles, batch);
  const bool split_blocks = b.cluster_split || run == SplitRun::kOverBlocks;
  if (split_blocks && !b.cluster_split && batch * max_tiles * col_tiles > kDenseSplitCounters)
    return cudaErrorInvalidValue;
  const size_t smem_bytes = split_blocks ? base_smem : max_smem;
  const unsigned z = kMode == kDenseSplitGemm && split_blocks ? a.splits : 1;
  return launch_kernel_clustered(
      grouped_gemm_kernel<kMode, T, false, kFp4>,
      dim3(static_cast<unsigned>(max_tiles * col_tiles), static_cast<unsigned>(batch), z),
      T::kThreads, smem_bytes, stream, dim3(1, 1, b.cluster_split ? z : 1), b);
}

}  // namespace gemm_tiles
}  // namespace deepinfer::cuda
