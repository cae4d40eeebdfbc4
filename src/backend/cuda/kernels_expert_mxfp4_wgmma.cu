// The routed experts' two GEMMs for prefill-sized batches with MXFP4-resident weights (backend.h,
// ExpertWeights) on Hopper's warpgroup MMA (wgmma, sm_90a). The products are computed
// transposed: the weights are the MMA's A operand, widened to bf16 in registers from packed tiles
// in shared memory (mxfp4.cuh: each thread's values of a row one 8-byte read), and the plan's
// 128-row token tiles its B operand, so the weights cross L2 and shared memory at 4.25 bits a value
// and never as bf16. Per block (Shape): 256 weight rows x 128 token rows, or, where experts have
// many rows, 128 weight rows x 256 (two of an expert's tiles); 64-wide k tiles in a ring filled
// by cp.async from a producer warpgroup:
//   up:   act[r, i] = swiglu(x[row_token[r]] . w1[e, i], x[row_token[r]] . w3[e, i])  (one
//         thread holds the gate and the up row of an output)
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

constexpr int kBK = 64;
constexpr int kConsumers = 256, kProducers = 128, kThreads = kConsumers + kProducers;

// A block's tiles. Single: 256 weight rows (two 64-row slabs a consumer warpgroup) x one of the
// plan's 128-row token tiles. Paired (experts with many rows): 128 weight rows (one slab a
// warpgroup) x two of an expert's token tiles, so each widened fragment feeds MMAs twice as wide
// (half the widening a FLOP, the bound of these kernels) for twice the token bytes a block.
template <bool kPair>
struct Shape {
  static constexpr int W = kPair ? 128 : 256, T = kPair ? 256 : 128, Slabs = W / 128;
  static constexpr int Stages = kPair ? 6 : 8;
  static constexpr int ProducerRegs = kPair ? 104 : 56, ConsumerRegs = kPair ? 200 : 224;
  static constexpr int TokBytes = T * kBK * 2;  // 128-byte swizzled K-major rows
  static constexpr int WBytes = W * kBK / 2;    // 32 packed bytes a row
  static constexpr int ScaleBytes = 2 * W;      // [2 scale groups][W rows]
  static constexpr int StageBytes = (TokBytes + WBytes + ScaleBytes + 1023) / 1024 * 1024;
  static constexpr size_t SmemBytes = static_cast<size_t>(Stages) * StageBytes + 1024;
  // Output features a block: up's weight rows are gate and up rows of the same features.
  template <bool kUp>
  static constexpr int Feat = kUp ? W / 2 : W;
};
static_assert(Shape<false>::SmemBytes <= 227 * 1024 && Shape<true>::SmemBytes <= 227 * 1024,
              "the rings fit");
static_assert(Shape<false>::T == kMoeWgmmaTileRows, "the plan's tiles are a single block's rows");

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

