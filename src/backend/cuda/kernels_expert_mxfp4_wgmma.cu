// The routed experts' two GEMMs for prefill-sized batches with MXFP4-resident weights (backend.h,
// ExpertWeights) on Hopper's warpgroup MMA (wgmma, sm_90a). The products are computed
// transposed: the weights are the MMA's A operand, widened to bf16 in registers from packed tiles
// in shared memory (mxfp4.cuh: each thread's values of a row one 8-byte read), and the plan's
// 128-row token tiles its B operand, so the weights cross L2 and shared memory at 4.25 bits a value
// and never as bf16. Per block: 256 weight rows (two 64-row slabs a consumer warpgroup) x 128 token
// rows, 64-wide k tiles in an 8-stage ring filled by cp.async from a producer warpgroup:
//   up:   act[r, i] = swiglu(x[row_token[r]] . w1[e, i], x[row_token[r]] . w3[e, i])  (a
//         warpgroup's slabs are 64 gate rows and the matching 64 up rows: one thread holds
//         both of an output)
//   down: y[r, d] = act[r] . w2[e, d]                                                (fp32 out)
// Each output adds its 16-wide k chunks in increasing order into one fp32 accumulator, as the
// bf16 kernels do; the widened weights are the values dequantising at load gives, so the outputs
// are those kernels' bits (the MoE tests check it).
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/mxfp4.cuh"
#include "backend/cuda/tma_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kBW = 256, kBT = 128, kBK = 64, kStages = 8;
constexpr int kConsumers = 256, kProducers = 128, kThreads = kConsumers + kProducers;
constexpr int kProducerRegs = 56, kConsumerRegs = 224;
constexpr int kTokBytes = kBT * kBK * 2;  // 16 KiB, 128-byte swizzled K-major rows
constexpr int kWBytes = kBW * kBK / 2;    // 8 KiB: 32 packed bytes a row
constexpr int kScaleBytes = 2 * kBW;      // [2 scale groups][kBW rows]
constexpr int kStageBytes = 25 * 1024;    // the three, each stage on a 1024-byte swizzle atom
static_assert(kTokBytes + kWBytes + kScaleBytes <= kStageBytes, "a stage holds its tiles");
constexpr size_t kSmemBytes = static_cast<size_t>(kStages) * kStageBytes + 1024;
static_assert(kBT == kMoeWgmmaTileRows, "the plan's tiles are this kernel's token rows");

struct Mxfp4ExpertArgs {
  const uint16_t* x;         // up: bf16 x [*, K] gathered through row_token; down: act [R, K]
  const int32_t* row_token;  // up only
  const int32_t* offsets;    // [E + 1]
  const int32_t* tiles;      // [max_tiles] packed (expert, first row)
  const int32_t* num_tiles;
  const uint8_t *w1, *w3;  // packed [E, N, K / 2] (down: w2; w3 up only)
  const uint8_t *s1, *s3;  // their scales [E, K / 32, N]
  int64_t N, K;
  float limit;
  uint16_t* act_out;  // up: [R, N] bf16
  float* y_out;       // down: [R, N] fp32
};

// What a consumer warpgroup needs of its block.
struct Consumer {
  const Mxfp4ExpertArgs& g;
  unsigned char* smem;
  uint32_t sbase;
  uint64_t *full, *empty;
  int KT;
  int64_t n0;
  int r0, rows;
};

