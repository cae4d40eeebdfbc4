// Dequantisation of checkpoint weights to fp32: FP8 e4m3 with 128x128 block scales and MXFP4
// (e2m1 pairs packed in bytes, one e8m0 scale per 32 values of a row). Both work on a row range
// of a matrix so that slices of fused expert tensors dequantise without touching the rest.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace deepinfer {

inline constexpr int64_t kFp8BlockSize = 128;
inline constexpr int64_t kMxfp4BlockSize = 32;

// Scale dtypes a FP8 block scale may have.
bool is_fp8_scale_dtype(DType t);  // F32, BF16, F16, E8M0

// w[i][j] = e4m3(w_rows[i][j]) * scale[(row0 + i) / 128][j / 128] for i in [0, rows), j in
// [0, cols). `w_rows` holds `rows` rows of `cols` bytes; `scale` is the whole matrix's scale grid
// with `scale_cols` = ceil(cols / 128) columns, elements of `scale_dtype`. No alignment needed.
void dequant_fp8_block(const uint8_t* w_rows, int64_t rows, int64_t cols, int64_t row0,
                       const void* scale, DType scale_dtype, int64_t scale_cols, float* out);

// w[i][j] = e2m1(nibble j of row i) * 2^(scale[i][j / 32] - 127). Each row of `packed` holds
// cols / 2 bytes, the low nibble being the even column; `scale` holds rows x scale_cols e8m0
// bytes (scale_cols = ceil(cols / 32)). cols must be even.
void dequant_mxfp4(const uint8_t* packed, int64_t rows, int64_t cols, const uint8_t* scale,
                   int64_t scale_cols, float* out);

}  // namespace deepinfer
