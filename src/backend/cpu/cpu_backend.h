// The CPU backend: every op of backend.h in fp32 on the host, multithreaded over rows / heads /
// experts with the global ThreadPool. GEMMs go through OpenBLAS, which is pinned to one thread
// so that all parallelism comes from the pool (no oversubscription, results independent of
// thread timing).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "backend/arg_checks.h"
#include "backend/backend.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace deepinfer {

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  Device device() const override { return Device::kCpu; }
  // MXFP4 experts: each task widens the rows it multiplies (cpu_moe.cpp).
  bool takes_mxfp4_experts(int64_t E, int64_t I, int64_t D) const override {
    return E > 0 && I % 32 == 0 && D % 32 == 0;
  }

  Tensor empty(std::initializer_list<int64_t> shape, DType dtype = DType::kF32) override;
  void upload(const void* host, const TensorView& dst) override;
  void download(const TensorView& src, void* host) override;
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

  void hc_pre(const TensorView& X, const TensorView& fn, const TensorView& base,
              const TensorView& scale, int sinkhorn_iters, float hc_eps, float norm_eps,
              const TensorView& collapsed, const TensorView& post, const TensorView& comb) override;
  void hc_post(const TensorView& X, const TensorView& y, const TensorView& post,
               const TensorView& comb, const TensorView& out) override;
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
  void moe_experts(const TensorView& x, const TensorView& idx, const TensorView& weights,
                   const ExpertWeights& experts, float limit, const TensorView& plan,
                   const TensorView& out) override;
};

// Helpers shared by the cpu_*.cpp files.
namespace cpu {

using arg_checks::expect_no_alias;
using arg_checks::given;
using arg_checks::kAny;

// Throws kInvalidArgument naming the op and the tensor unless t is a non-empty contiguous host
// tensor of the given dtype and shape (kAny matches any extent).
void expect(const char* op, const char* name, const TensorView& t, DType dtype,
            std::initializer_list<int64_t> shape);
// Like expect(), with the shape (and dtype) of ref.
void expect_like(const char* op, const char* name, const TensorView& t, const char* ref_name,
                 const TensorView& ref);

inline ThreadPool& pool() {
  return ThreadPool::global();
}

// C[M, N] = A[M, K] @ B[N, K]^T + beta * C, row-major with leading dimensions; OpenBLAS single
// threaded in the calling thread.
void sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
              int64_t ldb, float* C, int64_t ldc, float beta);
// C[M, N] = A[M, K] @ B[K, N] + beta * C (B not transposed).
void sgemm_nn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
              int64_t ldb, float* C, int64_t ldc, float beta);
// Like sgemm_nt, but split over the pool (along N, or along M when N is narrow).
void parallel_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                       int64_t ldb, float* C, int64_t ldc, float beta);

// Sum of squares and dot product with several independent float lanes: vectorisable without
// -ffast-math and more accurate than one running sum.
float sum_squares(const float* x, int64_t n);
float dot(const float* a, const float* b, int64_t n);

// Indices of the k largest of v[0, n) in descending order, ties to the lower index, NaN ranked
// below everything. scratch is resized as needed.
void topk_row(const float* v, int64_t n, int k, int32_t* out, std::vector<int32_t>& scratch);

}  // namespace cpu
}  // namespace deepinfer