// Where weight row `row` of a block's tile comes from: matrix (0 w1 / w2, 1 w3) and feature
// offset from the block's first feature, and where its scales sit in a stage's [2][W] scale rows.
// Single: up's rows are w1's 128 features then w3's; a consumer warpgroup's slab j is rows
// 128 j + 64 wg + [0, 64) (up: gate slab, up slab) or 128 wg + 64 j + [0, 64) (down). Paired:
// slab wg is rows 64 wg + [0, 64); up's warp w takes rows 16 w + [0, 8) of w1 and 16 w + [8, 16)
// of w3 for features 32 wg + 8 w + [0, 8), so one thread holds a gate and its up (rows gr and gr
// + 8 of its warp's MMA rows). Scale rows: up's matrix m's features at m W / 2 + offset.
template <bool kPair, bool kUp>
__device__ __forceinline__ int2 weight_row_source(int row) {
  constexpr int W = Shape<kPair>::W;
  if constexpr (!kUp) return make_int2(0, row);
  if constexpr (!kPair) return make_int2(row >= W / 2, row % (W / 2));
  const int wg = row >> 6, w = (row >> 4) & 3, r = row & 15;
  return make_int2(r >> 3, 32 * wg + 8 * w + (r & 7));
}

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
template <bool kPair, bool kUp, int kN>
__device__ __forceinline__ void consume(const Consumer& c) {
#if DI_HAVE_WGMMA
  using S = Shape<kPair>;
  constexpr int kSlabs = S::Slabs;
  const Mxfp4ExpertArgs& g = c.g;
  unsigned char* smem = c.smem;
  const uint32_t sbase = c.sbase;
  uint64_t *full = c.full, *empty = c.empty;
  const int KT = c.KT, r0 = c.r0, rows = c.rows;
  const int64_t n0 = c.n0, N = g.N;
  const int tid = threadIdx.x;
  const int wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, gr = lane >> 2, tq = lane & 3;
  // This thread's weight rows (slab j's rows 16 warp + gr (+ 8)) and their scale rows.
  int wrow[kSlabs][2], srow[kSlabs][2];
#pragma unroll
  for (int j = 0; j < kSlabs; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int base = kPair ? 64 * wg : kUp ? j * (S::W / 2) + 64 * wg : 128 * wg + 64 * j;
      wrow[j][h] = base + 16 * warp + gr + 8 * h;
      const int2 src = weight_row_source<kPair, kUp>(wrow[j][h]);
      srow[j][h] = src.x * (S::W / 2) + src.y;
    }
  float d[kSlabs][kN / 2];
#pragma unroll
  for (int j = 0; j < kSlabs; ++j)
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) d[j][i] = 0.f;
  Ring<S::Stages> ring;
  int prev = -1;
  // One k tile as one MMA group, its fragments (four 16-wide chunks of each slab) built while
  // the previous tile's MMAs run. The fragments are the MMAs' registers until the group
  // completes, so consecutive tiles take turns between two sets (with one set ptxas serialises
  // the MMAs, C7515).
  auto k_tile = [&](uint32_t(&a)[kBK / 16][kSlabs][4]) {
    mbarrier_wait(&full[ring.slot()], ring.parity());
    fence_proxy_async_smem();  // the token rows came by cp.async; the MMAs read them async
    const unsigned char* wt = smem + ring.slot() * S::StageBytes + S::TokBytes;
    const unsigned char* sc = wt + S::WBytes;
    uint32_t mul[kSlabs][2][2];  // [slab][row][scale group]
    uint2 run[kSlabs][2];        // [slab][row]: this thread's 16 values of the row (mxfp4.cuh)
#pragma unroll
    for (int j = 0; j < kSlabs; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        run[j][h] = *reinterpret_cast<const uint2*>(wt + wrow[j][h] * 32 + tq * 8);
#pragma unroll
        for (int s = 0; s < 2; ++s) mul[j][h][s] = mxfp4_scale_mul(sc[s * S::W + srow[j][h]]);
      }
      // Chunk ks's lo / hi pairs: pairs 2 (ks % 2) and + 1 of word ks / 2 of a run. Each chunk's
      // MMAs go as soon as its fragments are built, so the next chunk's widening runs beside them.
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
#pragma unroll
      for (int j = 0; j < kSlabs; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t w = ks < 2 ? run[j][h].x : run[j][h].y;
          a[ks][j][h] = widen_e2m1_pair(w, 2 * (ks & 1), mul[j][h][ks >> 1]);
          a[ks][j][2 + h] = widen_e2m1_pair(w, 2 * (ks & 1) + 1, mul[j][h][ks >> 1]);
        }
      const uint64_t b = wgmma_desc_sw128(sbase + ring.slot() * S::StageBytes + ks * 32);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < kSlabs; ++j) wgmma_m64nNk16_bf16_rs<kN>(d[j], a[ks][j], b);
    }
    wgmma_commit();
    wgmma_wait<1>();  // the previous tile's MMAs are done: free its stage
    if (prev >= 0 && (tid & 127) == 0) mbarrier_arrive(&empty[prev]);
    prev = ring.slot();
    ++ring.use;
  };
  uint32_t frags[2][kBK / 16][kSlabs][4];
  int kt = 0;
  for (; kt + 1 < KT; kt += 2) {
    k_tile(frags[0]);
    k_tile(frags[1]);
  }
  if (kt < KT) k_tile(frags[0]);
  wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < kSlabs; ++j) wgmma_fence_operands(d[j]);
  if (prev >= 0 && (tid & 127) == 0) mbarrier_arrive(&empty[prev]);

  // d[j][4 c + 2 h + q]: weight row wrow[j][h], token row 8 c + 2 tq + q of the tile.
  if constexpr (kUp) {
    // Single: gate in slab 0, up in slab 1, both row h; paired: gate row h 0, up row h 1.
    constexpr int kHalves = kPair ? 1 : 2;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const int64_t f = n0 + weight_row_source<kPair, kUp>(wrow[0][h]).y;
      if (f >= N) continue;
#pragma unroll
      for (int c = 0; c < kN / 8; ++c)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int r = 8 * c + 2 * tq + q;
          const float gate = d[0][4 * c + 2 * h + q];
          const float up = kPair ? d[0][4 * c + 2 + q] : d[kSlabs - 1][4 * c + 2 * h + q];
          if (r < rows) g.act_out[(r0 + r) * N + f] = f32_to_bf16_bits(swiglu1(gate, up, g.limit));
        }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kSlabs; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
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
#endif
}

