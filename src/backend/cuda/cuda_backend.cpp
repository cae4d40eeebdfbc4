// CudaBackend construction, the device context (stream, cuBLAS, error word, caching allocator),
// the memory ops and the argument checks shared by every op.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/kernels.h"
#include "core/cpu_timer.h"
#include "core/env.h"
#include "core/status.h"

namespace deepinfer {

namespace cuda {

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  const ErrorCode code =
      err == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal;
  fail(code, "{}: CUDA error {} ({})", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

void check(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail(status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
       "{}: cuBLAS error {} ({})", what, cublasGetStatusName(status),
       cublasGetStatusString(status));
}

// ---- device context ----------------------------------------------------------------------------

DeviceContext::DeviceContext(int device) : device_(device) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail(ErrorCode::kUnsupported, "CUDA backend: no usable CUDA driver/device ({})",
         cudaGetErrorString(e));
  }
  DI_CHECK(device >= 0 && device < n, ErrorCode::kInvalidArgument,
           "CUDA backend: device {} does not exist ({} device(s) found)", device, n);
  check(cudaSetDevice(device), "CUDA backend: cudaSetDevice");
  check(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device),
        "CUDA backend: SM count");
  int least = 0, greatest = 0;
  check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "CUDA backend: stream priorities");
  check(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, least),
        "CUDA backend: stream");
  check(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, greatest),
        "CUDA backend: side stream");
  check(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "CUDA backend: fork event");
  check(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming), "CUDA backend: join event");
  check(cublasCreate(&cublas_), "CUDA backend: cublasCreate");
  check(cublasSetStream(cublas_, stream_), "CUDA backend: cublasSetStream");
  // fp32 GEMMs stay true fp32 (no TF32): the f32-weight path is the accuracy reference.
  check(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "CUDA backend: cublasSetMathMode");
  check(cudaMalloc(&err_, sizeof(int32_t)), "CUDA backend: error word");
  check(cudaMemsetAsync(err_, 0, sizeof(int32_t), stream_), "CUDA backend: error word");
  check(cudaMalloc(&split_counters_, kDenseSplitCounters * sizeof(int32_t)),
        "CUDA backend: split counters");
  check(cudaMemsetAsync(split_counters_, 0, kDenseSplitCounters * sizeof(int32_t), stream_),
        "CUDA backend: split counters");
  check(cudaMalloc(&side_counters_, kDenseSplitCounters * sizeof(int32_t)),
        "CUDA backend: split counters");
  check(cudaMemsetAsync(side_counters_, 0, kDenseSplitCounters * sizeof(int32_t), stream_),
        "CUDA backend: split counters");
  check(cudaStreamSynchronize(stream_), "CUDA backend: init");
}

DeviceContext::~DeviceContext() {
  // Errors are ignored here: at process exit the runtime may already be unloading.
  cudaSetDevice(device_);
  synchronize_all();
  if (side_open_) join_side();
  release_cached();
  if (err_) cudaFree(err_);
  if (split_counters_) cudaFree(split_counters_);
  if (side_counters_) cudaFree(side_counters_);
  if (cublas_) cublasDestroy(cublas_);
  if (fork_) cudaEventDestroy(fork_);
  if (join_) cudaEventDestroy(join_);
  if (side_) cudaStreamDestroy(side_);
  if (stream_) cudaStreamDestroy(stream_);
  cudaGetLastError();
}

void DeviceContext::synchronize_all() const {
  if (stream_) cudaStreamSynchronize(stream_);
  if (side_) cudaStreamSynchronize(side_);
}

void DeviceContext::fork_side() {
  DI_CHECK(!side_open_, ErrorCode::kInternal, "CUDA backend: a side branch is already open");
  // In a recording the event wait adds to the side stream's dependencies, which still hold the
  // last branch's tail: a step's side branches form one chain. Cut to the fork's node alone
  // (cudaStreamUpdateCaptureDependencies), the trace showed each branch on a stream of its own
  // and a batch-1 step measured 2.674 -> 2.742 ms.
  check(cudaEventRecord(fork_, stream_), "CUDA backend: fork");
  check(cudaStreamWaitEvent(side_, fork_, 0), "CUDA backend: fork");
  {
    std::lock_guard<std::mutex> lock(mu_);
    side_open_ = true;
  }
  on_side_ = true;
  check(cublasSetStream(cublas_, side_), "CUDA backend: cublasSetStream");
}

