// The routed experts' two GEMMs for prefill-sized batches on Hopper's warpgroup MMA (wgmma,
// sm_90a): the same plan tiles and the same outputs as grouped_gemm.cuh's up / down modes, on
// 128-row x 256-column block tiles, 4 stages of 64-wide k tiles in 128-byte swizzled K-major
// layout:
//   up:   act[r, i] = swiglu(x[row_token[r]] . w1[e, i], x[row_token[r]] . w3[e, i])  (x bf16;
//         columns 0-127 of a block are gate features, 128-255 the matching up features, which
//         the same thread holds, so swiglu runs on the accumulators)
//   down: y[r, d] = act[r] . w2[e, d]                                                (fp32 out)
// Each output adds its 16-wide k chunks in increasing order into one fp32 accumulator, like the
// mma.sync tiles (the batch-invariance test checks the bits agree).
// Warp-specialised: a producer warpgroup fills the ring (weights by TMA; down's rows, one
// expert's contiguous act rows, by TMA; up's gathered token rows by cp.async from its 128
// threads); two consumer warpgroups (64 rows each) wait, multiply, free stages and store.
// These GEMMs are bound by L2 throughput (a block reads 48 KiB a k tile for 4.2 MFLOP;
// docs/perf.md), so blocks run in clusters of `group` (1, 2 or 4) adjacent tile slots at one
// column tile: where all of a cluster's slots are one expert's, each producer loads 1 / group
// of the weight tile into every block by TMA multicast, and a stage is refilled once every
// block's consumers have freed it (they arrive on every block's `empty` barrier), so blocks
// drift up to the ring's depth apart instead of meeting each k tile.
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/tma_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

#include <algorithm>

