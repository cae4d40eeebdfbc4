// The process-wide switch of launch.cuh's programmatic launches (DEEPINFER_CUDA_PDL) and the
// devices' cluster support.
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"

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
  static int known[kMaxDevices] = {};  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0) return false;
  if (device >= kMaxDevices) return false;
  if (known[device] == 0) {
    int on = 0;
    cudaDeviceGetAttribute(&on, cudaDevAttrClusterLaunch, device);
    known[device] = on ? 2 : 1;
  }
  return known[device] == 2;
}

}  // namespace deepinfer::cuda
