#include "backend/cuda/pinned_staging.h"

#include <cstring>

#include "backend/cuda/cuda_backend_impl.h"

namespace deepinfer::cuda {

PinnedStaging::~PinnedStaging() {
  // Errors are ignored: at exit the runtime may already be gone.
  for (Region& r : in_flight_) {
    if (!r.done) continue;
    cudaEventSynchronize(r.done);
    cudaEventDestroy(r.done);
  }
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  if (ring_) cudaFreeHost(ring_);
  cudaGetLastError();
}

cudaEvent_t PinnedStaging::take_event() {
  if (!spare_events_.empty()) {
    cudaEvent_t e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "upload: staging event");
  return e;
}

cudaEvent_t PinnedStaging::done_event(size_t i) const {
  for (; i < in_flight_.size(); ++i)
    if (in_flight_[i].done) return in_flight_[i].done;
  return nullptr;
}

const void* PinnedStaging::stage(const void* host, size_t n,
                                 const std::function<void()>& before_wait) {
  if (!ring_) check(cudaHostAlloc(&ring_, capacity_, cudaHostAllocDefault), "upload: pinned ring");
  const size_t size = (n + 255) / 256 * 256;
  const size_t start = head_ + size > capacity_ ? 0 : head_;
  const bool wrapped = start != head_;  // the tail [head_, capacity_) is skipped this lap
  // In-flight regions are in ring order from the oldest: first the previous lap's regions at and
  // after head_ (all of them must go when wrapping), then those the new region overlaps.
  while (!in_flight_.empty()) {
    Region& r = in_flight_.front();
    const bool needed =
        (r.offset < start + size && start < r.offset + r.size) || (wrapped && r.offset >= head_);
    const cudaEvent_t ev = done_event(0);
    if (!ev) {
      // Only regions of the graph being recorded are left: they run after it is launched.
      DI_CHECK(!needed, ErrorCode::kInternal,
               "upload: one recorded graph's uploads exceed the {}-byte pinned ring", capacity_);
      break;
    }
    const bool done = cudaEventQuery(ev) == cudaSuccess;
    if (!needed && !done) break;
    if (!done) {
      before_wait();
      check(cudaEventSynchronize(ev), "upload: staging wait");
    }
    if (r.done) spare_events_.push_back(r.done);
    in_flight_.pop_front();
  }
  cudaGetLastError();  // cudaEventQuery's cudaErrorNotReady is not an error
  std::memcpy(ring_ + start, host, n);
  in_flight_.push_back({start, size, nullptr});
  head_ = start + size;
  return ring_ + start;
}

void PinnedStaging::upload(const void* host, void* dst, size_t n, cudaStream_t stream,
                           const std::function<void()>& before_wait) {
  const void* staged = stage(host, n, before_wait);
  check(cudaMemcpyAsync(dst, staged, n, cudaMemcpyHostToDevice, stream), "upload");
  if (!recording_) seal(stream);
}

void PinnedStaging::seal(cudaStream_t stream) {
  if (in_flight_.empty() || in_flight_.back().done) return;
  cudaEvent_t done = take_event();
  check(cudaEventRecord(done, stream), "upload: staging event");
  in_flight_.back().done = done;
}

}  // namespace deepinfer::cuda
