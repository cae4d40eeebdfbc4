// What CUDA devices this process can use. Safe to call without a driver or GPU (returns none).
#pragma once

#include <string>
#include <vector>

namespace deepinfer::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  size_t total_memory = 0;
  int multiprocessors = 0;
};

std::vector<DeviceInfo> list_devices();
// Free and total bytes of device memory right now; false when the device cannot be queried.
bool memory_info(int device, size_t* free_bytes, size_t* total_bytes);

// Why no device is usable (driver missing, no GPU...), or "" when at least one is.
std::string unavailable_reason();

// Whether the current device runs this build's Hopper wgmma kernels: an sm_90 device and device
// code compiled with the sm_90a features (otherwise those kernels compile to a trap). Runs a
// one-thread probe on the current device and waits for it.
bool wgmma_available(int sm_major, int sm_minor);

}  // namespace deepinfer::cuda
