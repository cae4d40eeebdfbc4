// Kernel launches of the backend as programmatic dependents (Hopper's PDL, sm_90+) of the work
// before them in their stream. A decode step is ~40 kernels per layer, most a few microseconds
// long. Launched through launch_kernel, a kernel is launched while the kernel before it drains
// (as its blocks exit) rather than after it has completed, and waits in wait_for_prior_grid()
// (kernels_common.cuh) until that kernel has finished and its writes are visible. Every kernel
// launched here must call wait_for_prior_grid() before it reads or writes global memory that
// another kernel touches (a one-row product's first weight stages stream in before it: nothing
// writes weights). Stream capture keeps the programmatic edges in the step's CUDA graph.
// Measured on the H200 (decode 4k, 9 layers): batch 1 / 8 / 64 3.188 / 8.133 / 27.69 ms plain,
// 3.154 / 8.077 / 27.62 programmatic.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace deepinfer::cuda {

// Whether launch_kernel launches programmatically (DEEPINFER_CUDA_PDL; set_programmatic_launch
// in kernels.h).
bool programmatic_launch();

// Whether launches queued now carry a priority (a side branch's: the device's highest, so that a
// graph keeps it per node), and which (set_launch_priority in kernels.h).
bool launch_priority(int* priority);

// Whether `clusters` thread block clusters of `cluster_size` (2-8) blocks of `kernel` (`threads`
// per block, `smem` dynamic bytes each) are all resident at once on the current device, asked
// once per kernel and shape; false where cluster reductions are off (set_cluster_reductions in
// kernels.h) or the device has no clusters. Split work reduces inside clusters only then: past
// one wave, placing clusters by GPC leaves blocks for a second one.
bool clusters_resident(const void* kernel, int threads, size_t smem, int cluster_size,
                       int64_t clusters);

// `cluster` != (1, 1, 1): the grid runs in thread block clusters of that shape (blocks of a
// cluster share their shared memory; cluster_launch_supported() must hold).
template <typename... Params, typename... Args>
cudaError_t launch_kernel_clustered(void (*kernel)(Params...), dim3 grid, dim3 block,
                                    size_t smem_bytes, cudaStream_t stream, dim3 cluster,
                                    Args&&... args) {
  cudaLaunchAttribute attrs[3]{};
  unsigned n = 0;
  if (programmatic_launch()) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (int priority = 0; launch_priority(&priority)) {
    attrs[n].id = cudaLaunchAttributePriority;
    attrs[n++].val.priority = priority;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster.x;
    attrs[n].val.clusterDim.y = cluster.y;
    attrs[n++].val.clusterDim.z = cluster.z;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                          cudaStream_t stream, Args&&... args) {
  return launch_kernel_clustered(kernel, grid, block, smem_bytes, stream, dim3(1, 1, 1),
                                 std::forward<Args>(args)...);
}

}  // namespace deepinfer::cuda
