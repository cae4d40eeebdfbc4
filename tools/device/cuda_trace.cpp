// A CUPTI activity tracer for the GPU machine, which has no nsys: injected into any CUDA program
// through CUDA_INJECTION64_PATH (the driver calls InitializeInjection at cuInit), it records every
// kernel (concurrent-kernel records: the real start and end of kernels that overlap, graph
// nodes included), memcpy and memset with its device times, stream, graph and correlation ids,
// and writes them as CSV to $DEEPINFER_TRACE_OUT (default cuda_trace.csv) when the program exits.
// tools/device/cuda_trace.sh builds it and runs a command under it; trace_summary.py reads the
// CSV (timeline, per-stream busy time, the device's idle gaps).
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

constexpr size_t kBufferBytes = size_t{16} << 20;
FILE* out = nullptr;
std::mutex mu;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(mu);
  CUpti_Activity* rec = nullptr;
  while (out && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      std::fprintf(out, "kernel,%llu,%llu,%u,%u,%u,%d,%d,%d,%d,%s\n",
                   static_cast<unsigned long long>(k->start),
                   static_cast<unsigned long long>(k->end), k->streamId, k->graphId,
                   k->correlationId, k->gridX, k->gridY, k->gridZ, k->blockX,
                   k->name ? k->name : "?");
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      std::fprintf(out, "memcpy,%llu,%llu,%u,%u,%u,%u,%llu,0,0,memcpy_kind_%u\n",
                   static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end), m->streamId, m->graphId,
                   m->correlationId, static_cast<unsigned>(m->copyKind),
                   static_cast<unsigned long long>(m->bytes), static_cast<unsigned>(m->copyKind));
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      std::fprintf(out, "memset,%llu,%llu,%u,%u,%u,0,%llu,0,0,memset\n",
                   static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end), m->streamId, m->graphId,
                   m->correlationId, static_cast<unsigned long long>(m->bytes));
    }
  }
  std::free(buffer);
}

// Registered from InitializeInjection, i.e. after the CUDA runtime's own exit handlers, so it
// runs before them: the context still exists while the last buffers are flushed.
void flush_at_exit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(mu);
  if (out) std::fclose(out);
  out = nullptr;
}

}  // namespace

extern "C" int InitializeInjection(void) {
  const char* path = std::getenv("DEEPINFER_TRACE_OUT");
  out = std::fopen(path && *path ? path : "cuda_trace.csv", "w");
  if (!out) return 0;
  std::fprintf(out, "kind,start_ns,end_ns,stream,graph,correlation,a,b,c,d,name\n");
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "cuda_trace: CUPTI activity tracing could not be enabled\n");
    return 0;
  }
  std::atexit(flush_at_exit);
  return 1;
}
