// The process-wide switches of launch.cuh's programmatic launches (DEEPINFER_CUDA_PDL), launch
// priority (side branches) and cluster reductions (DEEPINFER_CUDA_CLUSTER_SPLIT), and the
// devices' cluster support.
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

namespace deepinfer::cuda {

namespace {
bool programmatic = true;
bool cluster_reductions = true;
bool high_priority = false;
int greatest_priority = 0;
}  // namespace

bool launch_priority(int* priority) {
  if (high_priority) *priority = greatest_priority;
  return high_priority;
}

void set_launch_priority(bool high) {
  if (high) {
    int least = 0;
    if (cudaDeviceGetStreamPriorityRange(&least, &greatest_priority) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
  }
  high_priority = high;
}

bool programmatic_launch() {
  return programmatic;
}

void set_programmatic_launch(bool on) {
  programmatic = on;
}

bool cluster_launch_supported() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> known[kMaxDevices] = {};  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return false;
  if (known[device].load(std::memory_order_relaxed) == 0) {
    int on = 0;
    cudaDeviceGetAttribute(&on, cudaDevAttrClusterLaunch, device);
    known[device].store(on ? 2 : 1, std::memory_order_relaxed);
  }
  return known[device].load(std::memory_order_relaxed) == 2;
}

void set_cluster_reductions(bool on) {
  cluster_reductions = on;
}

bool clusters_resident(const void* kernel, int threads, size_t smem, int cluster_size,
                       int64_t clusters) {
  if (!cluster_reductions || cluster_size < 2 || cluster_size > 8 || !cluster_launch_supported())
    return false;
  int device = 0;
  cudaGetDevice(&device);
  using Key = std::tuple<int, const void*, int, size_t, int>;
  static std::mutex mu;
  static std::map<Key, int> resident;  // most clusters resident at once
  const Key key{device, kernel, threads, smem, cluster_size};
  std::lock_guard<std::mutex> lock(mu);
  auto it = resident.find(key);
  if (it == resident.end()) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = static_cast<unsigned>(cluster_size);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(cluster_size));
    cfg.blockDim = dim3(static_cast<unsigned>(threads));
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
      cudaGetLastError();  // not sticky: the caller's path without clusters serves
      n = 0;
    }
    it = resident.emplace(key, n).first;
  }
  return clusters <= it->second;
}

}  // namespace deepinfer::cuda