// Grid: (tile slot) x (column tile), column tiles fastest. Paired: the slot of an expert's even
// tile (counting from its first) takes that tile and the next; the odd one's blocks leave.
template <bool kPair, bool kUp>
__global__ void __launch_bounds__(kThreads, 1)
    expert_mxfp4_wgmma_kernel(const __grid_constant__ Mxfp4ExpertArgs g) {
  wait_for_prior_grid();
#if DI_HAVE_WGMMA
  using S = Shape<kPair>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
  const uint32_t sbase = smem_u32(smem);
  constexpr int kFeat = S::template Feat<kUp>;
  const int64_t N = g.N, K = g.K, groups = K / 32;
  const int64_t col_tiles = (N + kFeat - 1) / kFeat;
  const int64_t slot = blockIdx.x / col_tiles, ct = blockIdx.x % col_tiles;
  if (slot >= *g.num_tiles) return;
  const int32_t e = g.tiles[2 * slot];
  const int r0 = g.tiles[2 * slot + 1], r_end = g.offsets[e + 1];
  if (kPair && (r0 - g.offsets[e]) / kMoeWgmmaTileRows % 2 == 1) return;
  const int rows = r_end - r0 < S::T ? r_end - r0 : S::T;
  const int64_t n0 = ct * kFeat;
  const int KT = static_cast<int>(K / kBK);  // K % 64 == 0 (the launcher checks)

  __shared__ uint64_t full[S::Stages], empty[S::Stages];  // a stage landed / freed by both
  const int tid = threadIdx.x;
  if (tid == 0)
    for (int s = 0; s < S::Stages; ++s) {
      mbarrier_init(&full[s], kProducers);
      mbarrier_init(&empty[s], 2);
    }
  __syncthreads();

  if (tid >= kConsumers) {
    setmaxnreg_dec<S::ProducerRegs>();
    const int t = tid - kConsumers;
    // Tokens: 16-byte chunk lc of rows lrow + 16 i, swizzled as the wgmma descriptor reads them.
    const int lc = t & 7, lrow = t >> 3;
    const int swz = (lc ^ (lrow & 7)) * 16;
    const uint16_t* a_src[S::T / 16];
#pragma unroll
    for (int i = 0; i < S::T / 16; ++i) {
      const int r = r0 + lrow + 16 * i;
      const int64_t src_row = lrow + 16 * i >= rows ? -1 : kUp ? g.row_token[r] : r;
      a_src[i] = src_row < 0 ? nullptr : g.x + src_row * K + lc * 8;
    }
    // Weights: 16-byte chunk wc of rows wrow + 64 i (a warp's 8-byte reads of eight rows are
    // 256 contiguous bytes).
    const int wc = t & 1, wrow = t >> 1;
    const uint8_t* w_src[S::W * 2 / kProducers];
#pragma unroll
    for (int i = 0; i < S::W * 2 / kProducers; ++i) {
      const int2 src = weight_row_source<kPair, kUp>(wrow + 64 * i);
      const int64_t n = n0 + src.y;
      w_src[i] = n < N ? (src.x ? g.w3 : g.w1) + (e * N + n) * (K / 2) + wc * 16 : nullptr;
    }
    // Scales: threads below W / 8, 16 features of one matrix and group of the k tile each
    // (N % 16 == 0: a run is all in or all out).
    const int s_chunks = S::W / 8, per_group = S::W / 16;
    const int sg = t / per_group, sm = kUp ? (t % per_group) / (per_group / 2) : 0;
    const int sf = kUp ? (t % (per_group / 2)) * 16 : (t % per_group) * 16;
    const int64_t sn = n0 + sf;
    const uint8_t* s_src =
        t < s_chunks && sn < N ? (sm ? g.s3 : g.s1) + (e * groups + sg) * N + sn : nullptr;
    const int s_dst = sg * S::W + sm * (S::W / 2) + sf;
    Ring<S::Stages> ring;
    for (int kt = 0; kt < KT; ++kt, ++ring.use) {
      mbarrier_wait(&empty[ring.slot()], ring.parity() ^ 1);
      unsigned char* st = smem + ring.slot() * S::StageBytes;
      const int64_t k = static_cast<int64_t>(kt) * kBK;
#pragma unroll
      for (int i = 0; i < S::T / 16; ++i)
        cp_async16(st + (lrow + 16 * i) * 128 + swz, a_src[i] ? a_src[i] + k : g.x,
                   a_src[i] != nullptr);
#pragma unroll
      for (int i = 0; i < S::W * 2 / kProducers; ++i)
        cp_async16(st + S::TokBytes + (wrow + 64 * i) * 32 + wc * 16,
                   w_src[i] ? w_src[i] + k / 2 : g.w1, w_src[i] != nullptr);
      if (t < s_chunks)
        cp_async16(st + S::TokBytes + S::WBytes + s_dst, s_src ? s_src + 2 * kt * N : g.s1,
                   s_src != nullptr);
      cp_async_mbarrier_arrive(&full[ring.slot()]);
    }
    cp_async_wait_all();
  } else {
    setmaxnreg_inc<S::ConsumerRegs>();
    // The MMAs' width: the tile's token rows rounded up to an instantiated width (an expert
    // averaging 96 rows at 4096 tokens would leave a 128-wide MMA a quarter empty).
    const Consumer c{g, smem, sbase, full, empty, KT, n0, r0, rows};
    if constexpr (kPair) {
      if (rows > 128)
        consume<kPair, kUp, 256>(c);
      else if (rows > 64)
        consume<kPair, kUp, 128>(c);
      else
        consume<kPair, kUp, 64>(c);
    } else {
      if (rows > 96)
        consume<kPair, kUp, 128>(c);
      else if (rows > 64)
        consume<kPair, kUp, 96>(c);
      else if (rows > 32)
        consume<kPair, kUp, 64>(c);
      else
        consume<kPair, kUp, 32>(c);
    }
  }
#else
  __trap();  // launched only on sm_90a devices (wgmma_available)
#endif
}

