// Executable CUDA graphs of recorded launch sequences, kept per key (the model uses the decode
// batch size) and per layout (the node types in order, the number of edges and how many of them
// are programmatic: a recorded stream is a chain, and a side branch forks and joins at the
// points the model fixes, so that is its topology). A recorded sequence whose layout
// matches a kept graph is written into it with cudaGraphExecUpdate (new kernel arguments, copy
// addresses and grids; far cheaper than instantiating) and replayed; a new layout is instantiated
// once and kept. Replaying one graph instead of ~400 launches removes the per-launch gaps on the
// device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace deepinfer::cuda {

struct GraphStats {
  int64_t launched = 0;            // graphs run
  int64_t instantiated = 0;        // new executable graphs
  int64_t updated = 0;             // runs that reused a kept executable graph
  int64_t update_failures = 0;     // a kept graph of the same layout refused the update
  int last_update_result = 0;      // cudaGraphExecUpdateResult of the last refusal
  std::string last_refused_node;   // what that refusal named (node type, kernel or copy)
  int64_t nodes = 0;               // nodes of the last graph
  int64_t edges = 0;               // dependencies between its nodes
  int64_t programmatic_edges = 0;  // of its edges, programmatic ones (launch.cuh)
  int64_t upload_copies = 0;       // of its nodes, copies from host memory
  int64_t packed_bytes = 0;        // what its first node copied (GraphUpload), 0 if none
  int64_t kept = 0;                // executable graphs kept now, over all keys
  int64_t evicted = 0;             // kept graphs dropped for the bound over all keys
};

// Host bytes a graph copies to the device before all its other nodes: the uploads of the
// recording packed into one copy (a copy node in a chain costs ~4 us of device idle; kernels
// follow each other with none).
struct GraphUpload {
  void* dst = nullptr;
  const void* src = nullptr;  // pinned host memory, unchanged until the graph has run
  size_t bytes = 0;           // 0: no copy
};

class GraphCache {
 public:
  GraphCache() = default;
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Starts recording `stream` (relaxed capture mode: the host-side checks stay allowed).
  void begin(cudaStream_t stream);
  // Ends the recording; with `run`, adds `upload` in front of the recorded nodes, turns the
  // result into an executable graph (updated or new, under `key`) and launches it on the stream.
  // Without `run` (an error unwound the recording) the recorded work is dropped. Throws
  // deepinfer::Error on CUDA failures.
  void end(cudaStream_t stream, int64_t key, bool run, const GraphUpload& upload = {});
  bool recording() const { return recording_; }
  const GraphStats& stats() const { return stats_; }
  // At most this many executable graphs over all keys (a server sees every batch size); past
  // it the least recently run one goes. kKeptTotal by default; for tests.
  void set_capacity(size_t graphs);

 private:
  struct Kept {
    uint64_t layout;  // hash of the node types in order and the edge counts
    cudaGraphExec_t exec;
    uint64_t last_run;  // runs_ when it last ran
  };
  // Drops the least recently run graph of all keys.
  void evict_oldest();
  // Executable graphs kept per key, most recently run first: at most kKeptPerKey per key and
  // capacity_ over all keys (a decode graph is ~400 nodes).
  static constexpr size_t kKeptPerKey = 16, kKeptTotal = 64;
  std::map<int64_t, std::deque<Kept>> kept_;
  size_t capacity_ = kKeptTotal, total_ = 0;
  uint64_t runs_ = 0;
  bool recording_ = false;
  GraphStats stats_;
  // Puts upload's copy in front of the graph's root nodes.
  cudaError_t add_upload(cudaGraph_t graph, const GraphUpload& upload);
  std::vector<cudaGraphNode_t> nodes_, from_, to_;  // scratch for reading a graph's nodes, edges
  std::vector<cudaGraphEdgeData> edges_;
};

}  // namespace deepinfer::cuda
