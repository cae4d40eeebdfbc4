// `deepinfer devices`: the compute devices this build can use.
#include <cstdio>
#include <thread>

#include "api/cli/command.h"
#ifdef DEEPINFER_HAVE_CUDA
#include "backend/cuda/device_info.h"
#endif

namespace deepinfer::cli {
namespace {

CommandRegistrar reg(
    "devices", "List the CPU and CUDA devices this build can use", [](CLI::App&) -> CommandFn {
      return [] {
        std::printf("cpu: %u hardware threads\n", std::thread::hardware_concurrency());
#ifdef DEEPINFER_HAVE_CUDA
        const auto devs = cuda::list_devices();
        if (devs.empty())
          std::printf("cuda: unavailable (%s)\n", cuda::unavailable_reason().c_str());
        for (const auto& d : devs)
          std::printf("cuda:%d %s sm_%d%d %.1f GiB %d SMs\n", d.index, d.name.c_str(), d.sm_major,
                      d.sm_minor, d.total_memory / double(1 << 30), d.multiprocessors);
#else
                         std::printf("cuda: not built (configure with -DDEEPINFER_CUDA=ON)\n");
#endif
        return 0;
      };
    });

}  // namespace
}  // namespace deepinfer::cli