void DeviceContext::to_main() {
  on_side_ = false;
  check(cublasSetStream(cublas_, stream_), "CUDA backend: cublasSetStream");
}

void DeviceContext::join_side() {
  if (!side_open_) return;
  to_main();
  const cudaError_t rec = cudaEventRecord(join_, side_);
  const cudaError_t wait = rec == cudaSuccess ? cudaStreamWaitEvent(stream_, join_, 0) : rec;
  {
    std::lock_guard<std::mutex> lock(mu_);
    side_open_ = false;
    for (auto [ptr, bytes] : deferred_) {
      free_[bytes].push_back(ptr);
      cached_ += bytes;
    }
    deferred_.clear();
  }
  check(wait, "CUDA backend: join");
}

size_t DeviceContext::size_class(size_t bytes) {
  // 256-byte granules up to 4 KiB, then 4 classes per power of two (at most 25% slack), so
  // that recurring shapes hit the cache exactly.
  if (bytes <= 4096) return std::max<size_t>(256, (bytes + 255) / 256 * 256);
  size_t p = 1;
  while (p * 2 <= bytes) p *= 2;
  const size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<void> DeviceContext::allocate(const std::shared_ptr<DeviceContext>& self,
                                              size_t bytes) {
  const size_t size = size_class(bytes);
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    auto it = self->free_.find(size);
    if (it != self->free_.end() && !it->second.empty()) {
      ptr = it->second.back();
      it->second.pop_back();
      self->cached_ -= size;
    }
  }
  if (!ptr) {
    // A section of its own under DEEPINFER_CPU_TIMER: a step that allocates past the cache
    // pays cudaMalloc's host time (and, out of memory, a device sync in release_cached).
    const ScopedCpuTimer timer("allocator: cudaMalloc (cache miss)");
    cudaError_t e = cudaMalloc(&ptr, size);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      self->release_cached();
      e = cudaMalloc(&ptr, size);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      fail(e == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
           "CUDA backend: allocating {} bytes failed: {} ({} of {} bytes free)", bytes,
           cudaGetErrorString(e), free_b, total_b);
    }
  }
  return std::shared_ptr<void>(ptr, [self, size](void* p) { self->give_back(p, size); });
}

void DeviceContext::give_back(void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (side_open_) {  // the other stream may still read or write it
    deferred_.emplace_back(ptr, bytes);
    return;
  }
  free_[bytes].push_back(ptr);
  cached_ += bytes;
}

void DeviceContext::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_ == 0) return;
  const ScopedCpuTimer timer("allocator: release cached blocks (device sync)");
  synchronize_all();
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) cudaFree(p);
  free_.clear();
  cached_ = 0;
}

size_t DeviceContext::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

// ---- argument checks ---------------------------------------------------------------------------

void expect(const char* op, const char* name, const TensorView& t, DType dtype,
            std::initializer_list<int64_t> shape) {
  arg_checks::expect(op, name, t, Device::kCuda, dtype, dtype, shape);
}

void expect2(const char* op, const char* name, const TensorView& t, DType a, DType b,
             std::initializer_list<int64_t> shape) {
  arg_checks::expect(op, name, t, Device::kCuda, a, b, shape);
}

void expect_like(const char* op, const char* name, const TensorView& t, const char* ref_name,
                 const TensorView& ref) {
  arg_checks::expect_like(op, name, t, ref_name, ref, Device::kCuda);
}

void expect_out_like(const char* op, const TensorView& out, const char* ref_name,
                     const TensorView& ref) {
  arg_checks::expect_shape_of(op, "out", out,
                              out.dtype() == DType::kBF16 ? DType::kBF16 : ref.dtype(), ref_name,
                              ref, Device::kCuda);
}

// ---- backend: lifecycle, errors, memory --------------------------------------------------------

void CudaBackend::set_expert_cluster(int64_t blocks) {
  DI_CHECK(blocks == 1 || blocks == 2 || blocks == 4, ErrorCode::kInvalidArgument,
           "DEEPINFER_CUDA_EXPERT_CLUSTER: {} blocks; the expert cluster size must be 1, 2 or 4",
           blocks);
  expert_cluster_ = static_cast<int>(blocks);
}

DType CudaBackend::product_input_dtype(int64_t rows) const {
  return bf16_product_inputs_ && rows > kDenseGemmMaxRows ? DType::kBF16 : DType::kF32;
}

