// Where a one-row dense product's time goes, without the engine: the decode Thin tiles' loop
// (16 weight rows x 64 k per cp.async stage, ldmatrix + mma.sync m16n8k16 on a resident A) over
// the products of a V4-Flash decode layer, scheduled several ways: one block of one warp per
// (column tile, K segment) unit as the engine does, a persistent grid whose warps stream
// consecutive units through one continuous ring, and blocks of several warps. Launched 20 at a
// time in a CUDA graph as programmatic dependents, each on its own copy of the weights (together
// far past L2). Prints us per product next to its bytes at 4.3 TB/s.
// Build and run on the GPU machine:
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -I src \
//     tools/device/gemv_floor_bench.cu -o /tmp/gfb && /tmp/gfb
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "one_row_tiles.cuh"

namespace {

using namespace one_row;

struct Shape {
  const char* name;
  int64_t N, K;
};

struct Args {
  const uint16_t* w;
  int64_t N, K;
  int col_tiles, seg_tiles, units;
  float* out;  // [splits][N]
};

// A cursor over one warp's (unit, k tile) items: units [u, u_end), each its segment's k tiles.
struct Cursor {
  int u, kt, kt_end;
  __device__ void start(const Args& a, int unit) {
    u = unit;
    const int seg = u / a.col_tiles, KT = static_cast<int>(a.K / kBK);
    kt = seg * a.seg_tiles;
    kt_end = min(KT, kt + a.seg_tiles);
  }
  __device__ bool next(const Args& a) {  // true when a unit ended
    if (++kt < kt_end) return false;
    start(a, u + 1);
    return true;
  }
};

// WARPS warps per block, each streaming units [first, last) of its own through an S-stage ring.
// kStream: loads only (no arithmetic), the bound of the ring itself.
template <int S, int WARPS, bool kStream>
__global__ void __launch_bounds__(32 * WARPS) units_kernel(Args a, int warps_total) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __nv_bfloat16* A = reinterpret_cast<__nv_bfloat16*>(smem);  // one zero 16 x kLd tile
  __nv_bfloat16* B = A + 16 * kLd + warp * S * kBN * kLd;
  const int gw = blockIdx.x * WARPS + warp;
  const int first = static_cast<int>(static_cast<int64_t>(gw) * a.units / warps_total);
  const int last = static_cast<int>(static_cast<int64_t>(gw + 1) * a.units / warps_total);
  for (int i = threadIdx.x; i < 16 * kLd / 8; i += blockDim.x)
    reinterpret_cast<uint4*>(A)[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  if (first >= last) return;
  Cursor ld, cu;
  ld.start(a, first);
  cu.start(a, first);
  int loaded = 0;
  const int items_total = [&] {
    int n = 0;
    for (int u = first; u < last; ++u) {
      const int seg = u / a.col_tiles, KT = static_cast<int>(a.K / kBK);
      n += min(KT, (seg + 1) * a.seg_tiles) - seg * a.seg_tiles;
    }
    return n;
  }();
  auto load = [&]() {
    if (loaded < items_total) {
      copy_stage(B + (loaded % S) * kBN * kLd, a.w, a.K, ld.u % a.col_tiles, ld.kt, lane);
      ld.next(a);
      ++loaded;
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < S - 1; ++s) load();
  asm volatile("griddepcontrol.wait;" ::: "memory");
  float acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
  const int mat = lane >> 3, mrow = lane & 7;
  uint32_t af[4];
  ldmatrix_x4(af, A + (mrow + (mat & 1) * 8) * kLd + (mat >> 1) * 8);
  for (int it = 0; it < items_total; ++it) {
    cp_async_wait<S - 2>();
    __syncwarp();
    load();
    const __nv_bfloat16* Bt = B + (it % S) * kBN * kLd;
    if constexpr (kStream) {
      acc0[0] += __bfloat162float(Bt[lane]);
    } else {
      mma_stage(acc0, acc1, af, Bt, lane);
    }
    const int u = cu.u;
    if (cu.next(a)) {  // the unit's partial: row 0 lives in lanes 0-3
      if (lane < 4) {
        const int seg = u / a.col_tiles, n = (u % a.col_tiles) * kBN + lane * 2;
        float* o = a.out + static_cast<int64_t>(seg) * a.N + n;
        o[0] = acc0[0];
        o[1] = acc0[1];
        o[8] = acc1[0];
        o[9] = acc1[1];
      }
      acc0[0] = acc0[1] = acc0[2] = acc0[3] = acc1[0] = acc1[1] = acc1[2] = acc1[3] = 0.f;
    }
  }
  cp_async_wait<0>();
}

template <int S, int WARPS, bool kStream>
float time_it(const Shape& sh, const std::vector<uint16_t*>& ws, float* out, int warps_total,
              bool pdl, int* blocks_per_sm) {
  int splits, seg;
  split(sh.N, sh.K, &splits, &seg);
  Args a{nullptr, sh.N, sh.K, static_cast<int>(sh.N / kBN), seg, 0, out};
  a.units = a.col_tiles * splits;
  if (warps_total <= 0) warps_total = a.units;  // one unit per warp
  const int blocks = (warps_total + WARPS - 1) / WARPS;
  warps_total = blocks * WARPS;
  auto k = units_kernel<S, WARPS, kStream>;
  const size_t smem = (16 * kLd + static_cast<size_t>(WARPS) * S * kBN * kLd) * 2;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, k, 32 * WARPS, smem);
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaGraph_t g;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
  const int kLaunches = 20;
  for (int i = 0; i < kLaunches; ++i) {
    a.w = ws[i % ws.size()];
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(32 * WARPS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = &attr;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, k, a, warps_total);
  }
  cudaStreamEndCapture(st, &g);
  cudaGraphExec_t ge;
  cudaGraphInstantiate(&ge, g, 0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) cudaGraphLaunch(ge, st);
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(e0, st);
    cudaGraphLaunch(ge, st);
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    best = std::min(best, ms * 1000.f / kLaunches);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) printf("error %s\n", cudaGetErrorString(err));
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  return best;
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  // A V4-Flash decode layer's one-row products (N x K).
  const Shape shapes[] = {{"x_proj 2560x4096", 2560, 4096},
                          {"moe x_proj 4352x4096", 4352, 4096},
                          {"shared w2 4096x2048", 4096, 2048},
                          {"wq_b 32768x1024", 32768, 1024},
                          {"wo_b 4096x8192", 4096, 8192}};
  const int64_t max_elems = int64_t{32768} * 1024;
  std::vector<uint16_t*> ws(5);  // 5 x 67 MB: past the 50 MB L2 whatever the shape
  for (auto& w : ws) {
    cudaMalloc(&w, max_elems * 2);
    cudaMemset(w, 0x3c, max_elems * 2);
  }
  float* out;
  cudaMalloc(&out, 16 * 32768 * 4);
  for (const Shape& sh : shapes) {
    int splits, seg;
    split(sh.N, sh.K, &splits, &seg);
    const double roof = sh.N * sh.K * 2 / 4.3e6;
    printf("%s: %d units (%d splits of %d k tiles), bytes at 4.3 TB/s %.2f us\n", sh.name,
           static_cast<int>(sh.N / kBN) * splits, splits, seg, roof);
    int per_sm = 0;
    auto row = [&](const char* what, float us) {
      printf("  %-44s %7.2f us  (%d blocks/SM)  %.2f TB/s\n", what, us, per_sm,
             sh.N * sh.K * 2 / us / 1e6);
    };
    row("engine-like 1 warp/unit S8, pdl", time_it<8, 1, false>(sh, ws, out, 0, true, &per_sm));
    row("engine-like, plain launches", time_it<8, 1, false>(sh, ws, out, 0, false, &per_sm));
    row("1 warp/unit S8, loads only", time_it<8, 1, true>(sh, ws, out, 0, true, &per_sm));
    row("1 warp/unit S16", time_it<16, 1, false>(sh, ws, out, 0, true, &per_sm));
    row("4 warps/block, 1 unit/warp S8", time_it<8, 4, false>(sh, ws, out, 0, true, &per_sm));
    for (int p : {4, 8, 10}) {
      char name[64];
      snprintf(name, sizeof name, "persistent %d warps/SM S8", p);
      row(name, time_it<8, 1, false>(sh, ws, out, p * sms, true, &per_sm));
    }
    row("persistent 8 warps/SM S8, loads only",
        time_it<8, 1, true>(sh, ws, out, 8 * sms, true, &per_sm));
    row("persistent 4 warps/SM S16", time_it<16, 1, false>(sh, ws, out, 4 * sms, true, &per_sm));
    row("persistent 2x4 warps/SM S8", time_it<8, 4, false>(sh, ws, out, 8 * sms, true, &per_sm));
  }
  return 0;
}
