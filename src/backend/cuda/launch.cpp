// The process-wide switch of launch.cuh's programmatic launches (DEEPINFER_CUDA_PDL).
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

}  // namespace deepinfer::cuda
