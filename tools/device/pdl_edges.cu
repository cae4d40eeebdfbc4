// What a programmatic launch after a side branch's join becomes in a captured graph: the model's
// pattern (main: k1; side: k2 after a fork; main: k3, join, k4 launched programmatically) captured,
// every edge printed with its type, then replayed with k2 slow: whether k4 starts (and reads k2's
// flag) before k2 has finished, i.e. whether the joined edge is programmatic or a full one.
// Build and run on the GPU machine:
//   nvcc -O2 -gencode arch=compute_90a,code=sm_90a -std=c++17 tools/device/pdl_edges.cu \
//     -o /tmp/pdl && /tmp/pdl
#include <cuda_runtime.h>

#include <cstdio>
#include <map>
#include <vector>

#define CK(x)                                                     \
  do {                                                            \
    cudaError_t e_ = (x);                                         \
    if (e_ != cudaSuccess) {                                      \
      std::printf("%s failed: %s\n", #x, cudaGetErrorString(e_)); \
      return 1;                                                   \
    }                                                             \
  } while (0)

__global__ void k_short(int* out) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) out[0] += 1;
}
__global__ void k_slow_flag(volatile int* flag) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const long long t0 = clock64();
  while (clock64() - t0 < 200000000LL) {  // ~100 ms
  }
  if (threadIdx.x == 0) *flag = 1;
}
__global__ void k_reader(volatile int* flag, int* seen) {
  if (threadIdx.x == 0) seen[0] = *flag;  // before the wait
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) seen[1] = *flag;  // after it
}

template <typename... A>
cudaError_t launch_pdl(void (*k)(A...), cudaStream_t s, A... args) {
  cudaLaunchAttribute at{};
  at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = 1;
  cfg.blockDim = 32;
  cfg.stream = s;
  cfg.attrs = &at;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, k, args...);
}

int main() {
  cudaStream_t main_s, side_s;
  CK(cudaStreamCreateWithFlags(&main_s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&side_s, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  int *counter, *flag, *seen;
  CK(cudaMalloc(&counter, 4));
  CK(cudaMalloc(&flag, 4));
  CK(cudaMalloc(&seen, 8));
  CK(cudaMemset(counter, 0, 4));

  cudaGraph_t g;
  CK(cudaStreamBeginCapture(main_s, cudaStreamCaptureModeThreadLocal));
  CK(launch_pdl(k_short, main_s, counter));  // k1
  CK(cudaEventRecord(fork, main_s));
  CK(cudaStreamWaitEvent(side_s, fork, 0));
  CK(launch_pdl(k_slow_flag, side_s, static_cast<volatile int*>(flag)));  // k2
  CK(launch_pdl(k_short, main_s, counter));                               // k3
  CK(cudaEventRecord(join, side_s));
  CK(cudaStreamWaitEvent(main_s, join, 0));
  CK(launch_pdl(k_reader, main_s, static_cast<volatile int*>(flag), seen));  // k4
  CK(cudaStreamEndCapture(main_s, &g));

  size_t n = 0;
  CK(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  CK(cudaGraphGetNodes(g, nodes.data(), &n));
  std::map<cudaGraphNode_t, const char*> name;
  for (cudaGraphNode_t nd : nodes) {
    cudaGraphNodeType t;
    CK(cudaGraphNodeGetType(nd, &t));
    cudaKernelNodeParams p{};
    if (t == cudaGraphNodeTypeKernel && cudaGraphKernelNodeGetParams(nd, &p) == cudaSuccess) {
      name[nd] = p.func == reinterpret_cast<void*>(k_slow_flag) ? "k2(side, slow)"
                 : p.func == reinterpret_cast<void*>(k_reader)  ? "k4(after join)"
                                                                : "k1/k3(main)";
    } else {
      name[nd] = "non-kernel";
    }
  }
  size_t ne = 0;
  CK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &ne));
  std::vector<cudaGraphNode_t> from(ne), to(ne);
  std::vector<cudaGraphEdgeData> data(ne);
  CK(cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &ne));
  std::printf("%zu nodes, %zu edges\n", n, ne);
  for (size_t i = 0; i < ne; ++i)
    std::printf("  %-16s -> %-16s type %d (%s) from_port %d\n", name[from[i]], name[to[i]],
                data[i].type,
                data[i].type == cudaGraphDependencyTypeProgrammatic ? "programmatic" : "full",
                data[i].from_port);

  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int rep = 0; rep < 2; ++rep) {
    CK(cudaMemset(flag, 0, 4));
    CK(cudaMemset(seen, 0xff, 8));
    CK(cudaDeviceSynchronize());
    CK(cudaGraphLaunch(ge, main_s));
    CK(cudaStreamSynchronize(main_s));
    int h[2];
    CK(cudaMemcpy(h, seen, 8, cudaMemcpyDeviceToHost));
    std::printf(
        "replay %d: k4 read k2's flag %d before its wait, %d after (0 before: k4 ran "
        "beside k2, the joined edge is programmatic)\n",
        rep, h[0], h[1]);
  }
  return 0;
}
