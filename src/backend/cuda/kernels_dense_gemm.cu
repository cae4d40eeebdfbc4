// Decode-sized dense products (matmul / grouped_matmul of up to kDenseGemmMaxRows rows) on the
// mma.sync tiles of grouped_gemm.cuh, batch invariant: how K splits into segments, where the
// segments run and sum (in turn, on blocks of their own through the workspace or a cluster),
// and the resident-A path that reads fp32 x itself.
#include "backend/cuda/grouped_gemm.cuh"

namespace deepinfer::cuda {

using namespace gemm_tiles;

namespace {
// The most values of x a block keeps resident (set_dense_resident_a).
int64_t resident_a_elems = kDenseResidentAElems;
}  // namespace

bool dense_gemm_supported(int64_t M, int64_t N, int64_t K, int64_t ldx, int64_t ldw, const void* x,
                          const void* w) {
  return M >= 1 && M <= kDenseGemmMaxRows && N >= 1 && K >= 8 && K % 8 == 0 && ldx % 8 == 0 &&
         ldw % 8 == 0 && aligned16(x) && aligned16(w);
}

namespace {
int64_t split_target_blocks = kDenseSplitTargetBlocks;
}  // namespace

void set_dense_split_target(int64_t blocks) {
  split_target_blocks = blocks;
}

DenseSplit dense_gemm_split(int64_t N, int64_t K, int64_t batch) {
  // split_target_blocks one-row blocks at M = 1; segments of at least kMinSegTiles k tiles keep
  // the partials' traffic small next to the weights'.
  constexpr int64_t kMinSegTiles = 8, kMaxSplits = 16;
  const int64_t kTargetBlocks = split_target_blocks;
  const int64_t k_tiles = (K + kBK - 1) / kBK;
  const int64_t blocks = batch * ((N + Thin::BN - 1) / Thin::BN);
  int64_t s = kTargetBlocks <= 0 ? 1 : kTargetBlocks / blocks;  // never a second wave
  s = std::min({s, k_tiles / kMinSegTiles, kMaxSplits});
  if (s <= 1) return {1, static_cast<int>(k_tiles)};
  const int64_t seg = (k_tiles + s - 1) / s;
  return {static_cast<int>((k_tiles + seg - 1) / seg), static_cast<int>(seg)};
}

namespace {

// Products of 17 to 32 rows on Narrow tiles (one or two per weight tile), wider ones on Wide
// (one 64-row tile per weight tile instead of four Narrow ones: batch 64 25.4 -> 24.4 ms; at
// batch 32, one Wide tile of 32 live rows measured 17.4 -> 17.7 ms).
constexpr int64_t kDenseNarrowMaxRows = 32;

// Split products of up to 16 rows run their segments on blocks of their own (their time is the
// chain of dependent mma steps over K, not bytes; through the workspace where no cluster fits);
// wider ones do where their clusters are resident and sum the segments in turn otherwise (the
// workspace's round trips cost 64-row tiles more than the blocks gained: 4096 x 4096 at 256 rows
// 62 -> 81-122 us).
bool splits_over_blocks(int64_t M) {
  return M <= Thin::BM;
}

// The tile shape for M rows (the same arithmetic in each).
template <Mode kMode>
cudaError_t launch_dense_tiles(const GroupedArgs& a, int64_t M, int64_t batch,
                               cudaStream_t stream) {
  constexpr bool kSplit = kMode == kDenseSplitGemm;
  if (M <= Thin::BM)
    return launch_grouped<kMode, Thin>(a, 1, batch, stream,
                                       kSplit ? SplitRun::kOverBlocks : SplitRun::kInTurn);
  const SplitRun run = kSplit ? SplitRun::kClustersOrInTurn : SplitRun::kInTurn;
  if (M <= kDenseNarrowMaxRows)
    return launch_grouped<kMode, Narrow>(a, (M + 15) / 16, batch, stream, run);
  return launch_grouped<kMode, Wide>(a, (M + 63) / 64, batch, stream, run);
}

}  // namespace

bool dense_split_in_cluster(int64_t M, int64_t N, int64_t K, int64_t batch, bool fp32_x) {
  const DenseSplit split = dense_gemm_split(N, K, batch);
  if (split.splits < 2) return false;
  if (M <= Thin::BM && fp32_x)
    return clusters_fit(grouped_gemm_kernel<kDenseSplitGemm, Thin, true>, Thin::kThreads,
                        resident_smem(M, split.seg_tiles), split.splits,
                        batch * ((N + Thin::BN - 1) / Thin::BN));
  GroupedArgs a{};
  a.N = N;
  a.splits = split.splits;
  if (M <= Thin::BM) return dense_tiles_in_cluster<Thin>(a, 1, batch);
  return M <= kDenseNarrowMaxRows ? dense_tiles_in_cluster<Narrow>(a, (M + 15) / 16, batch)
                                  : dense_tiles_in_cluster<Wide>(a, (M + 63) / 64, batch);
}

int64_t dense_gemm_partials(int64_t M, int64_t N, int64_t K, int64_t batch) {
  const int splits = dense_gemm_split(N, K, batch).splits;
  return splits > 1 && splits_over_blocks(M) ? batch * splits * M * N : 0;
}

namespace {

// Thin tiles with the block's rows of fp32 x resident as bf16 (grouped_gemm_kernel's kResA).
template <Mode kMode>
cudaError_t launch_resident_a(const GroupedArgs& a, int64_t M, int64_t batch, cudaStream_t stream) {
  using T = Thin;
  constexpr size_t stage_bytes = static_cast<size_t>(T::STAGES) * T::BN * kLd * 2;
  const size_t smem = resident_smem(M, a.seg_tiles);
  auto* kernel = grouped_gemm_kernel<kMode, T, true>;
  static const cudaError_t attr = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(stage_bytes + (kResidentAMaxElems + 8 * T::BM + 16) * 2));
  if (attr != cudaSuccess) return attr;
  const int64_t col_tiles = (a.N + T::BN - 1) / T::BN;
  if (col_tiles > 0x7fffffff || batch > 65535 ||
      (kMode == kDenseSplitGemm && batch * col_tiles > kDenseSplitCounters))
    return cudaErrorInvalidValue;
  const unsigned z = kMode == kDenseSplitGemm ? a.splits : 1;
  GroupedArgs b = a;
  b.cluster_split = z > 1 && clusters_fit(kernel, T::kThreads, smem, z, batch * col_tiles);
  return launch_kernel_clustered(
      kernel, dim3(static_cast<unsigned>(col_tiles), static_cast<unsigned>(batch), z), T::kThreads,
      smem, stream, dim3(1, 1, b.cluster_split ? z : 1), b);
}

// Whether a dense product's split workspace is there where it needs one.
bool partials_given(int64_t M, int64_t N, int64_t K, int64_t batch, const float* partials,
                    const int32_t* counters) {
  const int64_t need = dense_gemm_partials(M, N, K, batch);
  return need == 0 || (partials && counters && need <= 0x7fffffff);
}

// The arguments of a dense product; x_bf16 or x_f32 is null.
GroupedArgs dense_args(const uint16_t* x_bf16, const float* x_f32, int64_t ldx, int64_t sx,
                       const uint16_t* w, int64_t ldw, int64_t sw, float* out, int64_t ldo,
                       int64_t so, int64_t M, int64_t N, int64_t K, int64_t batch, bool accumulate,
                       float* partials, int32_t* counters) {
  const DenseSplit split = dense_gemm_split(N, K, batch);
  GroupedArgs a{x_f32,   x_bf16, nullptr, nullptr, nullptr, nullptr, w,
                nullptr, N,      K,       0.f,     nullptr, out};
  a.M = M;
  a.ldx = ldx;
  a.ldw = ldw;
  a.ldo = ldo;
  a.sx = sx;
  a.sw = sw;
  a.so = so;
  a.accumulate = accumulate;
  a.splits = split.splits;
  a.seg_tiles = split.seg_tiles;
  a.partials = partials;
  a.counters = counters;
  return a;
}

}  // namespace