// Uploads up to this size go through the pinned ring (asynchronous); larger ones (weights at
// load time) copy synchronously from pageable memory.
constexpr size_t kStagingBytes = size_t{64} << 20;

CudaBackend::CudaBackend(int device)
    : ctx_(std::make_shared<DeviceContext>(device)),
      staging_(std::make_unique<PinnedStaging>(kStagingBytes)) {
  sync_each_ = env::get_bool("DEEPINFER_CUDA_SYNC");
  guard_disabled_ = env::get_bool("DEEPINFER_DISABLE_SYNC_GUARD") || sync_each_;
  graphs_enabled_ = env::get_bool("DEEPINFER_CUDA_GRAPHS");
  set_dense_split_target(env::get_int("DEEPINFER_DENSE_SPLIT_TARGET"));
  set_programmatic_launch(env::get_bool("DEEPINFER_CUDA_PDL"));
  set_cluster_reductions(env::get_bool("DEEPINFER_CUDA_CLUSTER_SPLIT"));
  set_dense_resident_a(env::get_int("DEEPINFER_DENSE_RESIDENT_A"));
  set_attention_pair_blocks(env::get_int("DEEPINFER_ATTENTION_PAIR_BLOCKS"));
  set_attention_split_keys(env::get_int("DEEPINFER_ATTENTION_SPLIT_KEYS"));
  set_attention_fp16_qp(env::get_bool("DEEPINFER_CUDA_ATTENTION_FP16_QP"));
  set_attention_onepass(env::get_bool("DEEPINFER_CUDA_ATTENTION_ONEPASS"));
  set_indexer_fp16_q(env::get_bool("DEEPINFER_CUDA_INDEXER_FP16_Q"));
  set_indexer_fp16_k(env::get_bool("DEEPINFER_CUDA_INDEXER_FP16_K"));
  side_stream_ = env::get_bool("DEEPINFER_CUDA_SIDE_STREAM");
  hc_post_mix_ = env::get_bool("DEEPINFER_CUDA_HC_POST_MIX");
  down_combine_ = env::get_bool("DEEPINFER_CUDA_DOWN_COMBINE");
  set_expert_cluster(env::get_int("DEEPINFER_CUDA_EXPERT_CLUSTER"));
  bf16_product_inputs_ = env::get_bool("DEEPINFER_CUDA_BF16_PRODUCT_INPUTS");
  int major = 0, minor = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx_->device()),
        "CUDA backend: compute capability");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ctx_->device()),
        "CUDA backend: compute capability");
  wgmma_device_ = wgmma_available(major, minor);
  set_wgmma(env::get_bool("DEEPINFER_CUDA_WGMMA"));
}

// The most bytes one recording's uploads pack into its single copy (a decode step of 256
// sequences uploads a few hundred KB); past it they are copied one by one. The copy is rounded
// up to kPacketGrain so that steps of one layout keep its size.
constexpr size_t kPacketBytes = size_t{4} << 20, kPacketGrain = 4096, kPacketAlign = 256;

bool CudaBackend::begin_graph(int64_t key) {
  // A recording must not contain a host wait: only where the guard turns one into an error.
  if (!graphs_enabled_ || guard_disabled_) return false;
  DI_CHECK(sync_free_region_ != nullptr, ErrorCode::kInternal,
           "begin_graph outside a sync-free region");
  DI_CHECK(!ctx_->side_open(), ErrorCode::kInternal, "begin_graph inside a side branch");
  begin_op();
  if (!packet_dev_ || packet_dev_.use_count() > 1) packet_dev_ = scratch(kPacketBytes);
  graphs_.begin(ctx_->main_stream());
  staging_->set_recording(true);
  packet_host_.clear();
  packing_ = true;
  graph_key_ = key;
  return true;
}

void CudaBackend::end_graph(bool run) {
  packing_ = false;
  staging_->set_recording(false);
  ctx_->join_side();  // (unwinding out of a branch) a capture must end with its branches joined
  try {
    GraphUpload upload;
    if (run && !packet_host_.empty()) {
      upload.bytes = std::min(
          kPacketBytes, (packet_host_.size() + kPacketGrain - 1) / kPacketGrain * kPacketGrain);
      packet_host_.resize(upload.bytes);
      upload.dst = packet_dev_.get();
      upload.src = staging_->stage(packet_host_.data(), upload.bytes, [this] {
        host_sync_point("graph upload (waiting for the pinned ring)");
      });
    }
    graphs_.end(ctx_->main_stream(), graph_key_, run, upload);
  } catch (...) {
    if (graphs_.recording()) graphs_.end(ctx_->main_stream(), graph_key_, false);
    staging_->seal(ctx_->main_stream());
    throw;
  }
  staging_->seal(ctx_->main_stream());
}

