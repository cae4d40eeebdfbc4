// The routed experts' two GEMMs for prefill-sized batches on Hopper's warpgroup MMA (wgmma,
// sm_90a): the same plan tiles and the same outputs as grouped_gemm.cuh's up / down modes,
// on 128-row x 256-column block tiles (two warpgroups of 64 rows sharing one 256-row weight
// tile), 4 stages of 64-wide k tiles in 128-byte swizzled K-major layout, one wgmma group in
// flight while the next stage loads: the rows (gathered tokens) by cp.async, the weight tile by
// TMA (one bulk copy per 128 rows, completing on the stage's mbarrier): per thread eight 16-byte
// cp.async of weights a stage had the L2 at ~90% of its throughput with DRAM at ~78%. mma.sync
// tiles of 64 x 128 read every weight tile for each 64 rows and reach ~100-200 TFLOP/s; these read
// it once per 128 rows and keep the tensor cores fed from shared memory without register staging.
//   up:   act[r, i] = swiglu(x[row_token[r]] . w1[e, i], x[row_token[r]] . w3[e, i])  (x bf16;
//         columns 0-127 of a block are gate features, 128-255 the matching up features, which
//         the same thread holds, so swiglu runs on the accumulators)
//   down: y[r, d] = act[r] . w2[e, d]                                                (fp32 out)
// Each output adds its 16-wide k chunks in increasing order into one fp32 accumulator, like the
// mma.sync tiles (the batch-invariance test checks the bits agree).
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/tma_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kThreads = 256;
constexpr int kATileBytes = kBM * kBK * 2;  // 16 KiB
constexpr int kBTileBytes = kBN * kBK * 2;  // 32 KiB
constexpr int kStageBytes = kATileBytes + kBTileBytes;
// + 1 KiB so the stages can start on a 1024-byte swizzle atom
constexpr size_t kSmemBytes = static_cast<size_t>(kStages) * kStageBytes + 1024;
static_assert(kBM == kMoeWgmmaTileRows, "the plan's tiles are this kernel's rows");

struct ExpertArgs {
  const uint16_t* x;         // up: bf16 x [*, K], rows gathered through row_token; down: act [R, K]
  const int32_t* row_token;  // up only
  const int32_t* offsets;    // [E + 1]
  const int32_t* tiles;      // [max_tiles] packed (expert, first row)
  const int32_t* num_tiles;
  CUtensorMap w1;  // [E, N, K] (down: w2), boxes of kBN / 2 (down: kBN) rows; set at launch
  CUtensorMap w3;  // up only
  int64_t N, K;
  float limit;
  uint16_t* act_out;  // up: [R, N] bf16
  float* y_out;       // down: [R, N] fp32
};

// Grid: (tile slot) x (column tile): consecutive blocks share the tile's rows.
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
  const int64_t slot = blockIdx.x / col_tiles, ct = blockIdx.x % col_tiles;
  if (slot >= *g.num_tiles) return;
  const int32_t e = g.tiles[2 * slot];
  const int64_t r0 = g.tiles[2 * slot + 1], r_end = g.offsets[e + 1];
  const int rows = r_end - r0 < kBM ? static_cast<int>(r_end - r0) : kBM;
  const int64_t n0 = ct * kFeat, K = g.K, N = g.N;
  __shared__ uint64_t full[kStages];  // stage s's weight tile landed (phase = use count % 2)
  if (threadIdx.x == 0)
    for (int s = 0; s < kStages; ++s) mbarrier_init(&full[s], 1);
  __syncthreads();

  // Loaders: thread -> 16-byte chunk lc of rows lrow + 32 i, stored at its swizzled place (the
  // row's phase in its atom, lrow % 8, is the same for every i).
  const int tid = threadIdx.x, lrow = tid >> 3, lc = tid & 7;
  const int swz = ((lc ^ (lrow & 7)) * 16);
  constexpr int kALoads = kBM / 32;
  const uint16_t* a_src[kALoads];
