#include "backend/cuda/lt_gemm.h"

#include <functional>

#include "backend/cuda/cuda_backend_impl.h"

namespace deepinfer::cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr size_t kMaxPlans = 4096;  // distinct shapes kept (M varies with batch and chunk)
constexpr int kCandidates = 8;

}  // namespace

size_t LtGemmShapeHash::operator()(const LtGemmShape& s) const {
  size_t h = std::hash<bool>()(s.accumulate) * 2 + s.bf16_out;
  for (int64_t v : {s.M, s.N, s.K, s.ldx, s.ldw, s.ldo, s.sx, s.sw, s.so, s.batch})
    h = h * 1000003u ^ std::hash<int64_t>()(v);
  return h;
}

LtGemm::~LtGemm() {
  for (auto& [shape, plan] : plans_) destroy(plan);
  for (void* w : workspace_)
    if (w) cudaFree(w);
  if (handle_) cublasLtDestroy(handle_);
}

void LtGemm::destroy(Plan& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  p = Plan{};
}

LtGemm::Plan LtGemm::make_plan(const char* op, const LtGemmShape& s) {
  if (!handle_) {
    check(cublasLtCreate(&handle_), op);
  }
  Plan p;
  try {
    // Row-major out[M, N] = x[M, K] w[N, K]^T is column-major out^T[N, M] = w^T x^T with
    // A = w (K x N, ld ldw, transposed) and B = x (K x M, ld ldx).
    check(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), op);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), op);
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), op);
    check(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, s.K, s.N, s.ldw), op);
    check(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, s.K, s.M, s.ldx), op);
    check(cublasLtMatrixLayoutCreate(&p.c, s.bf16_out ? CUDA_R_16BF : CUDA_R_32F, s.N, s.M, s.ldo),
          op);
    if (s.batch > 1) {
      const int32_t count = static_cast<int32_t>(s.batch);
      const std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {
          {p.a, s.sw}, {p.b, s.sx}, {p.c, s.so}};
      for (const auto& [layout, stride] : layouts) {
        check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                               sizeof count),
              op);
        check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &stride, sizeof stride),
              op);
      }
    }
    if (s.bf16_out) {
      // The fp32 output's algorithm where it writes bf16 too: the same accumulation, rounded.
      LtGemmShape f32 = s;
      f32.bf16_out = false;
      const cublasLtMatmulAlgo_t algo = plan(op, f32).algo;
      cublasLtMatmulHeuristicResult_t check_result = {};
      if (cublasLtMatmulAlgoCheck(handle_, p.desc, p.a, p.b, p.c, p.c, &algo, &check_result) ==
              CUBLAS_STATUS_SUCCESS &&
          check_result.workspaceSize <= kWorkspaceBytes) {
        p.algo = algo;
        return p;
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), op);
    const size_t ws = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, kCandidates,
                                          results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check(st, op);
    DI_CHECK(found > 0, ErrorCode::kUnsupported,
             "{}: cuBLASLt has no algorithm for {} x {} x {} (batch {})", op, s.M, s.N, s.K,
             s.batch);
    // The first candidate that reduces K in one pass (no split-K).
    int pick = 0;
    for (int i = 0; i < found; ++i) {
      int32_t splits = 1;
      size_t written = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                           &splits, sizeof splits, &written);
      if (splits <= 1) {
        pick = i;
        break;
      }
    }
    p.algo = results[pick].algo;
  } catch (...) {
    destroy(p);
    throw;
  }
  return p;
}

const LtGemm::Plan& LtGemm::plan(const char* op, const LtGemmShape& s) {
  auto it = plans_.find(s);
  if (it != plans_.end()) return it->second;
  if (plans_.size() >= kMaxPlans) {
    for (auto& [shape, plan] : plans_) destroy(plan);
    plans_.clear();
  }
  Plan p = make_plan(op, s);  // may add the fp32 output's plan first
  return plans_.emplace(s, p).first->second;
}

void LtGemm::run(const char* op, const void* x, const void* w, void* out, const LtGemmShape& s,
                 cudaStream_t stream, int workspace) {
  DI_CHECK(workspace >= 0 && workspace < kWorkspaces, ErrorCode::kInternal,
           "{}: no cuBLASLt workspace {}", op, workspace);
  const Plan& p = plan(op, s);
  if (!workspace_[workspace]) check(cudaMalloc(&workspace_[workspace], kWorkspaceBytes), op);
  const float alpha = 1.f, beta = s.accumulate ? 1.f : 0.f;
  check(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, out, p.c, out, p.c, &p.algo,
                       workspace_[workspace], kWorkspaceBytes, stream),
        op);
}

}  // namespace deepinfer::cuda