template <bool kPair, bool kUp>
cudaError_t launch_expert_mxfp4(const Mxfp4ExpertArgs& a, int64_t max_tiles, cudaStream_t stream) {
  using S = Shape<kPair>;
  // Whole k tiles and 16-byte runs of scales (a k tile's group of 16 features).
  if (a.K % kBK != 0 || a.N % 16 != 0 || a.N > 0x7fffffff || a.K > 0x7fffffff)
    return cudaErrorInvalidValue;
  constexpr int64_t feat = S::template Feat<kUp>;
  const int64_t col_tiles = (a.N + feat - 1) / feat;
  if (max_tiles * col_tiles > 0x7fffffff) return cudaErrorInvalidValue;
  static const cudaError_t attr = cudaFuncSetAttribute(expert_mxfp4_wgmma_kernel<kPair, kUp>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(S::SmemBytes));
  if (attr != cudaSuccess) return attr;
  return launch_kernel(expert_mxfp4_wgmma_kernel<kPair, kUp>,
                       dim3(static_cast<unsigned>(max_tiles * col_tiles)), dim3(kThreads),
                       S::SmemBytes, stream, a);
}

template <bool kUp>
cudaError_t launch_expert_mxfp4(const Mxfp4ExpertArgs& a, int64_t max_tiles, bool tile_pairs,
                                cudaStream_t stream) {
  return tile_pairs ? launch_expert_mxfp4<true, kUp>(a, max_tiles, stream)
                    : launch_expert_mxfp4<false, kUp>(a, max_tiles, stream);
}

}  // namespace

cudaError_t launch_moe_up_mxfp4_wgmma(const uint16_t* x, const int32_t* row_token,
                                      const int32_t* offsets, const int32_t* tiles,
                                      const int32_t* num_tiles, int64_t max_tiles,
                                      const Mxfp4Matrix& w1, const Mxfp4Matrix& w3, int64_t I,
                                      int64_t D, float limit, bool tile_pairs, uint16_t* act,
                                      cudaStream_t stream) {
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
  return launch_expert_mxfp4<true>(a, max_tiles, tile_pairs, stream);
}

cudaError_t launch_moe_down_mxfp4_wgmma(const uint16_t* act, const int32_t* offsets,
                                        const int32_t* tiles, const int32_t* num_tiles,
                                        int64_t max_tiles, const Mxfp4Matrix& w2, int64_t D,
                                        int64_t I, bool tile_pairs, float* y, cudaStream_t stream) {
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
  return launch_expert_mxfp4<false>(a, max_tiles, tile_pairs, stream);
}

}  // namespace deepinfer::cuda