cudaError_t launch_dense_gemm(const uint16_t* x, int64_t ldx, int64_t sx, const uint16_t* w,
                              int64_t ldw, int64_t sw, float* out, int64_t ldo, int64_t so,
                              int64_t M, int64_t N, int64_t K, int64_t batch, bool accumulate,
                              float* partials, int32_t* counters, cudaStream_t stream) {
  if (M <= 0 || N <= 0 || batch <= 0) return cudaSuccess;
  if (!dense_gemm_supported(M, N, K, ldx, ldw, x, w) || sx % 8 != 0 || sw % 8 != 0)
    return cudaErrorInvalidValue;
  if (!partials_given(M, N, K, batch, partials, counters)) return cudaErrorInvalidValue;
  const GroupedArgs a = dense_args(x, nullptr, ldx, sx, w, ldw, sw, out, ldo, so, M, N, K, batch,
                                   accumulate, partials, counters);
  return a.splits > 1 ? launch_dense_tiles<kDenseSplitGemm>(a, M, batch, stream)
                      : launch_dense_tiles<kDenseGemm>(a, M, batch, stream);
}

namespace {
bool dense_f32_on = true;
}  // namespace

void set_dense_gemm_f32(bool on) {
  dense_f32_on = on;
}

bool dense_gemm_f32_supported(int64_t M, int64_t N, int64_t K, int64_t batch, int64_t ldx,
                              int64_t ldw, const float* x, const void* w) {
  if (!dense_f32_on || M > Thin::BM || ldx % 4 != 0 || !dense_gemm_supported(M, N, K, 8, ldw, x, w))
    return false;
  return M * dense_gemm_split(N, K, batch).seg_tiles * kBK <= resident_a_elems;
}

void set_dense_resident_a(int64_t elems) {
  resident_a_elems = std::clamp<int64_t>(elems, 0, kResidentAMaxElems);
}

cudaError_t launch_dense_gemm_f32(const float* x, int64_t ldx, int64_t sx, const uint16_t* w,
                                  int64_t ldw, int64_t sw, float* out, int64_t ldo, int64_t so,
                                  int64_t M, int64_t N, int64_t K, int64_t batch, bool accumulate,
                                  float* partials, int32_t* counters, cudaStream_t stream) {
  if (M <= 0 || N <= 0 || batch <= 0) return cudaSuccess;
  if (!dense_gemm_f32_supported(M, N, K, batch, ldx, ldw, x, w) || sx % 4 != 0 || sw % 8 != 0)
    return cudaErrorInvalidValue;
  if (!partials_given(M, N, K, batch, partials, counters)) return cudaErrorInvalidValue;
  const GroupedArgs a = dense_args(nullptr, x, ldx, sx, w, ldw, sw, out, ldo, so, M, N, K, batch,
                                   accumulate, partials, counters);
  return a.splits > 1 ? launch_resident_a<kDenseSplitGemm>(a, M, batch, stream)
                      : launch_resident_a<kDenseGemm>(a, M, batch, stream);
}

}  // namespace deepinfer::cuda
