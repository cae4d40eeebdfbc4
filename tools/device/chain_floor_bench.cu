// What a persistent decode kernel could buy over one launch per product: a V4-Flash layer's eight
// batch-1 weight streams (attention x_proj, wq_b, wo_a, wo_b, the MoE x_proj, the shared w2, the
// routed experts' up and down, each as a dense N x K of the same bytes) run in order, each
// depending on the one before (a consumer reads its producer's output before its first MMA),
// over several layers of distinct weights (far past L2). The same warp loop (gemv_floor_bench's:
// 16 weight rows x 64 k per cp.async stage, ldmatrix + mma.sync on a resident A, the engine's
// split rule) runs four ways:
//   launches     one kernel per product on the engine's grid (a one-warp block per unit) or on a
//                persistent grid, programmatic dependents in a graph, each loading its
//                first S - 1 stages before griddepcontrol.wait and triggering its dependents
//                once its last stage is issued (as the engine's products do);
//   chain        one cooperative kernel for every product: a warp arrives on the product's
//                counter when its units are done and waits for the whole grid's arrivals before
//                its first item of the next product; its ring drains at the boundary;
//   chain+ring   the same, but the ring runs on across the boundary: the next product's weights
//                stream in while the grid meets.
// Prints us per layer against its bytes at 4.3 TB/s.
// Build and run on the GPU machine:
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -I src \
//     tools/device/chain_floor_bench.cu -o /tmp/cfb && /tmp/cfb [layers]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "one_row_tiles.cuh"

