#include "io/dequant.h"

#include <array>
#include <cstring>
#include <vector>

#include "core/status.h"

namespace deepinfer {

namespace {

// 256-entry tables: a byte-indexed load beats decoding the bits per element.
template <float (*kDecode)(uint8_t)>
const std::array<float, 256>& byte_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = kDecode(static_cast<uint8_t>(i));
    return t;
  }();
  return table;
}

// One scale element; memcpy because checkpoint data carries no alignment promise.
float load_scale(const void* scale, DType dtype, int64_t index) {
  const auto* p = static_cast<const uint8_t*>(scale);
  switch (dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, p + index * 4, 4);
      return v;
    }
    case DType::kBF16: {
      uint16_t v;
      std::memcpy(&v, p + index * 2, 2);
      return bf16_to_f32(v);
    }
    case DType::kF16: {
      uint16_t v;
      std::memcpy(&v, p + index * 2, 2);
      return f16_to_f32(v);
    }
    case DType::kE8M0:
      return byte_table<e8m0_to_f32>()[p[index]];
    default:
      break;
  }
  fail(ErrorCode::kInternal, "load_scale: dtype {} is not a scale dtype", dtype_name(dtype));
}

}  // namespace

bool is_fp8_scale_dtype(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16 || t == DType::kE8M0;
}

void dequant_fp8_block(const uint8_t* w_rows, int64_t rows, int64_t cols, int64_t row0,
                       const void* scale, DType scale_dtype, int64_t scale_cols, float* out) {
  DI_ASSERT(is_fp8_scale_dtype(scale_dtype));
  DI_ASSERT(scale_cols == (cols + kFp8BlockSize - 1) / kFp8BlockSize);
  const auto& lut = byte_table<e4m3_to_f32>();
  std::vector<float> row_scales(static_cast<size_t>(scale_cols));
  int64_t loaded_block = -1;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t block_row = (row0 + i) / kFp8BlockSize;
    if (block_row != loaded_block) {
      for (int64_t b = 0; b < scale_cols; ++b)
        row_scales[b] = load_scale(scale, scale_dtype, block_row * scale_cols + b);
      loaded_block = block_row;
    }
    const uint8_t* src = w_rows + i * cols;
    float* dst = out + i * cols;
    for (int64_t j = 0; j < cols; ++j) dst[j] = lut[src[j]] * row_scales[j / kFp8BlockSize];
  }
}

void dequant_mxfp4(const uint8_t* packed, int64_t rows, int64_t cols, const uint8_t* scale,
                   int64_t scale_cols, float* out) {
  DI_ASSERT(cols % 2 == 0);
  DI_ASSERT(scale_cols == (cols + kMxfp4BlockSize - 1) / kMxfp4BlockSize);
  std::array<float, 16> lut{};
  for (int i = 0; i < 16; ++i) lut[i] = e2m1_to_f32(static_cast<uint8_t>(i));
  const auto& e8m0 = byte_table<e8m0_to_f32>();
  const int64_t row_bytes = cols / 2;
  for (int64_t i = 0; i < rows; ++i) {
    const uint8_t* src = packed + i * row_bytes;
    const uint8_t* sc = scale + i * scale_cols;
    float* dst = out + i * cols;
    for (int64_t j = 0; j < cols; j += 2) {
      const float s = e8m0[sc[j / kMxfp4BlockSize]];  // j, j+1 share a block (32 even)
      const uint8_t b = src[j / 2];
      dst[j] = lut[b & 0xF] * s;
      dst[j + 1] = lut[b >> 4] * s;
    }
  }
}

}  // namespace deepinfer
