// Grouped GEMM of the routed experts on tensor cores (mma.sync m16n8k16, bf16 operands, fp32
// accumulation), for prefill-sized batches, without the host: the row ranges of the experts come
// from the device-side plan (launch_moe_plan) as a table of 64-row tiles; the grid is sized for
// the most tiles R rows can make and surplus blocks exit. Two uses:
//   up:   act[r, i] = swiglu(x[row_token[r]] . w1[e, i], x[row_token[r]] . w3[e, i])  (bf16 out;
//         a block computes 64 gate and the matching 64 up features, paired in the epilogue)
//   down: y[r, d] = act[r] . w2[e, d]                                                (fp32 out)
// Weight tiles stream in with cp.async, double-buffered against the tensor-core work.
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/mma_ptx.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kBM = 64, kBN = 128, kBK = 64;
constexpr int kThreads = 256;  // 8 warps: 2 (rows) x 4 (columns) of 32 x 32
constexpr int kLd = kBK + 8;   // bf16 row stride of the staged tiles (16-byte rows apart in banks)
constexpr int kEpiLd = kBN + 4;

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return static_cast<uint32_t>(f32_to_bf16_bits(lo)) |
         (static_cast<uint32_t>(f32_to_bf16_bits(hi)) << 16);
}

struct GroupedArgs {
  const float* x_f32;      // up: x [*, K] fp32, rows gathered through row_token
  const uint16_t* x_bf16;  // down: act [R, K] bf16
  const int32_t* row_token;
  const int32_t* offsets;  // [E + 1]
  const int32_t* tiles;    // [max_tiles] packed (expert, first row)
  const int32_t* num_tiles;
  const uint16_t* w1;  // [E, N, K] (down: w2)
  const uint16_t* w3;  // up only
  int64_t N, K;
  float limit;
  uint16_t* act_out;  // up: [R, N] bf16
  float* y_out;       // down: [R, N] fp32
};

