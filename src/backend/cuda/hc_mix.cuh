// The mHC mixing GEMV (kernels_hc_mix.cu) as kernels_hc.cu uses it: the chunking of its
// partials and its launch. Device-side layout only; not part of kernels.h's launch interface.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace deepinfer::cuda {

// The mixing GEMV is split over chunks of the row so that a few rows (decode) still spread over
// the device: block (row tile, chunk) writes, for each of its rows, the chunk's partial dot
// products with every fn row and (last slot) its partial sum of squares. A row's numbers depend
// only on that row (same chunking and summation order at any M): batch invariant.
constexpr int kMixChunk = 128;  // row elements per chunk
constexpr int kMaxMix = (2 + kMaxHc) * kMaxHc;

// The partials [M][ceil(W / kMixChunk)][nmix + 1] of M rows of W values against fn [nmix, W]:
// each chunk's nmix dot products, k in order from zero (fmaf(x, f, acc)), then its sum of
// squares; *nchunks gets the chunk count. Small blocks up to a decode batch's rows, the wide
// kernel past them: the same chains, so the same bits.
cudaError_t launch_mix_partial(const float* X, int64_t M, int64_t W, const float* fn, int nmix,
                               float* partial, int* nchunks, int sms, cudaStream_t stream);

}  // namespace deepinfer::cuda