void CudaBackend::begin_side() {
  if (!side_stream_) return;
  begin_op();
  ctx_->fork_side();
  set_launch_priority(true);
}

void CudaBackend::end_side() {
  if (!ctx_->on_side()) return;
  ctx_->to_main();
  set_launch_priority(false);
}

void CudaBackend::join_side() {
  if (!ctx_->side_open()) return;
  set_launch_priority(false);
  ctx_->join_side();
}

std::shared_ptr<void> CudaBackend::pack(const void* host, size_t bytes) {
  const size_t offset = packet_host_.size();
  const size_t padded = (bytes + kPacketAlign - 1) / kPacketAlign * kPacketAlign;
  if (!packing_ || bytes == 0 || offset + padded > kPacketBytes) return nullptr;
  packet_host_.resize(offset + padded);
  std::memcpy(packet_host_.data() + offset, host, bytes);
  return std::shared_ptr<void>(packet_dev_, static_cast<char*>(packet_dev_.get()) + offset);
}

CudaBackend::~CudaBackend() = default;

void CudaBackend::enter_sync_free(const char* region) {
  DI_CHECK(sync_free_region_ == nullptr, ErrorCode::kInternal,
           "sync-free region '{}' opened inside '{}'", region, sync_free_region_);
  sync_free_region_ = region ? region : "a sync-free region";
}

void CudaBackend::leave_sync_free() {
  sync_free_region_ = nullptr;
}

void CudaBackend::host_sync_point(const char* what) const {
  if (sync_free_region_ == nullptr || guard_disabled_) return;
  fail(ErrorCode::kInternal,
       "{} makes the host wait for the GPU inside {} (sync guard; set "
       "DEEPINFER_DISABLE_SYNC_GUARD=1 to allow it while debugging)",
       what, sync_free_region_);
}

void CudaBackend::begin_op() const {
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != ctx_->device())
    check(cudaSetDevice(ctx_->device()), "CUDA backend: cudaSetDevice");
}

void CudaBackend::end_op(const char* op) {
  if (!sync_each_) return;
  check(cudaStreamSynchronize(ctx_->stream()), op);
  check_error_word();
}

namespace {

const char* error_word_message(int32_t code) {
  switch (code) {
    case kErrEmbeddingId:
      return "embedding: an id is outside the table";
    case kErrAttentionIdx:
      return "attention: a comp_idx entry is outside comp_kv";
    case kErrAttentionVis:
      return "attention: a comp_visible value is outside [0, E]";
    case kErrIndexerVisible:
      return "indexer_scores: a visible value is outside [0, E]";
    case kErrRouteId:
      return "route: an id is outside tid2eid";
    case kErrMoeExpert:
      return "moe_experts: an idx entry is not one of the experts";
    case kErrRouteExpert:
      return "route: a tid2eid entry is not one of the experts";
    default:
      return "a kernel reported an unknown error";
  }
}

}  // namespace

void CudaBackend::check_error_word() {
  int32_t code = 0;
  check(cudaMemcpyAsync(&code, ctx_->error_word(), sizeof code, cudaMemcpyDeviceToHost,
                        ctx_->main_stream()),
        "CUDA backend: reading the error word");
  check(cudaStreamSynchronize(ctx_->main_stream()), "CUDA backend: synchronize");
  if (ctx_->side_open()) check(cudaDeviceSynchronize(), "CUDA backend: synchronize");
  if (code == kErrNone) return;
  check(cudaMemsetAsync(ctx_->error_word(), 0, sizeof code, ctx_->main_stream()),
        "CUDA backend: clearing the error word");
  fail(ErrorCode::kInvalidArgument, "{} (found on the device; reported at the next sync)",
       error_word_message(code));
}

void CudaBackend::synchronize() {
  host_sync_point("synchronize");
  begin_op();
  check(cudaStreamSynchronize(ctx_->main_stream()), "CUDA backend: synchronize");
  check_error_word();
}

std::shared_ptr<void> CudaBackend::scratch(size_t bytes) {
  return DeviceContext::allocate(ctx_, bytes);
}

void CudaBackend::release_cached_memory() {
  OpScope s(*this, "release_cached_memory");
  host_sync_point("release_cached_memory");
  ctx_->release_cached();
}