// Grid: (tile slot) x (column tile). kUp: columns are 64 features of w1 then the same 64 of w3.
template <bool kUp>
__global__ void __launch_bounds__(kThreads) grouped_gemm_kernel(GroupedArgs g) {
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* As = reinterpret_cast<__nv_bfloat16*>(smem);  // [2][kBM][kLd]
  __nv_bfloat16* Bs = As + 2 * kBM * kLd;                      // [2][kBN][kLd]

  constexpr int kFeat = kUp ? kBN / 2 : kBN;  // output features per block
  const int64_t col_tiles = (g.N + kFeat - 1) / kFeat;
  const int64_t slot = blockIdx.x / col_tiles, ct = blockIdx.x % col_tiles;
  if (slot >= *g.num_tiles) return;
  const int32_t e = g.tiles[2 * slot], r0 = g.tiles[2 * slot + 1];
  const int32_t r_end = g.offsets[e + 1];
  const int rows = r_end - r0 < kBM ? r_end - r0 : kBM;
  const int64_t n0 = ct * kFeat;
  const int64_t K = g.K;
  const uint16_t* w1 = g.w1 + static_cast<int64_t>(e) * g.N * K;
  const uint16_t* w3 = kUp ? g.w3 + static_cast<int64_t>(e) * g.N * K : nullptr;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wm = warp & 1, wn = warp >> 1;

  // Loader maps (kBK = 64: a row of a tile is 8 chunks of 16 bytes). B and bf16 A: thread ->
  // chunk column tid % 8 of rows tid / 8 + 32 i. fp32 A: 4 floats at column (tid % 16) * 4 of
  // rows tid / 16 + 16 i.
  const int bc = (tid & 7) * 8, ac = (tid & 15) * 4;
  const float* a_src[4] = {nullptr, nullptr, nullptr, nullptr};
  const uint16_t* ab_src[2] = {nullptr, nullptr};
  if constexpr (kUp) {
    for (int i = 0; i < 4; ++i) {
      const int r = (tid >> 4) + 16 * i;
      if (r < rows) a_src[i] = g.x_f32 + static_cast<int64_t>(g.row_token[r0 + r]) * K;
    }
  } else {
    for (int i = 0; i < 2; ++i) {
      const int r = (tid >> 3) + 32 * i;
      if (r < rows) ab_src[i] = g.x_bf16 + static_cast<int64_t>(r0 + r) * K;
    }
  }
  const uint16_t* b_src[4];
  bool b_ok[4];
  for (int i = 0; i < 4; ++i) {
    const int br = (tid >> 3) + 32 * i;
    const int64_t n = kUp ? n0 + (br & 63) : n0 + br;
    const uint16_t* base = kUp && br >= 64 ? w3 : w1;
    b_ok[i] = n < g.N;
    b_src[i] = base + (b_ok[i] ? n : 0) * K;
  }

  auto load_b = [&](int kt, int buf) {  // weights (and bf16 A) by cp.async
    const int64_t k = static_cast<int64_t>(kt) * kBK + bc;
    const bool kin = k < K;
    for (int i = 0; i < 4; ++i)
      cp_async16(Bs + (buf * kBN + (tid >> 3) + 32 * i) * kLd + bc, b_src[i] + (kin ? k : 0),
                 b_ok[i] && kin);
    if constexpr (!kUp) {
      for (int i = 0; i < 2; ++i)
        cp_async16(As + (buf * kBM + (tid >> 3) + 32 * i) * kLd + bc,
                   ab_src[i] ? ab_src[i] + (kin ? k : 0) : g.x_bf16, ab_src[i] && kin);
    }
    cp_async_commit();
  };
  float4 a_reg[4];
  auto load_a = [&](int kt) {  // up only: fp32 rows gathered into registers
    const int64_t k = static_cast<int64_t>(kt) * kBK + ac;
    for (int i = 0; i < 4; ++i)
      a_reg[i] = a_src[i] && k < K ? __ldg(reinterpret_cast<const float4*>(a_src[i] + k))
                                   : make_float4(0.f, 0.f, 0.f, 0.f);
  };
  auto store_a = [&](int buf) {  // up only: registers -> bf16 tile
    for (int i = 0; i < 4; ++i) {
      uint2 v;
      v.x = pack_bf16(a_reg[i].x, a_reg[i].y);
      v.y = pack_bf16(a_reg[i].z, a_reg[i].w);
      *reinterpret_cast<uint2*>(As + (buf * kBM + (tid >> 4) + 16 * i) * kLd + ac) = v;
    }
  };

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

  const int KT = static_cast<int>((K + kBK - 1) / kBK);
  load_b(0, 0);
  if constexpr (kUp) {
    load_a(0);
    store_a(0);
  }
  const int mat = lane >> 3, mrow = lane & 7;
  for (int kt = 0; kt < KT; ++kt) {
    const int buf = kt & 1;
    cp_async_wait_all();
    __syncthreads();
    if (kt + 1 < KT) {
      load_b(kt + 1, buf ^ 1);
      if constexpr (kUp) load_a(kt + 1);
    }
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
      uint32_t a[2][4], b[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        ldmatrix_x4(a[i], As + (buf * kBM + wm * 32 + i * 16 + mrow + (mat & 1) * 8) * kLd + ks +
                              (mat >> 1) * 8);
#pragma unroll
      for (int j = 0; j < 2; ++j)
        ldmatrix_x4(b[j], Bs + (buf * kBN + wn * 32 + j * 16 + mrow + (mat >> 1) * 8) * kLd + ks +
                              (mat & 1) * 8);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          mma_bf16_16816(acc[i][2 * j], a[i], b[j][0], b[j][1]);
          mma_bf16_16816(acc[i][2 * j + 1], a[i], b[j][2], b[j][3]);
        }
    }
    if constexpr (kUp)
      if (kt + 1 < KT) store_a(buf ^ 1);
  }

  const int gr = lane >> 2, tq = lane & 3;
  if (!kUp) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm * 32 + i * 16 + gr + 8 * h;
        if (r >= rows) continue;
        float* dst = g.y_out + static_cast<int64_t>(r0 + r) * g.N;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t n = n0 + wn * 32 + j * 8 + tq * 2;
          if (n + 1 < g.N) {
            *reinterpret_cast<float2*>(dst + n) =
                make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
          } else if (n < g.N) {
            dst[n] = acc[i][j][2 * h];
          }
        }
      }
    return;
  }
  // Up: gate (columns 0..63) and up (64..127) meet in shared memory.
  __syncthreads();
  float* Es = reinterpret_cast<float*>(smem);  // [kBM][kEpiLd]
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int r = wm * 32 + i * 16 + gr + 8 * h, c = wn * 32 + j * 8 + tq * 2;
        Es[r * kEpiLd + c] = acc[i][j][2 * h];
        Es[r * kEpiLd + c + 1] = acc[i][j][2 * h + 1];
      }
  __syncthreads();
  for (int t = tid; t < kBM * (kBN / 2); t += kThreads) {
    const int r = t / (kBN / 2), c = t % (kBN / 2);
    const int64_t n = n0 + c;
    if (r >= rows || n >= g.N) continue;
    float gate = Es[r * kEpiLd + c], up = Es[r * kEpiLd + kBN / 2 + c];
    if (g.limit > 0.f) {
      gate = fminf(gate, g.limit);
      up = fminf(fmaxf(up, -g.limit), g.limit);
    }
    g.act_out[static_cast<int64_t>(r0 + r) * g.N + n] =
        f32_to_bf16_bits(gate / (1.f + expf(-gate)) * up);
  }
}

