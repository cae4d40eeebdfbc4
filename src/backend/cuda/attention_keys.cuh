// What the attention kernels (kernels_flash_attention.cu's mma.sync kernel, the Hopper wgmma
// kernel of kernels_attention_wgmma.cu) share about a query row: the keys it sees (window rows,
// then compressed entries), the de-rotation table of its position and the store of an output
// pair. C++17, nvcc only; each including file gets its own copy (anonymous namespace).
#pragma once

#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {
namespace {

// The keys a query sees, in order: window rows lo .. lo+nw-1 of win, then its compressed entries
// (deduplicated list, or the prefix comp[0, nc)).
struct KeySet {
  const float* win;
  const float* comp;
  const int32_t* list;  // the query's row, or null
  int64_t lo, nw, nc, hd;
  const uint16_t* win_h;  // the rows as fp16 hi / lo (2 hd halves each), or null
  const uint16_t* comp_h;
  // The list entry of key j (0 for window rows or without a list): loadable ahead of row_at.
  __device__ int32_t entry(int64_t j) const { return j >= nw && list ? list[j - nw] : 0; }
  __device__ const float* row_at(int64_t j, int32_t e) const {
    if (j < nw) return win + (lo + j) * hd;
    return comp + (list ? int64_t{e} : j - nw) * hd;
  }
  __device__ const float* row(int64_t j) const { return row_at(j, entry(j)); }
  __device__ const uint16_t* halves_at(int64_t j, int32_t e) const {
    if (j < nw) return win_h + (lo + j) * 2 * hd;
    return comp_h + (list ? int64_t{e} : j - nw) * 2 * hd;
  }
};

__device__ KeySet key_set(int64_t m, int64_t hd, const AttnRow& r, int64_t window,
                          const int32_t* list, const int32_t* count, int64_t Kmax, bool report,
                          int32_t* err) {
  KeySet ks{r.win, r.comp, nullptr, 0, 0, 0, hd, r.win_h, r.comp_h};
  const int64_t hi = r.win_end;
  int64_t lo = hi - window;
  lo = lo < 0 ? 0 : (lo > hi ? hi : lo);
  ks.lo = lo;
  ks.nw = hi - lo;
  if (r.idx) {
    ks.list = list + m * Kmax;
    ks.nc = count[m];
  } else if (r.visible) {
    int64_t nc = *r.visible;
    if (nc < 0 || nc > r.E) {
      if (report) flag_error(err, kErrAttentionVis);
      nc = nc < 0 ? 0 : r.E;
    }
    ks.nc = nc;
  }
  return ks;
}

// The de-rotation's table for position pos: cos of each pair, then its sin. The table's
// double-precision sincos takes the one-group kernel from 167 to 211 registers wherever it sits
// (inline or called, before the key loop or after it); its decode attention measured ~1 us
// slower per call for it.
__device__ __noinline__ void rope_table(int32_t pos, const float* freq, int64_t R, float* cs) {
  for (int64_t i = threadIdx.x; i < R; i += blockDim.x)
    rope_cos_sin(pos, freq[i], -1.f, &cs[i], &cs[R + i]);
}

// Stores output dims (d, d + 1) of the head at `at` (d even, d + 1 < hd), fp32 or bf16.
__device__ __forceinline__ void store_out_pair(const AttnOutput& o, int64_t at, int d, float v0,
                                               float v1) {
  if (o.out_bf16)
    *reinterpret_cast<uint32_t*>(o.out_bf16 + at + d) = pack_bf16(v0, v1);
  else
    *reinterpret_cast<float2*>(o.out + at + d) = make_float2(v0, v1);
}

}  // namespace
}  // namespace deepinfer::cuda