std::shared_ptr<void> CudaBackend::upload_scratch(const void* host, size_t bytes) {
  if (std::shared_ptr<void> packed = pack(host, bytes)) return packed;
  std::shared_ptr<void> dev = scratch(bytes);
  if (bytes > 0) upload_bytes(host, dev.get(), bytes);
  return dev;
}

void CudaBackend::upload_bytes(const void* host, void* dst, size_t n) {
  if (n <= staging_->capacity()) {
    staging_->upload(host, dst, n, ctx_->stream(),
                     [this] { host_sync_point("upload (waiting for the pinned ring)"); });
    return;
  }
  host_sync_point("upload of a large pageable buffer");
  check(cudaMemcpyAsync(dst, host, n, cudaMemcpyHostToDevice, ctx_->stream()), "upload");
  check(cudaStreamSynchronize(ctx_->stream()), "upload");
}

Tensor CudaBackend::empty(std::initializer_list<int64_t> shape, DType dtype) {
  OpScope s(*this, "empty");
  const TensorView probe(nullptr, dtype, shape, Device::kCuda);
  std::shared_ptr<void> block = scratch(probe.nbytes());
  void* data = block.get();
  return Tensor::from_storage(std::move(block), data, dtype, shape.begin(),
                              static_cast<int>(shape.size()), Device::kCuda);
}

void CudaBackend::upload(const void* host, const TensorView& dst) {
  OpScope s(*this, "upload");
  DI_CHECK(dst.device() == Device::kCuda && dst.is_contiguous(), ErrorCode::kInvalidArgument,
           "upload: dst {} must be a contiguous device tensor", dst.shape_str());
  if (dst.nbytes() == 0) return;
  DI_CHECK(host != nullptr && dst.data() != nullptr, ErrorCode::kInvalidArgument,
           "upload: null pointer for {} bytes", dst.nbytes());
  upload_bytes(host, dst.data(), dst.nbytes());
}

Tensor CudaBackend::from_host(const void* host, std::initializer_list<int64_t> shape, DType dtype) {
  OpScope s(*this, "from_host");
  const TensorView probe(nullptr, dtype, shape, Device::kCuda);
  const size_t n = probe.nbytes();
  DI_CHECK(host != nullptr || n == 0, ErrorCode::kInvalidArgument,
           "from_host: null pointer for {} bytes", n);
  std::shared_ptr<void> block = upload_scratch(host, n);
  void* data = block.get();
  return Tensor::from_storage(std::move(block), data, dtype, shape.begin(),
                              static_cast<int>(shape.size()), Device::kCuda);
}

void CudaBackend::download(const TensorView& src, void* host) {
  OpScope s(*this, "download");
  host_sync_point("download");
  DI_CHECK(src.device() == Device::kCuda && src.is_contiguous(), ErrorCode::kInvalidArgument,
           "download: src {} must be a contiguous device tensor", src.shape_str());
  if (src.nbytes() > 0) {
    DI_CHECK(host != nullptr && src.data() != nullptr, ErrorCode::kInvalidArgument,
             "download: null pointer for {} bytes", src.nbytes());
    check(cudaMemcpyAsync(host, src.data(), src.nbytes(), cudaMemcpyDeviceToHost, ctx_->stream()),
          "download");
  }
  check_error_word();  // synchronises
}

void CudaBackend::copy(const TensorView& src, const TensorView& dst) {
  OpScope s(*this, "copy");
  DI_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(), ErrorCode::kInvalidArgument,
           "copy: src {} {} and dst {} {} differ in dtype or element count",
           dtype_name(src.dtype()), src.shape_str(), dtype_name(dst.dtype()), dst.shape_str());
  DI_CHECK(src.device() == Device::kCuda && dst.device() == Device::kCuda && src.is_contiguous() &&
               dst.is_contiguous(),
           ErrorCode::kInvalidArgument, "copy: src {} and dst {} must be contiguous device tensors",
           src.shape_str(), dst.shape_str());
  const size_t n = src.nbytes();
  if (n == 0 || src.data() == dst.data()) return;
  const auto* s0 = static_cast<const char*>(src.data());
  const auto* d0 = static_cast<const char*>(dst.data());
  if (s0 < d0 + n && d0 < s0 + n) {
    // Overlapping ranges (memmove semantics): go through a scratch block.
    std::shared_ptr<void> tmp = scratch(n);
    check(cudaMemcpyAsync(tmp.get(), src.data(), n, cudaMemcpyDeviceToDevice, ctx_->stream()),
          "copy");
    check(cudaMemcpyAsync(dst.data(), tmp.get(), n, cudaMemcpyDeviceToDevice, ctx_->stream()),
          "copy");
    return;
  }
  check(cudaMemcpyAsync(dst.data(), src.data(), n, cudaMemcpyDeviceToDevice, ctx_->stream()),
        "copy");
}

