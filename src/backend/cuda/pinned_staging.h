// A ring of pinned host memory for asynchronous uploads: the caller's bytes are copied into the
// ring and the device copy is queued on the stream, so upload() returns at once and the caller
// may reuse its buffer. Each region is reused only after the event recorded behind its copy has
// completed; waiting for one (the device is a whole ring behind) is the only host sync here.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <vector>

namespace deepinfer::cuda {

class PinnedStaging {
 public:
  // `capacity` bytes of pinned memory, allocated on first use.
  explicit PinnedStaging(size_t capacity) : capacity_(capacity) {}
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  size_t capacity() const { return capacity_; }
  // Copies n bytes (n <= capacity) into the ring and queues ring -> dst on `stream`.
  // `before_wait` runs before the host would block on an unfinished earlier copy (the sync
  // guard hooks in there). Throws deepinfer::Error on CUDA failures.
  void upload(const void* host, void* dst, size_t n, cudaStream_t stream,
              const std::function<void()>& before_wait);
  // Copies n bytes (n <= capacity) into the ring and returns where they are, for a copy the
  // caller queues itself; seal() must follow that copy (the region is not reused before).
  const void* stage(const void* host, size_t n, const std::function<void()>& before_wait);
  // While `stream` is being recorded into a graph, uploads record no event (a captured event
  // cannot be waited for from the host); seal(), called once the graph is launched (or
  // dropped), records one event behind it for all of them.
  void set_recording(bool on) { recording_ = on; }
  void seal(cudaStream_t stream);

 private:
  struct Region {
    size_t offset, size;
    cudaEvent_t done;  // null: done with the next region that has an event (recorded, unsealed)
  };
  // The event that tells when in_flight_[i] is done, or null (recorded, not sealed yet).
  cudaEvent_t done_event(size_t i) const;
  cudaEvent_t take_event();

  size_t capacity_;
  char* ring_ = nullptr;
  size_t head_ = 0;
  std::deque<Region> in_flight_;
  std::vector<cudaEvent_t> spare_events_;
  bool recording_ = false;
};

}  // namespace deepinfer::cuda
