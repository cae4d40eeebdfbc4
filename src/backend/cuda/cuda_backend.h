// The CUDA backend (Hopper sm_90a first): every op of backend.h on one device. Weight matrices
// are bf16 (weight_dtype()), GEMMs run through cuBLAS with fp32 accumulation and fp32 outputs,
// everything else is fp32 / int32 on the device.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace deepinfer {

// Throws deepinfer::Error when the device cannot be used (no driver, no GPU, bad index).
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace deepinfer
