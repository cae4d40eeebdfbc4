// bf16 GEMMs through cuBLASLt with the plan (descriptors, layouts, chosen algorithm) cached per
// shape: a decode step runs ~100 small GEMMs whose host cost through cublasGemmEx (~15-20 us
// each, heuristics every call) made batch-1 decode launch-bound. Split-K algorithms are passed
// over so that a row's result does not depend on how many rows share the call.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <unordered_map>

namespace deepinfer::cuda {

struct LtGemmShape {
  int64_t M, N, K, ldx, ldw, ldo, sx, sw, so, batch;
  bool accumulate;
  bool bf16_out = false;  // out in bf16 (the fp32 result rounded), else fp32
  bool operator==(const LtGemmShape&) const = default;
};

struct LtGemmShapeHash {
  size_t operator()(const LtGemmShape& s) const;
};

class LtGemm {
 public:
  LtGemm() = default;
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // out[b][M, N] (ldo) = x[b][M, K] (ldx) @ w[b][N, K]^T (ldw) (+ out when accumulate), bf16
  // inputs, fp32 accumulation and output (bf16 where shape.bf16_out: with the algorithm of the
  // fp32 output where cuBLASLt takes it, so the same products rounded); element strides sx / sw /
  // so between batches. Throws deepinfer::Error naming `op` on failure. `workspace`
  // (< kWorkspaces) picks the scratch the call may use: calls that can run at once (on two
  // streams) take different ones.
  static constexpr int kWorkspaces = 2;
  void run(const char* op, const void* x, const void* w, void* out, const LtGemmShape& shape,
           cudaStream_t stream, int workspace = 0);
  size_t cached_plans() const { return plans_.size(); }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Plan make_plan(const char* op, const LtGemmShape& s);
  const Plan& plan(const char* op, const LtGemmShape& s);
  static void destroy(Plan& p);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_[kWorkspaces] = {};
  std::unordered_map<LtGemmShape, Plan, LtGemmShapeHash> plans_;
};

}  // namespace deepinfer::cuda