namespace deepinfer::cuda {

namespace {

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4;
constexpr int kConsumers = 256, kProducers = 128, kThreads = kConsumers + kProducers;
constexpr int kProducerRegs = 56, kConsumerRegs = 224;
constexpr int kATileBytes = kBM * kBK * 2;  // 16 KiB
constexpr int kBTileBytes = kBN * kBK * 2;  // 32 KiB
constexpr int kStageBytes = kATileBytes + kBTileBytes;
// + 1 KiB so the stages can start on a 1024-byte swizzle atom
constexpr size_t kSmemBytes = static_cast<size_t>(kStages) * kStageBytes + 1024;
static_assert(kBM == kMoeWgmmaTileRows, "the plan's tiles are this kernel's rows");

struct ExpertArgs {
  CUtensorMap a;       // down: act [1, R, K] bf16, boxes of kBM rows
  CUtensorMap w1, w3;  // [E, N, K] (down: w2; w3 up only), boxes of kBN / 2 (down: kBN) rows
  CUtensorMap piece1, piece3;  // the same in boxes of a shared tile's pieces (clusters only)
  const uint16_t* x;           // up: bf16 x [*, K], rows gathered through row_token
  const int32_t* row_token;    // up only
  const int32_t* offsets;      // [E + 1]
  const int32_t* tiles;        // [max_tiles] packed (expert, first row)
  const int32_t* num_tiles;
  int64_t N, K;
  float limit;
  uint16_t* act_out;  // up: [R, N] bf16
  float* y_out;       // down: [R, N] fp32
  int group;          // cluster size: 1, 2 or 4
};

// Grid: (cluster of tile slots) x (column tile): consecutive clusters share their tiles' rows.
template <bool kUp>
__global__ void __launch_bounds__(kThreads, 1)
    expert_wgmma_kernel(const __grid_constant__ ExpertArgs g) {
  wait_for_prior_grid();
#if DI_HAVE_WGMMA
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
  const uint32_t sbase = smem_u32(smem);
  constexpr int kFeat = kUp ? kBN / 2 : kBN;  // output features per block
  const int64_t col_tiles = (g.N + kFeat - 1) / kFeat;
  const int group = g.group, rank = static_cast<int>(blockIdx.x % group);
  // Cluster p at column tile ct: tile slots group * p + rank.
  const int64_t rest = blockIdx.x / group, first = rest / col_tiles * group, ct = rest % col_tiles;
  const int64_t slot = first + rank, last = first + group - 1;
  // The same in every block of the cluster (tiles go in expert order: the first and last
  // slots' experts match only where all do).
  const bool shared = group > 1 && last < *g.num_tiles && g.tiles[2 * first] == g.tiles[2 * last];
  if (slot >= *g.num_tiles) return;
  const int32_t e = g.tiles[2 * slot];
  const int r0 = g.tiles[2 * slot + 1], r_end = g.offsets[e + 1];
  const int rows = r_end - r0 < kBM ? r_end - r0 : kBM;
  const int n0 = static_cast<int>(ct * kFeat);
  const int KT = static_cast<int>((g.K + kBK - 1) / kBK);

  __shared__ uint64_t full[kStages], empty[kStages];  // a stage landed / freed by all consumers
  const int tid = threadIdx.x;
  if (tid == 0)
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], kUp ? kProducers + 1 : 1);  // up: + the producers' cp.async rows
      mbarrier_init(&empty[s], shared ? 2 * group : 2);
    }
  __syncthreads();
  if (shared) cluster_sync_all();  // every block's barriers initialised before any arrives

  if (tid >= kConsumers) {
    setmaxnreg_dec<kProducerRegs>();
    const int t = tid - kConsumers;
    if (kUp || t == 0) {
      const int lc = t & 7, lrow = t >> 3;  // up: chunk lc of rows lrow + 16 i
      const int swz = (lc ^ (lrow & 7)) * 16;
      const uint16_t* a_src[kUp ? kBM / 16 : 1];
      if constexpr (kUp) {
#pragma unroll
        for (int i = 0; i < kBM / 16; ++i) {
          const int r = r0 + lrow + 16 * i;
          a_src[i] = r < r_end ? g.x + static_cast<int64_t>(g.row_token[r]) * g.K : nullptr;
        }
      }
      Ring<kStages> ring;
      for (int kt = 0; kt < KT; ++kt, ++ring.use) {
        mbarrier_wait(&empty[ring.slot()], ring.parity() ^ 1);
        uint64_t* bar = &full[ring.slot()];
        unsigned char* st = smem + ring.slot() * kStageBytes;
        if (t == 0) {  // rows past N or R and k past K land as zeros
          mbarrier_arrive_expect_tx(bar, kUp ? kBTileBytes : kStageBytes);
          if constexpr (!kUp) tma_load_3d(st, &g.a, kt * kBK, r0, 0, bar);
          if (shared) {  // this block's piece (rows p0.. of the kBN), into every block
            const int piece = kBN / group, p0 = rank * piece;
            const uint16_t mask = static_cast<uint16_t>((1u << group) - 1);
            unsigned char* dst = st + kATileBytes + p0 * 128;
            if (kUp && p0 >= kBN / 2)  // up: w1's rows, then w3's
              tma_load_3d_multicast(dst, &g.piece3, kt * kBK, n0 + p0 - kBN / 2, e, bar, mask);
            else
              tma_load_3d_multicast(dst, &g.piece1, kt * kBK, n0 + p0, e, bar, mask);
          } else {
            tma_load_3d(st + kATileBytes, &g.w1, kt * kBK, n0, e, bar);
            if constexpr (kUp)
              tma_load_3d(st + kATileBytes + kBTileBytes / 2, &g.w3, kt * kBK, n0, e, bar);
          }
        }
        if constexpr (kUp) {
          const int64_t k = static_cast<int64_t>(kt) * kBK + lc * 8;
          const bool kin = k < g.K;
#pragma unroll
          for (int i = 0; i < kBM / 16; ++i)
            cp_async16(st + (lrow + 16 * i) * 128 + swz, a_src[i] ? a_src[i] + (kin ? k : 0) : g.x,
                       a_src[i] && kin);
          cp_async_mbarrier_arrive(bar);
        }
      }
      if constexpr (kUp) cp_async_wait_all();
    }
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    const int wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, gr = lane >> 2, tq = lane & 3;
    const bool leader = (tid & 127) == 0;
    auto release = [&](int s) {  // this warpgroup is done with stage s
      if (!leader) return;
      if (shared)
        for (int r = 0; r < group; ++r) mbarrier_arrive_cluster(&empty[s], r);
      else
        mbarrier_arrive(&empty[s]);
    };
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    Ring<kStages> ring;
    int prev = -1;
    for (int kt = 0; kt < KT; ++kt, ++ring.use) {
      mbarrier_wait(&full[ring.slot()], ring.parity());
      if constexpr (kUp) fence_proxy_async_smem();  // the producers' cp.async rows
      const uint32_t st = sbase + ring.slot() * kStageBytes;
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kBK / 16; ++ks)
        wgmma_m64n256k16_bf16(d, wgmma_desc_sw128(st + wg * 64 * 128 + ks * 32),
                              wgmma_desc_sw128(st + kATileBytes + ks * 32));
      wgmma_commit();
      wgmma_wait<1>();  // the previous stage's MMAs are done: free it
      if (prev >= 0) release(prev);
      prev = ring.slot();
    }
    wgmma_wait<0>();
    wgmma_fence_operands(d);
    release(prev);

    const int64_t N = g.N;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wg * 64 + warp * 16 + gr + 8 * h;
      if (r >= rows) continue;
      if constexpr (kUp) {
        uint16_t* dst = g.act_out + (r0 + r) * N;
#pragma unroll
        for (int j = 0; j < kBN / 16; ++j) {
          const int64_t c = n0 + j * 8 + tq * 2;
          if (c >= N) continue;  // N % 8 == 0: c + 1 is in too
          float v[2];
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            float gate = d[4 * j + 2 * h + q], up = d[4 * (j + kBN / 16) + 2 * h + q];
            if (g.limit > 0.f) {
              gate = fminf(gate, g.limit);
              up = fminf(fmaxf(up, -g.limit), g.limit);
            }
            v[q] = gate / (1.f + expf(-gate)) * up;
          }
          *reinterpret_cast<uint32_t*>(dst + c) = pack_bf16(v[0], v[1]);
        }
      } else {
        float* dst = g.y_out + (r0 + r) * N;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
          const int64_t c = n0 + j * 8 + tq * 2;
          if (c < N)
            *reinterpret_cast<float2*>(dst + c) =
                make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
      }
    }
  }
  // Peers arrive on this block's barriers until their last stage: none leaves before all are
  // done.
  if (shared) cluster_sync_all();
