// CudaBackend: the Backend subclass (C++20, host code only; kernels are reached through the
// C++17 launchers of kernels.h) and the device context its tensors keep alive.
//
// Ordering model: all device work of a backend runs on its main stream, in call order, except
// inside a side branch (Backend::begin_side .. join_side), whose ops run on a second stream
// that starts behind the main one's work and that the main stream waits for at the join. Freed
// blocks go back to a cache and are handed out again to later calls, which is safe because every
// later use is queued behind every earlier one; blocks freed while a branch is open go back only
// at its join (either stream may still be using them). Downloads are synchronous. The backend is
// meant to be driven by one thread at a time (like the CPU backend).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/arg_checks.h"
#include "backend/backend.h"
#include "backend/cuda/graph_cache.h"
#include "backend/cuda/lt_gemm.h"
#include "backend/cuda/pinned_staging.h"
#include "core/cpu_timer.h"
#include "core/tensor.h"

namespace deepinfer::cuda {

// Throws deepinfer::Error (kInternal, or kOutOfMemory for allocation failures) naming `what`.
void check(cudaError_t err, const char* what);
void check(cublasStatus_t status, const char* what);

// Device, stream, cuBLAS handle, the device error word and a caching allocator, shared by the
// backend and by the owner of every tensor it allocated (so it outlives both).
class DeviceContext {
 public:
  explicit DeviceContext(int device);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return device_; }
  // The stream ops are queued on now: the main one, or the side one inside a side branch.
  cudaStream_t stream() const { return on_side_ ? side_ : stream_; }
  cudaStream_t main_stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  int32_t* error_word() const { return err_; }
  // kDenseSplitCounters ints, zero between the split dense products of the current stream
  // (each stream has its own: two products in flight at once must not share counters).
  int32_t* split_counters() const { return on_side_ ? side_counters_ : split_counters_; }
  int num_sms() const { return num_sms_; }

  // The side branch (Backend::begin_side): fork_side() makes the side stream wait for the main
  // one's work so far and queues ops there; to_main() queues them on the main stream again;
  // join_side() makes the main stream wait for the side one and returns the blocks freed since
  // the fork to the cache.
  void fork_side();
  void to_main();
  void join_side();
  bool side_open() const { return side_open_; }
  bool on_side() const { return on_side_; }
  // Drains both streams.
  void synchronize_all() const;

  // A block of at least `bytes` (never null, 256-byte aligned); returned to the cache when the
  // last copy of the owner goes.
  static std::shared_ptr<void> allocate(const std::shared_ptr<DeviceContext>& self, size_t bytes);
  // Frees every cached block (after the stream has drained).
  void release_cached();
  size_t cached_bytes() const;

 private:
  void give_back(void* ptr, size_t bytes);
  static size_t size_class(size_t bytes);

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  // The side stream, at the device's highest priority: its short kernels take the SMs the main
  // branch's long products free first.
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  bool side_open_ = false, on_side_ = false;
  cublasHandle_t cublas_ = nullptr;
  int32_t* err_ = nullptr;
  int32_t* split_counters_ = nullptr;
  int32_t* side_counters_ = nullptr;
  int num_sms_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // size class -> blocks
  std::vector<std::pair<void*, size_t>> deferred_;       // freed while a side branch is open
  size_t cached_ = 0;
};

// Argument checks shared by the ops (backend/arg_checks.h on device memory); messages name the
// op and the tensor.
using arg_checks::expect_no_alias;
using arg_checks::given;
using arg_checks::kAny;
void expect(const char* op, const char* name, const TensorView& t, DType dtype,
            std::initializer_list<int64_t> shape);
// Like expect() with one of two dtypes (weights: bf16 or f32).
void expect2(const char* op, const char* name, const TensorView& t, DType a, DType b,
             std::initializer_list<int64_t> shape);
