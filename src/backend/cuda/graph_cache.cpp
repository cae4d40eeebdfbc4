#include "backend/cuda/graph_cache.h"

#include <fmt/format.h>

#include "backend/cuda/cuda_backend_impl.h"

namespace deepinfer::cuda {

namespace {

// A readable name of the node an update refused: its type, and the kernel or the copy.
std::string describe(cudaGraphNode_t node) {
  if (!node) return "no node";
  cudaGraphNodeType type;
  if (cudaGraphNodeGetType(node, &type) != cudaSuccess) return "unknown node";
  if (type == cudaGraphNodeTypeKernel) {
    cudaKernelNodeParams p{};
    const char* name = nullptr;
    if (cudaGraphKernelNodeGetParams(node, &p) == cudaSuccess &&
        cudaFuncGetName(&name, p.func) == cudaSuccess && name)
      return fmt::format("kernel {} grid {}x{}x{} smem {}", name, p.gridDim.x, p.gridDim.y,
                         p.gridDim.z, p.sharedMemBytes);
    return "kernel";
  }
  if (type == cudaGraphNodeTypeMemcpy) {
    cudaMemcpy3DParms p{};
    if (cudaGraphMemcpyNodeGetParams(node, &p) == cudaSuccess)
      return fmt::format("memcpy kind {} extent {}x{}x{}", static_cast<int>(p.kind), p.extent.width,
                         p.extent.height, p.extent.depth);
    return "memcpy";
  }
  return fmt::format("node type {}", static_cast<int>(type));
}

// Whether a copy node reads host memory (an upload).
bool copies_from_host(cudaGraphNode_t node) {
  cudaMemcpy3DParms p{};
  cudaPointerAttributes a{};
  if (cudaGraphMemcpyNodeGetParams(node, &p) != cudaSuccess ||
      cudaPointerGetAttributes(&a, p.srcPtr.ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeUnregistered;
}

}  // namespace

void GraphCache::set_capacity(size_t graphs) {
  capacity_ = graphs < 1 ? 1 : graphs;
  while (total_ > capacity_) evict_oldest();
}

void GraphCache::evict_oldest() {
  auto oldest = kept_.end();
  for (auto it = kept_.begin(); it != kept_.end(); ++it)
    if (!it->second.empty() &&
        (oldest == kept_.end() || it->second.back().last_run < oldest->second.back().last_run))
      oldest = it;
  if (oldest == kept_.end()) return;
  cudaGraphExecDestroy(oldest->second.back().exec);
  oldest->second.pop_back();
  if (oldest->second.empty()) kept_.erase(oldest);
  --total_;
  ++stats_.evicted;
  stats_.kept = static_cast<int64_t>(total_);
}

GraphCache::~GraphCache() {
  for (auto& [key, list] : kept_)
    for (Kept& k : list) cudaGraphExecDestroy(k.exec);
  cudaGetLastError();
}

void GraphCache::begin(cudaStream_t stream) {
  DI_CHECK(!recording_, ErrorCode::kInternal, "CUDA graph: recording already started");
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "CUDA graph: begin capture");
  recording_ = true;
}

cudaError_t GraphCache::add_upload(cudaGraph_t graph, const GraphUpload& upload) {
  size_t roots = 0;
  cudaError_t err = cudaGraphGetRootNodes(graph, nullptr, &roots);
  if (err != cudaSuccess) return err;
  to_.resize(roots);
  err = cudaGraphGetRootNodes(graph, to_.data(), &roots);
  cudaGraphNode_t copy = nullptr;
  if (err == cudaSuccess)
    err = cudaGraphAddMemcpyNode1D(&copy, graph, nullptr, 0, upload.dst, upload.src, upload.bytes,
                                   cudaMemcpyHostToDevice);
  from_.assign(roots, copy);
  if (err == cudaSuccess && roots > 0)
    err = cudaGraphAddDependencies(graph, from_.data(), to_.data(), nullptr, roots);
  return err;
}

void GraphCache::end(cudaStream_t stream, int64_t key, bool run, const GraphUpload& upload) {
  DI_CHECK(recording_, ErrorCode::kInternal, "CUDA graph: end without a recording");
  recording_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!run || ended != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    if (run) check(ended, "CUDA graph: end capture");
    return;
  }
  cudaError_t err = upload.bytes > 0 ? add_upload(graph, upload) : cudaSuccess;
  size_t nodes = 0, host_copies = 0;
  if (err == cudaSuccess) err = cudaGraphGetNodes(graph, nullptr, &nodes);
  uint64_t layout = 0xcbf29ce484222325ull;  // FNV-1a over the node types
  if (err == cudaSuccess) {
    nodes_.resize(nodes);
    err = cudaGraphGetNodes(graph, nodes_.data(), &nodes);
    for (size_t i = 0; err == cudaSuccess && i < nodes; ++i) {
      cudaGraphNodeType type;
      err = cudaGraphNodeGetType(nodes_[i], &type);
      layout = (layout ^ static_cast<uint64_t>(type)) * 0x100000001b3ull;
      if (err == cudaSuccess && type == cudaGraphNodeTypeMemcpy)
        host_copies += copies_from_host(nodes_[i]);
    }
  }
  size_t num_edges = 0, programmatic = 0;
  if (err == cudaSuccess) err = cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &num_edges);
  if (err == cudaSuccess && num_edges > 0) {
    from_.resize(num_edges);
    to_.resize(num_edges);
    edges_.resize(num_edges);
    err = cudaGraphGetEdges(graph, from_.data(), to_.data(), edges_.data(), &num_edges);
    for (size_t i = 0; err == cudaSuccess && i < num_edges; ++i)
      programmatic += edges_[i].type == cudaGraphDependencyTypeProgrammatic;
  }
  layout = (layout ^ programmatic) * 0x100000001b3ull;
  layout = (layout ^ num_edges) * 0x100000001b3ull;  // a side branch's fork and join
  std::deque<Kept>& list = kept_[key];
  cudaGraphExec_t exec = nullptr;
  for (auto it = list.begin(); err == cudaSuccess && it != list.end(); ++it) {
    if (it->layout != layout) continue;
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(it->exec, graph, &info) == cudaSuccess) {
      exec = it->exec;
      ++stats_.updated;
    } else {
      // Refused (a parameter change it cannot make): replaced by a new instantiation.
      cudaGetLastError();
      ++stats_.update_failures;
      stats_.last_update_result = static_cast<int>(info.result);
      stats_.last_refused_node = describe(info.errorNode);
      cudaGraphExecDestroy(it->exec);
    }
    list.erase(it);
    --total_;
    break;
  }
  if (err == cudaSuccess && !exec) {
    // Per-node priorities: a side branch's kernels keep their launch priority in the graph.
    err = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
    if (err == cudaSuccess) ++stats_.instantiated;
  }
  cudaGraphDestroy(graph);
  check(err, "CUDA graph: instantiate");
  list.push_front({layout, exec, ++runs_});
  ++total_;
  if (list.size() > kKeptPerKey) {
    cudaGraphExecDestroy(list.back().exec);
    list.pop_back();
    --total_;
  }
  while (total_ > capacity_) evict_oldest();  // never this one: it ran last
  stats_.kept = static_cast<int64_t>(total_);
  check(cudaGraphLaunch(exec, stream), "CUDA graph: launch");
  ++stats_.launched;
  stats_.nodes = static_cast<int64_t>(nodes);
  stats_.edges = static_cast<int64_t>(num_edges);
  stats_.programmatic_edges = static_cast<int64_t>(programmatic);
  stats_.upload_copies = static_cast<int64_t>(host_copies);
  stats_.packed_bytes = static_cast<int64_t>(upload.bytes);
}

}  // namespace deepinfer::cuda