// A consumer warpgroup's MMAs over the k tiles, kN token rows wide, and its stores.
template <bool kUp, int kN>
__device__ __forceinline__ void consume(const Consumer& c) {
#if DI_HAVE_WGMMA
  const Mxfp4ExpertArgs& g = c.g;
  unsigned char* smem = c.smem;
  const uint32_t sbase = c.sbase;
  uint64_t *full = c.full, *empty = c.empty;
  const int KT = c.KT, r0 = c.r0, rows = c.rows;
  const int64_t n0 = c.n0, N = g.N;
  const int tid = threadIdx.x;
  const int wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, gr = lane >> 2, tq = lane & 3;
  // This thread's weight rows: slab j's rows 16 warp + gr (+ 8). Up: slab 0 gate rows, slab 1
  // the same features' up rows; down: the warpgroup's 128 features in two slabs.
  int wrow[2][2];
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      wrow[j][h] = (kUp ? j * (kBW / 2) + 64 * wg : 128 * wg + 64 * j) + 16 * warp + gr + 8 * h;
  float d[2][kN / 2];
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) d[j][i] = 0.f;
  Ring<kStages> ring;
  int prev = -1;
  // One k tile as one MMA group, its fragments (four 16-wide chunks, both slabs) built while
  // the previous tile's MMAs run. The fragments are the MMAs' registers until the group
  // completes, so consecutive tiles take turns between two sets (with one set ptxas serialises
  // the MMAs, C7515).
  auto k_tile = [&](uint32_t(&a)[kBK / 16][2][4]) {
    mbarrier_wait(&full[ring.slot()], ring.parity());
    fence_proxy_async_smem();  // the token rows came by cp.async; the MMAs read them async
    const unsigned char* wt = smem + ring.slot() * kStageBytes + kTokBytes;
    const unsigned char* sc = wt + kWBytes;
    uint32_t mul[2][2][2];  // [slab][row][scale group]
    uint2 run[2][2];        // [slab][row]: this thread's 16 values of the row (mxfp4.cuh)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        run[j][h] = *reinterpret_cast<const uint2*>(wt + wrow[j][h] * 32 + tq * 8);
#pragma unroll
        for (int s = 0; s < 2; ++s) mul[j][h][s] = mxfp4_scale_mul(sc[s * kBW + wrow[j][h]]);
      }
      // Chunk ks's lo / hi pairs: pairs 2 (ks % 2) and + 1 of word ks / 2 of a run. Each chunk's
      // MMAs go as soon as its fragments are built, so the next chunk's widening runs beside them.
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t w = ks < 2 ? run[j][h].x : run[j][h].y;
          a[ks][j][h] = widen_e2m1_pair(w, 2 * (ks & 1), mul[j][h][ks >> 1]);
          a[ks][j][2 + h] = widen_e2m1_pair(w, 2 * (ks & 1) + 1, mul[j][h][ks >> 1]);
        }
      const uint64_t b = wgmma_desc_sw128(sbase + ring.slot() * kStageBytes + ks * 32);
      wgmma_fence();
      wgmma_m64nNk16_bf16_rs<kN>(d[0], a[ks][0], b);
      wgmma_m64nNk16_bf16_rs<kN>(d[1], a[ks][1], b);
    }
    wgmma_commit();
    wgmma_wait<1>();  // the previous tile's MMAs are done: free its stage
    if (prev >= 0 && (tid & 127) == 0) mbarrier_arrive(&empty[prev]);
    prev = ring.slot();
    ++ring.use;
  };
  uint32_t frags[2][kBK / 16][2][4];
  int kt = 0;
  for (; kt + 1 < KT; kt += 2) {
    k_tile(frags[0]);
    k_tile(frags[1]);
  }
  if (kt < KT) k_tile(frags[0]);
  wgmma_wait<0>();
  wgmma_fence_operands(d[0]);
  wgmma_fence_operands(d[1]);
  if (prev >= 0 && (tid & 127) == 0) mbarrier_arrive(&empty[prev]);

    // d[j][4 c + 2 h + q]: weight row wrow[j][h], token row 8 c + 2 tq + q of the tile.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if constexpr (kUp) {
      const int64_t f = n0 + 64 * wg + 16 * warp + gr + 8 * h;
      if (f >= N) continue;
#pragma unroll
      for (int c = 0; c < kN / 8; ++c)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int r = 8 * c + 2 * tq + q;
          if (r < rows)
            g.act_out[(r0 + r) * N + f] = f32_to_bf16_bits(
                swiglu1(d[0][4 * c + 2 * h + q], d[1][4 * c + 2 * h + q], g.limit));
        }
    } else {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t f = n0 + wrow[j][h];
        if (f >= N) continue;
#pragma unroll
        for (int c = 0; c < kN / 8; ++c)
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const int r = 8 * c + 2 * tq + q;
            if (r < rows) g.y_out[(r0 + r) * N + f] = d[j][4 * c + 2 * h + q];
          }
      }
    }
  }
