// Host side of the TMA copies (tma_ptx.cuh): tensor maps describing weight tensors to the copy
// engine. C++17 (included by .cu files).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace deepinfer::cuda {

// A map of the bf16 tensor [E, N, K] at `base` (K-major rows, K % 8 == 0, 16-byte aligned)
// whose box is `box_rows` rows of 64 k (128 bytes) of one expert, laid out in shared memory
// with the 128-byte swizzle the wgmma descriptors take (chunk c of row r at c ^ (r % 8)).
// False where the driver refuses the shape (or has no TMA).
bool bf16_row_tiles_map(CUtensorMap* map, const void* base, int64_t E, int64_t N, int64_t K,
                        uint32_t box_rows);

}  // namespace deepinfer::cuda