namespace {

using namespace one_row;

// One product: weights [N][K] bf16, split into `splits` K segments of seg_tiles k tiles; a unit
// is (segment, column tile); out [splits][N] partials; in: the producer's out (nullptr first).
struct Prod {
  const uint16_t* w;
  int N, K, col_tiles, seg_tiles, splits, units;
  float* out;
  const float* in;
};

struct Plan {
  const Prod* prods;
  int num_prods;
  int warps_total;
  int* arrive;  // [num_prods], zero at launch
};

// The warp's units of product p: [u0, u1), an even split of the product's units over the grid.
__device__ void unit_range(const Prod& pr, int gw, int wt, int* u0, int* u1) {
  *u0 = static_cast<int>(static_cast<int64_t>(gw) * pr.units / wt);
  *u1 = static_cast<int>(static_cast<int64_t>(gw + 1) * pr.units / wt);
}

__device__ int seg_end(const Prod& pr, int seg) {
  return min(pr.K / kBK, (seg + 1) * pr.seg_tiles);
}

// A walk over the warp's items (product, unit, k tile) in the order they are computed.
struct Walk {
  int p, u, u1, kt, kt_end;
  bool done;
  __device__ void enter(const Plan& pl, int prod, int gw) {
    for (p = prod; p < pl.num_prods; ++p) {
      unit_range(pl.prods[p], gw, pl.warps_total, &u, &u1);
      if (u < u1) {
        start_unit(pl.prods[p]);
        done = false;
        return;
      }
    }
    done = true;
  }
  __device__ void start_unit(const Prod& pr) {
    const int seg = u / pr.col_tiles;
    kt = seg * pr.seg_tiles;
    kt_end = seg_end(pr, seg);
  }
  // Steps to the next item, into the next product with units of this warp past the last.
  __device__ void step(const Plan& pl, int gw) {
    if (++kt < kt_end) return;
    if (++u < u1) return start_unit(pl.prods[p]);
    enter(pl, p + 1, gw);
  }
};

__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <int S, int WARPS, bool kCross>
__global__ void __launch_bounds__(32 * WARPS) chain_kernel(Plan pl) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __nv_bfloat16* A = reinterpret_cast<__nv_bfloat16*>(smem);  // one zero 16 x kLd tile
  __nv_bfloat16* B = A + 16 * kLd + warp * S * kBN * kLd;
  const int gw = blockIdx.x * WARPS + warp;
  for (int i = threadIdx.x; i < 16 * kLd / 8; i += blockDim.x)
    reinterpret_cast<uint4*>(A)[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();

  Walk ld;
  ld.enter(pl, 0, gw);
  int issued = 0, consumed = 0;
  // The loader may not pass `limit_p` (the product being computed) without kCross.
  auto issue = [&](int limit_p) {
    if (!ld.done && (kCross || ld.p <= limit_p)) {
      const Prod& pr = pl.prods[ld.p];
      copy_stage(B + (issued % S) * kBN * kLd, pr.w, pr.K, ld.u % pr.col_tiles, ld.kt, lane);
      ld.step(pl, gw);
      ++issued;
      // The last weights are on their way: a launched product's dependents may start (the
      // engine's products trigger there too); a no-op without programmatic dependents.
      if (ld.done) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    }
    cp_async_commit();  // empty when nothing was issued: the group count stays uniform
  };
  for (int s = 0; s < S - 1; ++s) issue(0);
  asm volatile("griddepcontrol.wait;" ::: "memory");

  const int mat = lane >> 3, mrow = lane & 7;
  uint32_t af[4];
  ldmatrix_x4(af, A + (mrow + (mat & 1) * 8) * kLd + (mat >> 1) * 8);
  float sink = 0.f;
  for (int p = 0; p < pl.num_prods; ++p) {
    const Prod& pr = pl.prods[p];
    if (p > 0) {
      // The grid meets: every warp's units of the producer are done (and stored).
      if (lane == 0)
        while (load_acquire(pl.arrive + p - 1) < pl.warps_total) {
        }
      __syncwarp();
      if constexpr (!kCross) {
        // The ring drained at the boundary: S - 1 stages of this product before its first MMA.
        cp_async_wait<0>();
        for (int s = 0; s < S - 1; ++s) issue(p);
      }
    }
    int u0, u1;
    unit_range(pr, gw, pl.warps_total, &u0, &u1);
    if (u0 < u1 && pr.in) sink += __ldcg(pr.in + (lane * 37 + gw) % pr.K);  // the producer's output
    for (int u = u0; u < u1; ++u) {
      const int seg = u / pr.col_tiles;
      float acc0[4] = {sink * 0.f, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
      for (int kt = seg * pr.seg_tiles, ke = seg_end(pr, seg); kt < ke; ++kt) {
        cp_async_wait<S - 2>();
        __syncwarp();
        issue(p);
        mma_stage(acc0, acc1, af, B + (consumed % S) * kBN * kLd, lane);
        ++consumed;
        __syncwarp();  // the stage is read before a later issue refills it
      }
      if (lane < 4) {  // the unit's partial: row 0 lives in lanes 0-3
        const int n = (u % pr.col_tiles) * kBN + lane * 2;
        float* o = pr.out + static_cast<int64_t>(seg) * pr.N + n;
        o[0] = acc0[0];
        o[1] = acc0[1];
        o[8] = acc1[0];
        o[9] = acc1[1];
      }
    }
    __syncwarp();
    if (lane == 0) {
      __threadfence();
      atomicAdd(pl.arrive + p, 1);
    }
  }
  cp_async_wait<0>();
}

struct Shape {
  const char* name;
  int N, K;
};

// A batch-1 V4-Flash layer's weight streams in order (the experts as 6 experts' rows).
const Shape kLayer[] = {{"attn x_proj", 2560, 4096}, {"wq_b", 32768, 1024},
                        {"wo_a", 8192, 4096},        {"wo_b", 4096, 8192},
                        {"moe x_proj", 4352, 4096},  {"shared w2", 4096, 2048},
                        {"experts up", 24576, 4096}, {"experts down", 24576, 2048}};
constexpr int kPerLayer = sizeof(kLayer) / sizeof(kLayer[0]);

double layer_bytes() {
  double b = 0;
  for (const Shape& s : kLayer) b += 2.0 * s.N * s.K;
  return b;
}

// kLaunchesPerUnit: the engine's grid, a block per unit (WARPS = 1 for the engine's one warp).
enum class Mode { kLaunches, kLaunchesPerUnit, kChain, kChainRing };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kLaunches:
      return "launches";
    case Mode::kLaunchesPerUnit:
      return "launches, a block per unit";
    case Mode::kChain:
      return "chain";
    case Mode::kChainRing:
      return "chain+ring";
  }
  return "?";
}

// The products of every layer (weights, partial outputs, the producer chain) on the device.
struct Layers {
  std::vector<Prod> host;
  Prod* dev;
  int* arrive;
  int sms;
};