#endif
}

// Grid: (tile slot) x (column tile), column tiles fastest.
template <bool kUp>
__global__ void __launch_bounds__(kThreads, 1)
    expert_mxfp4_wgmma_kernel(const __grid_constant__ Mxfp4ExpertArgs g) {
  wait_for_prior_grid();
#if DI_HAVE_WGMMA
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
  const uint32_t sbase = smem_u32(smem);
  constexpr int kFeat = kUp ? kBW / 2 : kBW;  // output features per block
  const int64_t N = g.N, K = g.K, groups = K / 32;
  const int64_t col_tiles = (N + kFeat - 1) / kFeat;
  const int64_t slot = blockIdx.x / col_tiles, ct = blockIdx.x % col_tiles;
  if (slot >= *g.num_tiles) return;
  const int32_t e = g.tiles[2 * slot];
  const int r0 = g.tiles[2 * slot + 1], r_end = g.offsets[e + 1];
  const int rows = r_end - r0 < kBT ? r_end - r0 : kBT;
  const int64_t n0 = ct * kFeat;
  const int KT = static_cast<int>(K / kBK);  // K % 64 == 0 (the launcher checks)

  __shared__ uint64_t full[kStages], empty[kStages];  // a stage landed / freed by both consumers
  const int tid = threadIdx.x;
  if (tid == 0)
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], kProducers);
      mbarrier_init(&empty[s], 2);
    }
  __syncthreads();

  if (tid >= kConsumers) {
    setmaxnreg_dec<kProducerRegs>();
    const int t = tid - kConsumers;
    // Tokens: 16-byte chunk lc of rows lrow + 16 i, swizzled as the wgmma descriptor reads them.
    const int lc = t & 7, lrow = t >> 3;
    const int swz = (lc ^ (lrow & 7)) * 16;
    const uint16_t* a_src[kBT / 16];
#pragma unroll
    for (int i = 0; i < kBT / 16; ++i) {
      const int r = r0 + lrow + 16 * i;
      const int64_t src_row = r >= r_end ? -1 : kUp ? g.row_token[r] : r;
      a_src[i] = src_row < 0 ? nullptr : g.x + src_row * K + lc * 8;
    }
    // Weights: 16-byte chunk wc of rows wrow + 64 i (a warp's 8-byte reads of eight rows are
    // 256 contiguous bytes).
    const int wc = t & 1, wrow = t >> 1;
    const uint8_t* w_src[kBW * 2 / kProducers];
    int w_dst[kBW * 2 / kProducers];
#pragma unroll
    for (int i = 0; i < kBW * 2 / kProducers; ++i) {
      const int row = wrow + 64 * i;
      const bool second = kUp && row >= kBW / 2;  // up: w3's rows after w1's
      const int64_t n = n0 + (second ? row - kBW / 2 : row);
      w_src[i] = n < N ? (second ? g.w3 : g.w1) + (e * N + n) * (K / 2) + wc * 16 : nullptr;
      w_dst[i] = row * 32 + wc * 16;
    }
    // Scales: threads 0-31, 16 rows of group t / 16 of the k tile each.
    const int sg = (t >> 4) & 1, srow = (t & 15) * 16;
    const bool s_second = kUp && srow >= kBW / 2;
    const int64_t sn = n0 + (s_second ? srow - kBW / 2 : srow);
    const uint8_t* s_src =
        t < 32 && sn < N ? (s_second ? g.s3 : g.s1) + (e * groups + sg) * N + sn : nullptr;
    Ring<kStages> ring;
    for (int kt = 0; kt < KT; ++kt, ++ring.use) {
      mbarrier_wait(&empty[ring.slot()], ring.parity() ^ 1);
      unsigned char* st = smem + ring.slot() * kStageBytes;
      const int64_t k = static_cast<int64_t>(kt) * kBK;
#pragma unroll
      for (int i = 0; i < kBT / 16; ++i)
        cp_async16(st + (lrow + 16 * i) * 128 + swz, a_src[i] ? a_src[i] + k : g.x,
                   a_src[i] != nullptr);
#pragma unroll
      for (int i = 0; i < kBW * 2 / kProducers; ++i)
        cp_async16(st + kTokBytes + w_dst[i], w_src[i] ? w_src[i] + k / 2 : g.w1,
                   w_src[i] != nullptr);
      if (t < 32)
        cp_async16(st + kTokBytes + kWBytes + sg * kBW + srow, s_src ? s_src + 2 * kt * N : g.s1,
                   s_src != nullptr);
      cp_async_mbarrier_arrive(&full[ring.slot()]);
    }
    cp_async_wait_all();
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    // The MMAs' width: the tile's token rows rounded up to 32 (an expert averaging 96 rows at
    // 4096 tokens would leave a 128-wide MMA a quarter empty).
    const Consumer c{g, smem, sbase, full, empty, KT, n0, r0, rows};
    if (rows > 96)
      consume<kUp, 128>(c);
    else if (rows > 64)
      consume<kUp, 96>(c);
    else if (rows > 32)
      consume<kUp, 64>(c);
    else
      consume<kUp, 32>(c);
  }