void expect_like(const char* op, const char* name, const TensorView& t, const char* ref_name,
                 const TensorView& ref);
// An op's output that may be bf16 (a product's operand, Backend::product_input_dtype) as the
// kernels take it: its fp32 pointer or its bf16 one, the other null.
inline float* f32_out(const TensorView& t) {
  return t.dtype() == DType::kF32 ? t.data_as<float>() : nullptr;
}
inline uint16_t* bf16_out(const TensorView& t) {
  return t.dtype() == DType::kBF16 ? static_cast<uint16_t*>(t.data()) : nullptr;
}
// expect_like, where out may also be bf16.
void expect_out_like(const char* op, const TensorView& out, const char* ref_name,
                     const TensorView& ref);

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;

  Device device() const override { return Device::kCuda; }
  DType weight_dtype() const override { return DType::kBF16; }
  // MXFP4 experts: every moe_experts kernel widens the packed tiles it stages (cuda_moe.cpp).
  bool takes_mxfp4_experts(int64_t E, int64_t I, int64_t D) const override;
  void prepare_mxfp4_experts(const TensorView& data) override;
  // bf16 past the decode-sized rows (kDenseGemmMaxRows), whose tile kernels keep fp32 rows
  // resident, unless DEEPINFER_CUDA_BF16_PRODUCT_INPUTS=0.
  DType product_input_dtype(int64_t rows) const override;

  Tensor empty(std::initializer_list<int64_t> shape, DType dtype = DType::kF32) override;
  void upload(const void* host, const TensorView& dst) override;
  Tensor from_host(const void* host, std::initializer_list<int64_t> shape, DType dtype) override;
  void download(const TensorView& src, void* host) override;
  void release_cached_memory() override;
  void copy(const TensorView& src, const TensorView& dst) override;
  void copy_batch(std::span<const TensorView> src, std::span<const TensorView> dst) override;
  void copy_columns(const TensorView& src, int64_t col0, const TensorView& dst) override;
  void fill_random(const TensorView& t, uint64_t seed, float lo, float hi) override;

  void matmul(const TensorView& x, const TensorView& w, const TensorView& out,
              bool accumulate = false) override;
  void grouped_matmul(const TensorView& x, const TensorView& w, const TensorView& out) override;
  void embedding(const TensorView& ids, const TensorView& table, const TensorView& out) override;
  void add(const TensorView& a, const TensorView& b, const TensorView& out) override;

  void rms_norm(const TensorView& x, const TensorView& weight, float eps,
                const TensorView& out) override;
  void rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
            bool inverse) override;
  void rms_norm_rope(const TensorView& x, const TensorView& weight, float eps,
                     const TensorView& positions, const TensorView& inv_freq,
                     const TensorView& out) override;

  void hc_pre(const TensorView& X, const TensorView& fn, const TensorView& base,
              const TensorView& scale, int sinkhorn_iters, float hc_eps, float norm_eps,
              const TensorView& collapsed, const TensorView& post, const TensorView& comb) override;
  void hc_pre_norm(const TensorView& X, const TensorView& fn, const TensorView& base,
                   const TensorView& scale, int sinkhorn_iters, float hc_eps, float norm_eps,
                   const TensorView& norm_weight, const TensorView& normed, const TensorView& post,
                   const TensorView& comb) override;
  void hc_post(const TensorView& X, const TensorView& y, const TensorView& post,
               const TensorView& comb, const TensorView& out) override;
  void hc_post_pre_norm(const TensorView& X, const TensorView& y, const TensorView& post,
                        const TensorView& comb, const TensorView& out, const TensorView& fn,
                        const TensorView& base, const TensorView& scale, int sinkhorn_iters,
                        float hc_eps, float norm_eps, const TensorView& norm_weight,
                        const TensorView& normed, const TensorView& next_post,
                        const TensorView& next_comb) override;
  void hc_head(const TensorView& X, const TensorView& fn, const TensorView& base,
               const TensorView& scale, float hc_eps, float norm_eps,
               const TensorView& out) override;

  void window_pool(const TensorView& kv, const TensorView& gate, const TensorView& slot_bias,
                   const TensorView& out) override;
  void attention(const TensorView& q, const TensorView& win_kv, int64_t window,
                 const TensorView& comp_kv, const TensorView& comp_idx,
                 const TensorView& comp_visible, const TensorView& sinks, float scale,
                 const TensorView& out) override;
  void attention_batch(const TensorView& q, std::span<const AttentionSegment> segments,
                       int64_t window, const TensorView& sinks, float scale,
                       const TensorView& out) override;
  bool attention_normalises_raw_q(int64_t rows, int64_t heads, int64_t head_dim,
                                  int64_t rope_pairs) const override;
  void attention_batch_raw_q(const TensorView& q_raw, std::span<const AttentionSegment> segments,
                             int64_t window, const TensorView& sinks, float scale, float q_eps,
                             const TensorView& positions, const TensorView& inv_freq,
                             const TensorView& out) override;
  void attention_batch_derotated(const TensorView& q, std::span<const AttentionSegment> segments,
                                 int64_t window, const TensorView& sinks, float scale,
                                 const TensorView& positions, const TensorView& inv_freq,
                                 const TensorView& out) override;
  void indexer_scores(const TensorView& q, const TensorView& k, const TensorView& w, float scale,
                      const TensorView& visible, const TensorView& scores) override;
  void indexer_scores_batch(const TensorView& q, std::span<const IndexerSegment> segments,
                            const TensorView& w, float scale, const TensorView& visible,
                            const TensorView& scores) override;
  void topk(const TensorView& scores, int k, const TensorView& idx) override;

  void route(const TensorView& logits, ScoringFunc func, const TensorView& bias,
             const TensorView& tid2eid, const TensorView& ids, float routed_scale,
             const TensorView& weights, const TensorView& idx) override;
  void swiglu(const TensorView& gate, const TensorView& up, float limit,
              const TensorView& out) override;
  Tensor moe_plan(const TensorView& idx, int64_t num_experts) override;
  void moe_experts(const TensorView& x, const TensorView& idx, const TensorView& weights,
                   const ExpertWeights& experts, float limit, const TensorView& plan,
                   const TensorView& out) override;

  // Waits for all queued work and reports any error a kernel recorded since the last check
  // (out-of-range ids and the like; they are found on the device, so they surface here, at the
  // next download, or after every op with DEEPINFER_CUDA_SYNC=1).
  void synchronize();
  DeviceContext& context() const { return *ctx_; }

  bool begin_graph(int64_t key) override;
  void end_graph(bool run) override;
  // For tests and benchmarks: graph counters, and turning graphs on / off.
  const GraphStats& graph_stats() const { return graphs_.stats(); }
  void set_graphs_enabled(bool on) { graphs_enabled_ = on; }
  void set_graph_capacity(size_t graphs) { graphs_.set_capacity(graphs); }
  // The wgmma kernels: prefill-sized routed experts, indexer_scores (sm_90 only; for tests
  // and benchmarks: DEEPINFER_CUDA_WGMMA sets the default).
  void set_wgmma(bool on) { wgmma_ = on && wgmma_device_; }
  bool wgmma() const { return wgmma_; }
  // The most bytes of fp16 key halves one wgmma indexer_scores_batch launch splits (for tests).
  // Attention calls the wgmma kernel took (run_attention), for tests.
  int64_t wgmma_attention_calls() const { return wgmma_attention_calls_; }
  // hc_pre_norm calls the one-launch kernel took, for tests.
  int64_t fused_hc_pre_norm_calls() const { return fused_hc_pre_norm_calls_; }
  // hc_post_pre_norm calls whose expansion formed the mixing sums itself, for tests.
  int64_t hc_post_mix_calls() const { return hc_post_mix_calls_; }
  // moe_experts calls whose down GEMM combined the experts' outputs itself, for tests, and
  // whether it may (DEEPINFER_CUDA_DOWN_COMBINE).
  int64_t down_combines() const { return down_combines_; }
  void set_down_combine(bool on) { down_combine_ = on; }
  bool down_combine() const { return down_combine_; }
  // The routed experts' up GEMM's cluster size (DEEPINFER_CUDA_EXPERT_CLUSTER): 1, 2 or 4.
  void set_expert_cluster(int64_t blocks);
  int expert_cluster() const { return expert_cluster_; }
  // Whether product_input_dtype may answer bf16 (DEEPINFER_CUDA_BF16_PRODUCT_INPUTS).
  void set_bf16_product_inputs(bool on) { bf16_product_inputs_ = on; }
  bool bf16_product_inputs() const { return bf16_product_inputs_; }
  // Whether hc_post_pre_norm may fold the mixing pass into the expansion
  // (DEEPINFER_CUDA_HC_POST_MIX).
  void set_hc_post_mix(bool on) { hc_post_mix_ = on; }
  bool hc_post_mix() const { return hc_post_mix_; }
  // attention_batch_raw_q calls whose kernel normalised the queries itself, for tests.
  int64_t fused_q_norm_attention_calls() const { return fused_q_norm_attention_calls_; }

  void enter_sync_free(const char* region) override;
  void leave_sync_free() override;

  void begin_side() override;
  void end_side() override;
  void join_side() override;
  // For tests and benchmarks: side branches on / off (DEEPINFER_CUDA_SIDE_STREAM sets the
  // default); off, the branch calls do nothing and every op runs on the main stream.
  void set_side_stream(bool on) { side_stream_ = on; }

 private:
  friend struct OpScope;
  // Raw scratch memory from the cache, released (stream-ordered) when the owner goes.
  std::shared_ptr<void> scratch(size_t bytes);
  // Scratch holding a copy of `bytes` host bytes (in the recording's packet, else queued
  // through the pinned ring).
  std::shared_ptr<void> upload_scratch(const void* host, size_t bytes);
  // While a graph is recorded: a copy of `bytes` host bytes in the recording's packet (a view
  // of packet_dev_ that keeps it alive), or null when not recording or the packet is full.
  std::shared_ptr<void> pack(const void* host, size_t bytes);
  // Queues n host bytes to dst: through the pinned ring (returns at once), or, for more than
  // the ring holds, a pageable copy waited for (a host sync point).
  void upload_bytes(const void* host, void* dst, size_t n);
  // attention and attention_batch (one segment or many); with positions and inv_freq given,
  // attention_batch_derotated (out F32 or BF16).
  void run_attention(const char* op, const TensorView& q,
                     std::span<const AttentionSegment> segments, int64_t window,
                     const TensorView& sinks, float scale, const TensorView& out,
                     const TensorView& positions = TensorView(),
                     const TensorView& inv_freq = TensorView(), const float* q_norm_eps = nullptr);
  // Selects the device; with sync_each_, drains the stream and checks errors after the op.
  void begin_op() const;
  void end_op(const char* op);
  // fp32 [rows, cols] -> bf16 scratch of the same layout.
  std::shared_ptr<void> to_bf16(const char* op, const float* x, int64_t n);
  // out[b][M, N] (ldo) = x[b][M, K] (ldx) @ w[b][N, K]^T (ldw) + beta * out, b < batch, with
  // element strides sx / sw / so between batches. x and w share `dtype` (bf16 or f32).
  void gemm(const char* op, DType dtype, const void* x, int64_t ldx, int64_t sx, const void* w,
            int64_t ldw, int64_t sw, float* out, int64_t ldo, int64_t so, int64_t M, int64_t N,
            int64_t K, int64_t batch, float beta);
  // The same for bf16 x and w of at most kDenseGemmMaxRows rows, on the batch-invariant tiles;
  // false (nothing queued) where their layout conditions do not hold.
  bool tile_gemm(const char* op, const void* x, int64_t ldx, int64_t sx, const void* w, int64_t ldw,
                 int64_t sw, float* out, int64_t ldo, int64_t so, int64_t M, int64_t N, int64_t K,
                 int64_t batch, bool accumulate);
  // The same from fp32 x for the few-row products the tiles take without a cast
  // (dense_gemm_f32_supported).
  bool tile_gemm_f32(const char* op, const float* x, int64_t ldx, int64_t sx, const void* w,
                     int64_t ldw, int64_t sw, float* out, int64_t ldo, int64_t so, int64_t M,
                     int64_t N, int64_t K, int64_t batch, bool accumulate);
  void check_error_word();
  // Called before anything that makes the host wait for the device: throws inside a sync-free
  // region (unless the guard is disabled).
  void host_sync_point(const char* what) const;
  // The two moe_experts strategies (cuda_moe.cpp).
  // moe_plan's work, for E <= kMaxPlanExperts and a non-empty idx (the device counting sort).
  Tensor device_moe_plan(const char* op, const TensorView& idx, int64_t E);
  void moe_experts_on_device(const TensorView& x, const TensorView& idx, const TensorView& weights,
                             const ExpertWeights& experts, float limit, const TensorView& plan,
                             const TensorView& out);
  void moe_experts_host_plan(const TensorView& x, const TensorView& idx, const TensorView& weights,
                             const ExpertWeights& experts, float limit, const TensorView& out);

  std::shared_ptr<DeviceContext> ctx_;
  std::unique_ptr<PinnedStaging> staging_;
  LtGemm lt_;  // bf16 GEMMs
  bool sync_each_ = false;
  bool guard_disabled_ = false;
  const char* sync_free_region_ = nullptr;  // non-null inside a sync-free region
  GraphCache graphs_;
  bool graphs_enabled_ = true;
  bool side_stream_ = true;
  bool wgmma_device_ = false, wgmma_ = false;
  int64_t wgmma_attention_calls_ = 0, fused_hc_pre_norm_calls_ = 0,
          fused_q_norm_attention_calls_ = 0, hc_post_mix_calls_ = 0, down_combines_ = 0;
  bool hc_post_mix_ = true;          // DEEPINFER_CUDA_HC_POST_MIX
  bool down_combine_ = true;         // DEEPINFER_CUDA_DOWN_COMBINE
  int expert_cluster_ = 2;           // DEEPINFER_CUDA_EXPERT_CLUSTER
  bool bf16_product_inputs_ = true;  // DEEPINFER_CUDA_BF16_PRODUCT_INPUTS
  int64_t graph_key_ = 0;
  // The uploads of the graph being recorded (from_host, upload_scratch), packed: the graph
  // copies packet_host_ to packet_dev_ before its first node, one copy instead of one per
  // upload. A recording takes a fresh device buffer while tensors of an earlier one still hold
  // the last (they keep their bytes); otherwise the same one comes back, so the graph's
  // arguments repeat.
  std::shared_ptr<void> packet_dev_;
  std::vector<unsigned char> packet_host_;
  bool packing_ = false;
};

// Marks one op: selects the device on entry and runs end_op() on normal exit.
// Every op's host side runs inside one; with DEEPINFER_CPU_TIMER=1 its host time is a section of
// the op's name (what an op costs to issue, next to the step's issue time).
struct OpScope {
  OpScope(CudaBackend& b, const char* op) : b(b), op(op), timer(op) { b.begin_op(); }
  ~OpScope() noexcept(false) {
    if (std::uncaught_exceptions() == 0) b.end_op(op);
  }
  CudaBackend& b;
  const char* op;
  ScopedCpuTimer timer;
};

}  // namespace deepinfer::cuda
