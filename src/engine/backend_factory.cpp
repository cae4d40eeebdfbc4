#include "engine/backend_factory.h"

#include "core/status.h"
#ifdef DEEPINFER_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace deepinfer {

std::unique_ptr<Backend> make_backend(const std::string& device, int* cuda_index) {
  if (cuda_index) *cuda_index = -1;
  if (device == "cpu") return make_cpu_backend();
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
    int index = 0;
    if (device != "cuda") {
      const std::string n = device.substr(5);
      DI_CHECK(!n.empty() && n.find_first_not_of("0123456789") == std::string::npos,
               ErrorCode::kInvalidArgument, "device '{}': expected cuda:N with N a device index",
               device);
      index = std::stoi(n);
    }
#ifdef DEEPINFER_HAVE_CUDA
    if (cuda_index) *cuda_index = index;
    return make_cuda_backend(index);
#else
    fail(ErrorCode::kUnsupported,
         "device '{}': this build has no CUDA backend (configure with -DDEEPINFER_CUDA=ON where "
         "nvcc is installed)",
         device);
#endif
  }
  fail(ErrorCode::kInvalidArgument, "device '{}' is not one of cpu, cuda, cuda:N", device);
}

}  // namespace deepinfer