#else
  __trap();  // launched only on sm_90a devices (wgmma_available)
#endif
}

template <bool kUp>
cudaError_t launch_expert_mxfp4(const Mxfp4ExpertArgs& a, int64_t max_tiles, cudaStream_t stream) {
  // Whole k tiles and 16-byte runs of scales (a k tile's group of 16 rows).
  if (a.K % kBK != 0 || a.N % 16 != 0 || a.N > 0x7fffffff || a.K > 0x7fffffff)
    return cudaErrorInvalidValue;
  constexpr int64_t feat = kUp ? kBW / 2 : kBW;
  const int64_t col_tiles = (a.N + feat - 1) / feat;
  if (max_tiles * col_tiles > 0x7fffffff) return cudaErrorInvalidValue;
  static const cudaError_t attr = cudaFuncSetAttribute(expert_mxfp4_wgmma_kernel<kUp>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(kSmemBytes));
  if (attr != cudaSuccess) return attr;
  return launch_kernel(expert_mxfp4_wgmma_kernel<kUp>,
                       dim3(static_cast<unsigned>(max_tiles * col_tiles)), dim3(kThreads),
                       kSmemBytes, stream, a);
}

}  // namespace

cudaError_t launch_moe_up_mxfp4_wgmma(const uint16_t* x, const int32_t* row_token,
                                      const int32_t* offsets, const int32_t* tiles,
                                      const int32_t* num_tiles, int64_t max_tiles,
                                      const Mxfp4Matrix& w1, const Mxfp4Matrix& w3, int64_t I,
                                      int64_t D, float limit, uint16_t* act, cudaStream_t stream) {
  if (max_tiles <= 0 || I <= 0) return cudaSuccess;
  Mxfp4ExpertArgs a{};
  a.x = x;
  a.row_token = row_token;
  a.offsets = offsets;
  a.tiles = tiles;
  a.num_tiles = num_tiles;
  a.w1 = w1.data;
  a.s1 = w1.scales;
  a.w3 = w3.data;
  a.s3 = w3.scales;
  a.N = I;
  a.K = D;
  a.limit = limit;
  a.act_out = act;
  return launch_expert_mxfp4<true>(a, max_tiles, stream);
}

cudaError_t launch_moe_down_mxfp4_wgmma(const uint16_t* act, const int32_t* offsets,
                                        const int32_t* tiles, const int32_t* num_tiles,
                                        int64_t max_tiles, const Mxfp4Matrix& w2, int64_t D,
                                        int64_t I, float* y, cudaStream_t stream) {
  if (max_tiles <= 0 || D <= 0) return cudaSuccess;
  Mxfp4ExpertArgs a{};
  a.x = act;
  a.offsets = offsets;
  a.tiles = tiles;
  a.num_tiles = num_tiles;
  a.w1 = w2.data;
  a.s1 = w2.scales;
  a.N = D;
  a.K = I;
  a.y_out = y;
  return launch_expert_mxfp4<false>(a, max_tiles, stream);
}

}  // namespace deepinfer::cuda