template <int S, int WARPS>
float run(Mode mode, const Layers& ls, int* warps_per_sm) {
  const std::vector<Prod>& host = ls.host;
  const bool cross = mode == Mode::kChainRing;
  auto kernel = cross ? chain_kernel<S, WARPS, true> : chain_kernel<S, WARPS, false>;
  const size_t smem = (16 * kLd + static_cast<size_t>(WARPS) * S * kBN * kLd) * 2;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * WARPS, smem);
  *warps_per_sm = per_sm * WARPS;
  const int blocks = per_sm * ls.sms, wt = blocks * WARPS;
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  const int P = static_cast<int>(host.size());
  auto launch = [&](int first, int count, bool coop, int grid_warps) {
    cudaLaunchAttribute attr[1] = {};
    if (coop) {
      attr[0].id = cudaLaunchAttributeCooperative;
      attr[0].val.cooperative = 1;
    } else {
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
    }
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(grid_warps / WARPS);
    cfg.blockDim = dim3(32 * WARPS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const Plan pl{ls.dev + first, count, grid_warps, ls.arrive + first};
    return cudaLaunchKernelEx(&cfg, kernel, pl);
  };
  auto enqueue = [&] {
    cudaError_t e = cudaMemsetAsync(ls.arrive, 0, P * sizeof(int), st);
    if (mode == Mode::kLaunches)
      for (int p = 0; p < P && e == cudaSuccess; ++p) e = launch(p, 1, false, wt);
    else if (mode == Mode::kLaunchesPerUnit)
      for (int p = 0; p < P && e == cudaSuccess; ++p)
        e = launch(p, 1, false, (host[p].units + WARPS - 1) / WARPS * WARPS);
    else
      e = launch(0, P, true, wt);
    return e;
  };
  // In a graph where the runtime captures the launches; else (a cooperative launch it does not
  // capture) launched directly, one host launch more per layer set.
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
  const cudaError_t captured = enqueue();
  if (cudaStreamEndCapture(st, &g) != cudaSuccess || captured != cudaSuccess ||
      cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
    printf("  (not captured: %s; launched directly)\n", cudaGetErrorString(captured));
    cudaGetLastError();
    ge = nullptr;
  }
  auto run_once = [&] {
    const cudaError_t e = ge ? cudaGraphLaunch(ge, st) : enqueue();
    if (e != cudaSuccess) printf("launch: %s\n", cudaGetErrorString(e));
  };
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) run_once();
  float best = 1e30f;
  for (int rep = 0; rep < 7; ++rep) {
    cudaEventRecord(e0, st);
    run_once();
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    best = std::min(best, ms);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) printf("error %s\n", cudaGetErrorString(err));
  if (ge) cudaGraphExecDestroy(ge);
  if (g) cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  return best * 1000.f / (P / kPerLayer);
}

template <int S, int WARPS>
void report(Mode mode, const Layers& ls) {
  int warps_per_sm = 0;
  const float us = run<S, WARPS>(mode, ls, &warps_per_sm);
  const double roof = layer_bytes() / 4.3e6;
  printf("%-27s S%-2d x %d warps %8.2f us a layer  %5.2f TB/s  %4.2fx bytes  (%d warps/SM)\n",
         mode_name(mode), S, WARPS, us, layer_bytes() / us / 1e6, us / roof, warps_per_sm);
}

}  // namespace

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 6;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::vector<Prod> host;
  float* prev = nullptr;
  for (int l = 0; l < layers; ++l)
    for (const Shape& s : kLayer) {
      Prod p{};
      uint16_t* w = nullptr;
      cudaMalloc(&w, static_cast<size_t>(s.N) * s.K * 2);
      cudaMemset(w, 0x3c, static_cast<size_t>(s.N) * s.K * 2);
      split(s.N, s.K, &p.splits, &p.seg_tiles);
      p.w = w;
      p.N = s.N;
      p.K = s.K;
      p.col_tiles = s.N / kBN;
      p.units = p.col_tiles * p.splits;
      cudaMalloc(&p.out, static_cast<size_t>(p.splits) * s.N * 4);
      cudaMemset(p.out, 0, static_cast<size_t>(p.splits) * s.N * 4);
      p.in = prev;
      prev = p.out;
      host.push_back(p);
    }
  Layers ls{host, nullptr, nullptr, sms};
  cudaMalloc(&ls.dev, host.size() * sizeof(Prod));
  cudaMemcpy(ls.dev, host.data(), host.size() * sizeof(Prod), cudaMemcpyHostToDevice);
  cudaMalloc(&ls.arrive, host.size() * sizeof(int));
  printf("%s, %d SMs; %d layers of %d products, %.1f MB a layer, %.2f us at 4.3 TB/s\n", prop.name,
         sms, layers, kPerLayer, layer_bytes() / 1e6, layer_bytes() / 4.3e6);
  for (const Shape& s : kLayer) {
    int splits, seg;
    split(s.N, s.K, &splits, &seg);
    printf("  %-13s %6d x %5d: %5d units (%2d splits of %2d k tiles), %6.2f us at 4.3 TB/s\n",
           s.name, s.N, s.K, s.N / kBN * splits, splits, seg, 2.0 * s.N * s.K / 4.3e6);
  }
  report<8, 1>(Mode::kLaunchesPerUnit, ls);
  for (Mode m : {Mode::kLaunches, Mode::kChain, Mode::kChainRing}) {
    report<8, 4>(m, ls);
    report<8, 8>(m, ls);
    report<16, 4>(m, ls);
    report<4, 8>(m, ls);
  }
  return 0;
}