void CudaBackend::copy_batch(std::span<const TensorView> src, std::span<const TensorView> dst) {
  const char* op = "copy_batch";
  OpScope s(*this, op);
  arg_checks::expect_copy_batch(op, src, dst, Device::kCuda);
  std::vector<CopyDesc> descs;
  descs.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i)
    if (src[i].nbytes() > 0 && src[i].data() != dst[i].data())
      descs.push_back({src[i].data(), dst[i].data(), static_cast<int64_t>(src[i].nbytes())});
  if (descs.empty()) return;
  const std::shared_ptr<void> dev = upload_scratch(descs.data(), descs.size() * sizeof(CopyDesc));
  check(launch_copy_batch(static_cast<const CopyDesc*>(dev.get()),
                          static_cast<int64_t>(descs.size()), ctx_->stream()),
        op);
}

void CudaBackend::copy_columns(const TensorView& src, int64_t col0, const TensorView& dst) {
  const char* op = "copy_columns";
  OpScope s(*this, op);
  arg_checks::expect_copy_columns(op, src, col0, dst, Device::kCuda);
  const size_t es = dtype_size_bits(src.dtype()) / 8;
  const int64_t M = src.dim(0), N = src.dim(1), w = dst.dim(1);
  if (M == 0 || w == 0) return;
  check(launch_copy_rows(static_cast<const char*>(src.data()) + col0 * es, N * es, dst.data(), M,
                         w * es, ctx_->stream()),
        op);
}

}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(int device) {
  return std::make_unique<cuda::CudaBackend>(device);
}

cudaStream_t cuda_stream(Backend& backend) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
  return cuda ? cuda->context().main_stream() : nullptr;
}

void set_cuda_side_stream(Backend& backend, bool on) {
  if (auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend)) cuda->set_side_stream(on);
}

const cuda::GraphStats* cuda_graph_stats(Backend& backend) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
  return cuda ? &cuda->graph_stats() : nullptr;
}

void set_cuda_graphs(Backend& backend, bool on) {
  if (auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend)) cuda->set_graphs_enabled(on);
}

void set_cuda_graph_capacity(Backend& backend, size_t graphs) {
  if (auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend)) cuda->set_graph_capacity(graphs);
}

int64_t cuda_wgmma_attention_calls(const Backend& backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
  return cuda ? cuda->wgmma_attention_calls() : 0;
}

int64_t cuda_fused_q_norm_attention_calls(const Backend& backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
  return cuda ? cuda->fused_q_norm_attention_calls() : 0;
}

int64_t cuda_hc_post_mix_calls(const Backend& backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
  return cuda ? cuda->hc_post_mix_calls() : 0;
}

bool set_cuda_hc_post_mix(Backend& backend, bool on) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
  if (!cuda) return false;
  const bool was = cuda->hc_post_mix();
  cuda->set_hc_post_mix(on);
  return was;
}

int64_t cuda_down_combines(const Backend& backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
  return cuda ? cuda->down_combines() : 0;
}

bool set_cuda_down_combine(Backend& backend, bool on) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
  if (!cuda) return false;
  const bool was = cuda->down_combine();
  cuda->set_down_combine(on);
  return was;
}

int64_t cuda_fused_hc_pre_norm_calls(const Backend& backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
  return cuda ? cuda->fused_hc_pre_norm_calls() : 0;
}

bool set_cuda_bf16_product_inputs(Backend& backend, bool on) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
  if (!cuda) return false;
  const bool was = cuda->bf16_product_inputs();
  cuda->set_bf16_product_inputs(on);
  return was;
}

int set_cuda_expert_cluster(Backend& backend, int blocks) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
  if (!cuda) return 0;
  const int was = cuda->expert_cluster();
  cuda->set_expert_cluster(blocks);
  return was;
}

bool set_cuda_wgmma(Backend& backend, bool on) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
  if (!cuda) return false;
  cuda->set_wgmma(on);
  return cuda->wgmma();
}

}  // namespace deepinfer