#pragma unroll
  for (int i = 0; i < kALoads; ++i) {
    const int r = lrow + 32 * i;
    const int64_t src_row = r >= rows ? -1 : kUp ? g.row_token[r0 + r] : r0 + r;
    a_src[i] = src_row < 0 ? nullptr : g.x + src_row * K;
  }
  const int KT = static_cast<int>((K + kBK - 1) / kBK);
  auto load_stage = [&](int kt) {
    if (kt < KT) {
      unsigned char* st = smem + (kt % kStages) * kStageBytes;
      const int64_t k = static_cast<int64_t>(kt) * kBK + lc * 8;
      const bool kin = k < K;
#pragma unroll
      for (int i = 0; i < kALoads; ++i)
        cp_async16(st + (lrow + 32 * i) * 128 + swz, a_src[i] ? a_src[i] + (kin ? k : 0) : g.x,
                   a_src[i] && kin);
      if (tid == 0) {  // rows past N or k past K land as zeros
        uint64_t* bar = &full[kt % kStages];
        mbarrier_arrive_expect_tx(bar, kBTileBytes);
        const int kk = kt * kBK, nn = static_cast<int>(n0);
        if constexpr (kUp) {
          tma_load_3d(st + kATileBytes, &g.w1, kk, nn, e, bar);
          tma_load_3d(st + kATileBytes + kBTileBytes / 2, &g.w3, kk, nn, e, bar);
        } else {
          tma_load_3d(st + kATileBytes, &g.w1, kk, nn, e, bar);
        }
      }
    }
    cp_async_commit();  // empty past the end, so the group count stays uniform
  };

  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  const int wg = tid >> 7;  // this warpgroup's 64 rows of the tile
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) load_stage(s);
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<kStages - 2>();                            // stage kt: this thread's rows
    mbarrier_wait(&full[kt % kStages], (kt / kStages) & 1);  // its weights
    fence_proxy_async_smem();
    __syncthreads();  // ... and everyone's rows
    const uint32_t st = sbase + (kt % kStages) * kStageBytes;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks)
      wgmma_m64n256k16_bf16(d, wgmma_desc_sw128(st + wg * 64 * 128 + ks * 32),
                            wgmma_desc_sw128(st + kATileBytes + ks * 32));
    wgmma_commit();
    wgmma_wait<1>();  // the previous stage's MMAs are done ...
    __syncthreads();  // ... in both warpgroups, so its buffer can be refilled
    load_stage(kt + kStages - 1);
  }
  wgmma_wait<0>();
  wgmma_fence_operands(d);
  cp_async_wait_all();

  const int warp = (tid >> 5) & 3, lane = tid & 31, gr = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = wg * 64 + warp * 16 + gr + 8 * h;
    if (r >= rows) continue;
    if constexpr (kUp) {
      uint16_t* dst = g.act_out + (r0 + r) * N;
#pragma unroll
      for (int j = 0; j < kBN / 16; ++j) {
        const int64_t n = n0 + j * 8 + tq * 2;
        if (n >= N) continue;  // N % 8 == 0: n + 1 is in too
        float v[2];
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          float gate = d[4 * j + 2 * h + c], up = d[4 * (j + kBN / 16) + 2 * h + c];
          if (g.limit > 0.f) {
            gate = fminf(gate, g.limit);
            up = fminf(fmaxf(up, -g.limit), g.limit);
          }
          v[c] = gate / (1.f + expf(-gate)) * up;
        }
        *reinterpret_cast<uint32_t*>(dst + n) =
            static_cast<uint32_t>(f32_to_bf16_bits(v[0])) |
            (static_cast<uint32_t>(f32_to_bf16_bits(v[1])) << 16);
      }
    } else {
      float* dst = g.y_out + (r0 + r) * N;
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        const int64_t n = n0 + j * 8 + tq * 2;
        if (n < N)
          *reinterpret_cast<float2*>(dst + n) = make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
      }
    }
  }
#else
  __trap();  // launched only on sm_90a devices (wgmma_available)
#endif
}

template <bool kUp>
cudaError_t launch_expert_wgmma(ExpertArgs& a, const uint16_t* w1, const uint16_t* w3, int64_t E,
                                int64_t max_tiles, cudaStream_t stream) {
  constexpr uint32_t box_rows = kUp ? kBN / 2 : kBN;
  if (!bf16_row_tiles_map(&a.w1, w1, E, a.N, a.K, box_rows) ||
      (kUp && !bf16_row_tiles_map(&a.w3, w3, E, a.N, a.K, box_rows)) || a.N > 0x7fffffff ||
      a.K > 0x7fffffff || E > 0x7fffffff)
    return cudaErrorInvalidValue;
  constexpr int64_t feat = kUp ? kBN / 2 : kBN;
  const int64_t col_tiles = (a.N + feat - 1) / feat;
  if (max_tiles * col_tiles > 0x7fffffff) return cudaErrorInvalidValue;
  static const cudaError_t attr =
      cudaFuncSetAttribute(expert_wgmma_kernel<kUp>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmemBytes));
  if (attr != cudaSuccess) return attr;
  return launch_kernel(expert_wgmma_kernel<kUp>, static_cast<unsigned>(max_tiles * col_tiles),
                       kThreads, kSmemBytes, stream, a);
}

}  // namespace

cudaError_t launch_moe_up_wgmma(const uint16_t* x, const int32_t* row_token, const int32_t* offsets,
                                const int32_t* tiles, const int32_t* num_tiles, int64_t max_tiles,
                                const uint16_t* w1, const uint16_t* w3, int64_t E, int64_t I,
                                int64_t D, float limit, uint16_t* act, cudaStream_t stream) {
  if (max_tiles <= 0 || I <= 0) return cudaSuccess;
  if (D % 8 != 0 || I % 8 != 0) return cudaErrorInvalidValue;
  ExpertArgs a{x, row_token, offsets, tiles, num_tiles, {}, {}, I, D, limit, act, nullptr};
  return launch_expert_wgmma<true>(a, w1, w3, E, max_tiles, stream);
}

cudaError_t launch_moe_down_wgmma(const uint16_t* act, const int32_t* offsets, const int32_t* tiles,
                                  const int32_t* num_tiles, int64_t max_tiles, const uint16_t* w2,
                                  int64_t E, int64_t D, int64_t I, float* y, cudaStream_t stream) {
  if (max_tiles <= 0 || D <= 0) return cudaSuccess;
  if (I % 8 != 0 || D % 8 != 0) return cudaErrorInvalidValue;
  ExpertArgs a{act, nullptr, offsets, tiles, num_tiles, {}, {}, D, I, 0.f, nullptr, y};
  return launch_expert_wgmma<false>(a, w2, nullptr, E, max_tiles, stream);
}

}  // namespace deepinfer::cuda
