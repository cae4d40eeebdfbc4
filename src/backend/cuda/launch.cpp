// The process-wide switch of launch.cuh's programmatic launches (DEEPINFER_CUDA_PDL) and the
// devices' cluster support.
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"

#include <atomic>

namespace deepinfer::cuda {

namespace {
bool programmatic = true;
}  // namespace

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

}  // namespace deepinfer::cuda
