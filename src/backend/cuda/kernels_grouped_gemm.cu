// The routed experts' grouped GEMMs on the mma.sync tiles (grouped_gemm.cuh), without the host:
// the row ranges of the experts come from the device-side plan (launch_moe_plan) as a table of
// row tiles; the grid is sized for the most tiles R rows can make and surplus blocks exit. On
// sm_90, prefill-sized expert batches go to kernels_expert_wgmma.cu instead (same arithmetic per
// output).
#include "backend/cuda/grouped_gemm.cuh"

namespace deepinfer::cuda {

using namespace gemm_tiles;

namespace {

template <Mode kMode, bool kFp4 = false>
cudaError_t launch_shape(const GroupedArgs& a, int64_t max_tiles, int tile_rows,
                         cudaStream_t stream) {
  if (tile_rows == Wide::BM) return launch_grouped<kMode, Wide, kFp4>(a, max_tiles, 1, stream);
  if (tile_rows == Narrow::BM) return launch_grouped<kMode, Narrow, kFp4>(a, max_tiles, 1, stream);
  return cudaErrorInvalidValue;
}

// Adds the combine to the down GEMM's arguments where one is asked for; false where it cannot
// run.
bool add_combine(GroupedArgs& a, int tile_rows, const MoeDownCombine* combine) {
  if (!combine) return true;
  if (!moe_down_combines(combine->M, a.N, tile_rows, a.y_out, combine->out) || !combine->counters)
    return false;
  a.c_where = combine->where;
  a.c_weights = combine->weights;
  a.c_out = combine->out;
  a.c_tokens = combine->M;
  a.c_k = combine->k;
  a.counters = combine->counters;
  return true;
}

// MXFP4 weights: whole k tiles and 16-row runs of scales.
bool mxfp4_shapes_ok(int64_t N, int64_t K) {
  return N % 16 == 0 && K % kBK == 0;
}

}  // namespace

int moe_tile_rows(int64_t R, int64_t E, bool wgmma) {
  // Up to 8 rows per expert on average (decode batches; prefill has hundreds): narrow tiles.
  if (R <= 8 * E) return Narrow::BM;
  return wgmma ? kMoeWgmmaTileRows : Wide::BM;
}

int64_t moe_max_tiles(int64_t R, int64_t E, int tile_rows) {
  return (R + tile_rows - 1) / tile_rows + (E < R ? E : R);
}

cudaError_t launch_moe_up_gemm(const float* x, const int32_t* row_token, const int32_t* offsets,
                               const int32_t* tiles, const int32_t* num_tiles, int64_t max_tiles,
                               int tile_rows, const uint16_t* w1, const uint16_t* w3, int64_t I,
                               int64_t D, float limit, uint16_t* act, cudaStream_t stream) {
  if (max_tiles <= 0 || I <= 0) return cudaSuccess;
  if (D % 8 != 0) return cudaErrorInvalidValue;
  GroupedArgs a{x,  nullptr, row_token, offsets, tiles, num_tiles, w1,
                w3, I,       D,         limit,   act,   nullptr};
  return launch_shape<kUpGemm>(a, max_tiles, tile_rows, stream);
}

cudaError_t launch_moe_down_gemm(const uint16_t* act, const int32_t* offsets, const int32_t* tiles,
                                 const int32_t* num_tiles, int64_t max_tiles, int tile_rows,
                                 const uint16_t* w2, int64_t D, int64_t I, float* y,
                                 const MoeDownCombine* combine, cudaStream_t stream) {
  if (max_tiles <= 0 || D <= 0) return cudaSuccess;
  if (I % 8 != 0) return cudaErrorInvalidValue;
  GroupedArgs a{nullptr, act, nullptr, offsets, tiles,   num_tiles, w2,
                nullptr, D,   I,       0.f,     nullptr, y};
  if (!add_combine(a, tile_rows, combine)) return cudaErrorInvalidValue;
  return launch_shape<kDownGemm>(a, max_tiles, tile_rows, stream);
}

cudaError_t launch_moe_up_gemm_mxfp4(const float* x, const int32_t* row_token,
                                     const int32_t* offsets, const int32_t* tiles,
                                     const int32_t* num_tiles, int64_t max_tiles, int tile_rows,
                                     const Mxfp4Matrix& w1, const Mxfp4Matrix& w3, int64_t I,
                                     int64_t D, float limit, uint16_t* act, cudaStream_t stream) {
  if (max_tiles <= 0 || I <= 0) return cudaSuccess;
  if (!mxfp4_shapes_ok(I, D)) return cudaErrorInvalidValue;
  GroupedArgs a{x,       nullptr, row_token, offsets, tiles, num_tiles, nullptr,
                nullptr, I,       D,         limit,   act,   nullptr};
  a.q1 = w1.data;
  a.qs1 = w1.scales;
  a.q3 = w3.data;
  a.qs3 = w3.scales;
  return launch_shape<kUpGemm, true>(a, max_tiles, tile_rows, stream);
}

cudaError_t launch_moe_down_gemm_mxfp4(const uint16_t* act, const int32_t* offsets,
                                       const int32_t* tiles, const int32_t* num_tiles,
                                       int64_t max_tiles, int tile_rows, const Mxfp4Matrix& w2,
                                       int64_t D, int64_t I, float* y,
                                       const MoeDownCombine* combine, cudaStream_t stream) {
  if (max_tiles <= 0 || D <= 0) return cudaSuccess;
  if (!mxfp4_shapes_ok(D, I)) return cudaErrorInvalidValue;
  GroupedArgs a{nullptr, act, nullptr, offsets, tiles,   num_tiles, nullptr,
                nullptr, D,   I,       0.f,     nullptr, y};
  a.q1 = w2.data;
  a.qs1 = w2.scales;
  if (!add_combine(a, tile_rows, combine)) return cudaErrorInvalidValue;
  return launch_shape<kDownGemm, true>(a, max_tiles, tile_rows, stream);
}

bool moe_down_combines(int64_t M, int64_t D, int tile_rows, const float* y, const float* out) {
  const int64_t bn = tile_rows == Wide::BM ? Wide::BN : Narrow::BN;
  return M >= 1 && M <= kMoeDownCombineMaxTokens && D % 4 == 0 &&
         (D + bn - 1) / bn <= kDenseSplitCounters && aligned16(y) && aligned16(out);
}

}  // namespace deepinfer::cuda
