// Builds the backend a device string names: "cpu", "cuda" or "cuda:N".
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace deepinfer {

// cuda_index (optional) receives the CUDA device index, or -1 for the CPU. Errors name the device:
// kInvalidArgument for a malformed string, kUnsupported when this build has no CUDA backend.
std::unique_ptr<Backend> make_backend(const std::string& device, int* cuda_index = nullptr);

}  // namespace deepinfer
