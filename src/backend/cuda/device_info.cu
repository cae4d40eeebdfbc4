#include "backend/cuda/device_info.h"

#include <cuda_runtime.h>

#include "backend/cuda/wgmma_ptx.cuh"

namespace deepinfer::cuda {

namespace {

// Writes whether this build's code for the device has the wgmma kernels (an sm_90 build without
// the `a` features compiles them to a trap).
__global__ void wgmma_built_kernel(int* out) {
  *out = DI_HAVE_WGMMA;
}

}  // namespace

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> out;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return out;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.push_back({i, p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount});
  }
  return out;
}

bool memory_info(int device, size_t* free_bytes, size_t* total_bytes) {
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const bool ok = cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess;
  if (!ok) cudaGetLastError();
  cudaSetDevice(current);
  return ok;
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return cudaGetErrorString(err);
  }
  return n > 0 ? "" : "no CUDA device found";
}

bool wgmma_available(int sm_major, int sm_minor) {
  if (sm_major != 9 || sm_minor != 0) return false;
  int* flag = nullptr;
  int built = 0;
  if (cudaMalloc(&flag, sizeof(int)) != cudaSuccess) return false;
  wgmma_built_kernel<<<1, 1>>>(flag);
  const bool ok = cudaGetLastError() == cudaSuccess &&
                  cudaMemcpy(&built, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(flag);
  return ok && built == 1;
}

}  // namespace deepinfer::cuda
