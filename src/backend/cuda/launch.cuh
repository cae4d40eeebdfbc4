// Kernel launches of the backend as programmatic dependents (Hopper's PDL, sm_90+) of the work
// before them in their stream. A decode step is ~40 kernels per layer, most a few microseconds
// long: launched plainly, each one's blocks are scheduled only after the kernel before it has
// drained. Launched through launch_kernel, a kernel's blocks are scheduled as soon as every block
// of the kernel before it has started, and wait in grid_dependency_begin() (kernels_common.cuh)
// until that kernel has finished and its writes are visible. Every kernel launched here must
// call grid_dependency_begin() before it reads or writes global memory that another kernel
// touches (the weights of a product may stream in before it: nothing writes them). Stream
// capture keeps the programmatic edges in the step's CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace deepinfer::cuda {

// Whether launch_kernel launches programmatically (DEEPINFER_CUDA_PDL; set_programmatic_launch
// in kernels.h).
bool programmatic_launch();

template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                          cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = programmatic_launch() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace deepinfer::cuda