#else
  __trap();  // launched only on sm_90a devices (wgmma_available)
#endif
}

template <bool kUp>
cudaError_t launch_expert_wgmma(ExpertArgs& a, const uint16_t* w1, const uint16_t* w3, int64_t E,
                                int64_t max_tiles, int group, cudaStream_t stream) {
  if (group != 2 && group != 4) group = 1;
  if (group > 1 && !cluster_launch_supported()) group = 1;
  a.group = group;
  constexpr uint32_t box_rows = kUp ? kBN / 2 : kBN;
  const uint32_t piece = std::min<uint32_t>(kBN / group, box_rows);
  if (!bf16_row_tiles_map(&a.w1, w1, E, a.N, a.K, box_rows) ||
      (kUp && !bf16_row_tiles_map(&a.w3, w3, E, a.N, a.K, box_rows)))
    return cudaErrorInvalidValue;
  // The pieces' maps only where blocks may share (the kernel reads them nowhere else).
  if (group > 1 && (!bf16_row_tiles_map(&a.piece1, w1, E, a.N, a.K, piece) ||
                    (kUp && !bf16_row_tiles_map(&a.piece3, w3, E, a.N, a.K, piece))))
    return cudaErrorInvalidValue;
  constexpr int64_t feat = kUp ? kBN / 2 : kBN;
  const int64_t col_tiles = (a.N + feat - 1) / feat;
  max_tiles = (max_tiles + group - 1) / group * group;  // whole clusters
  if (max_tiles * col_tiles > 0x7fffffff) return cudaErrorInvalidValue;
  static const cudaError_t attr =
      cudaFuncSetAttribute(expert_wgmma_kernel<kUp>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmemBytes));
  if (attr != cudaSuccess) return attr;
  return launch_kernel_clustered(expert_wgmma_kernel<kUp>,
                                 static_cast<unsigned>(max_tiles * col_tiles), kThreads, kSmemBytes,
                                 stream, dim3(group, 1, 1), a);
}

}  // namespace

cudaError_t launch_moe_up_wgmma(const uint16_t* x, const int32_t* row_token, const int32_t* offsets,
                                const int32_t* tiles, const int32_t* num_tiles, int64_t max_tiles,
                                const uint16_t* w1, const uint16_t* w3, int64_t E, int64_t I,
                                int64_t D, float limit, uint16_t* act, int cluster,
                                cudaStream_t stream) {
  if (max_tiles <= 0 || I <= 0) return cudaSuccess;
  if (D % 8 != 0 || I % 8 != 0 || I > 0x7fffffff || D > 0x7fffffff || E > 0x7fffffff)
    return cudaErrorInvalidValue;
  ExpertArgs a{};
  a.x = x;
  a.row_token = row_token;
  a.offsets = offsets;
  a.tiles = tiles;
  a.num_tiles = num_tiles;
  a.N = I;
  a.K = D;
  a.limit = limit;
  a.act_out = act;
  return launch_expert_wgmma<true>(a, w1, w3, E, max_tiles, cluster, stream);
}

cudaError_t launch_moe_down_wgmma(const uint16_t* act, int64_t R, const int32_t* offsets,
                                  const int32_t* tiles, const int32_t* num_tiles, int64_t max_tiles,
                                  const uint16_t* w2, int64_t E, int64_t D, int64_t I, float* y,
                                  cudaStream_t stream) {
  if (max_tiles <= 0 || D <= 0 || R <= 0) return cudaSuccess;
  if (I % 8 != 0 || D % 8 != 0 || D > 0x7fffffff || I > 0x7fffffff || R > 0x7fffffff ||
      E > 0x7fffffff)
    return cudaErrorInvalidValue;
  ExpertArgs a{};
  if (!bf16_row_tiles_map(&a.a, act, 1, R, I, kBM)) return cudaErrorInvalidValue;
  a.offsets = offsets;
  a.tiles = tiles;
  a.num_tiles = num_tiles;
  a.N = D;
  a.K = I;
  a.y_out = y;
  return launch_expert_wgmma<false>(a, w2, nullptr, E, max_tiles, 1, stream);
}

}  // namespace deepinfer::cuda