constexpr size_t kSmemBytes = (2 * kBM + 2 * kBN) * kLd * 2 > kBM* kEpiLd * 4
                                  ? (2 * kBM + 2 * kBN) * kLd * 2
                                  : kBM* kEpiLd * 4;

template <bool kUp>
cudaError_t launch_grouped(const GroupedArgs& a, int64_t max_tiles, cudaStream_t stream) {
  constexpr int64_t feat = kUp ? kBN / 2 : kBN;
  const int64_t col_tiles = (a.N + feat - 1) / feat;
  if (max_tiles * col_tiles > 0x7fffffff) return cudaErrorInvalidValue;
  static const cudaError_t attr =
      cudaFuncSetAttribute(grouped_gemm_kernel<kUp>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmemBytes));
  if (attr != cudaSuccess) return attr;
  grouped_gemm_kernel<kUp>
      <<<static_cast<unsigned>(max_tiles * col_tiles), kThreads, kSmemBytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

int64_t moe_max_tiles(int64_t R, int64_t E) {
  return (R + kMoeTileRows - 1) / kMoeTileRows + (E < R ? E : R);
}

cudaError_t launch_moe_up_gemm(const float* x, const int32_t* row_token, const int32_t* offsets,
                               const int32_t* tiles, const int32_t* num_tiles, int64_t max_tiles,
                               const uint16_t* w1, const uint16_t* w3, int64_t I, int64_t D,
                               float limit, uint16_t* act, cudaStream_t stream) {
  if (max_tiles <= 0 || I <= 0) return cudaSuccess;
  if (D % 8 != 0) return cudaErrorInvalidValue;
  GroupedArgs a{x,  nullptr, row_token, offsets, tiles, num_tiles, w1,
                w3, I,       D,         limit,   act,   nullptr};
  return launch_grouped<true>(a, max_tiles, stream);
}

cudaError_t launch_moe_down_gemm(const uint16_t* act, const int32_t* offsets, const int32_t* tiles,
                                 const int32_t* num_tiles, int64_t max_tiles, const uint16_t* w2,
                                 int64_t D, int64_t I, float* y, cudaStream_t stream) {
  if (max_tiles <= 0 || D <= 0) return cudaSuccess;
  if (I % 8 != 0) return cudaErrorInvalidValue;
  GroupedArgs a{nullptr, act, nullptr, offsets, tiles,   num_tiles, w2,
                nullptr, D,   I,       0.f,     nullptr, y};
  return launch_grouped<false>(a, max_tiles, stream);
}

}  // namespace deepinfer::cuda
