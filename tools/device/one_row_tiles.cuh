// What the one-row floor benches (gemv_floor_bench.cu, chain_floor_bench.cu) share: the decode
// Thin tile's shape (16 weight rows x 64 k a cp.async stage) and the engine's K split rule.
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>

#include "backend/cuda/mma_ptx.cuh"

namespace one_row {

using deepinfer::cuda::cp_async16;
using deepinfer::cuda::cp_async_commit;
using deepinfer::cuda::cp_async_wait;
using deepinfer::cuda::ldmatrix_x4;
using deepinfer::cuda::mma_bf16_16816;

constexpr int kBK = 64, kLd = kBK + 8, kBN = 16;

// A warp's copy of one stage: the 16 weight rows of column tile ct (row stride K) at k tile kt
// into dst (rows kLd apart); lane l copies 16-byte chunk l % 8 of rows l / 8 + 4 i.
__device__ __forceinline__ void copy_stage(__nv_bfloat16* dst, const uint16_t* w, int64_t K, int ct,
                                           int kt, int lane) {
  const uint16_t* src =
      w + static_cast<int64_t>(ct) * kBN * K + static_cast<int64_t>(kt) * kBK + (lane & 7) * 8;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = (lane >> 3) + 4 * i;
    cp_async16(dst + r * kLd + (lane & 7) * 8, src + r * K, true);
  }
}

// A stage's MMAs on the resident A fragment: row 0's 16 outputs in acc0 (columns 0-7) and acc1.
__device__ __forceinline__ void mma_stage(float (&acc0)[4], float (&acc1)[4],
                                          const uint32_t (&af)[4], const __nv_bfloat16* Bt,
                                          int lane) {
  const int mat = lane >> 3, mrow = lane & 7;
#pragma unroll
  for (int ks = 0; ks < kBK; ks += 16) {
    uint32_t b[4];
    ldmatrix_x4(b, Bt + (mrow + (mat >> 1) * 8) * kLd + ks + (mat & 1) * 8);
    mma_bf16_16816(acc0, af, b[0], b[1]);
    mma_bf16_16816(acc1, af, b[2], b[3]);
  }
}

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
