#include "backend/cuda/device_info.h"

#include <cuda_runtime.h>

namespace deepinfer::cuda {

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

}  // namespace deepinfer::cuda
