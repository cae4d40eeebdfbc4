// What the one-row floor benches (gemv_floor_bench.cu, chain_floor_bench.cu) share: the decode
// Thin tile's shape (16 weight rows x 64 k a cp.async stage) and the engine's K split rule.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/cuda/mma_ptx.cuh"

namespace one_row {

using deepinfer::cuda::cp_async16;
using deepinfer::cuda::cp_async_commit;
using deepinfer::cuda::cp_async_wait;
using deepinfer::cuda::ldmatrix_x4;
using deepinfer::cuda::mma_bf16_16816;

constexpr int kBK = 64, kLd = kBK + 8, kBN = 16;

// The engine's split rule (dense_gemm_split at batch 1): ~792 one-row blocks, segments of at
// least 8 k tiles, at most 16.
inline void split(int64_t N, int64_t K, int* splits, int* seg) {
  const int64_t kt = K / kBK, blocks = (N + kBN - 1) / kBN;
  const int64_t s = std::min({792 / blocks, kt / 8, int64_t{16}});
  if (s <= 1) {
    *splits = 1;
    *seg = static_cast<int>(kt);
    return;
  }
  const int64_t sg = (kt + s - 1) / s;
  *seg = static_cast<int>(sg);
  *splits = static_cast<int>((kt + sg - 1) / sg);
}

}  // namespace one_row
