// Element types and exact conversions between them and fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace deepinfer {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kI8,
  kU8,
  kI32,
  kI64,
  kBool,
  kF8E4M3,   // fp8 e4m3fn: no infinities, 0x7F/0xFF are NaN, max 448
  kE8M0,     // power-of-two scale: 2^(e-127), 0xFF is NaN
  kFP4E2M1,  // fp4 e2m1, two per byte (low nibble first), max 6
};

// Bytes per element; for kFP4E2M1 (two per byte) use storage_bytes().
size_t dtype_size_bits(DType t);
size_t storage_bytes(DType t, int64_t numel);
std::string_view dtype_name(DType t);
// Safetensors dtype strings ("F32", "BF16", "F8_E4M3", "F8_E8M0", "F4"/"U8" ...). Returns false if
// unknown.
bool dtype_from_safetensors(std::string_view s, DType* out);

// ---- scalar conversions (all exact where the destination can represent the value; rounding
// ---- is round-to-nearest-even, overflow saturates for fp8/fp4, NaN stays NaN).
float bf16_to_f32(uint16_t v);
uint16_t f32_to_bf16(float v);
float f16_to_f32(uint16_t v);
uint16_t f32_to_f16(float v);
float e4m3_to_f32(uint8_t v);
uint8_t f32_to_e4m3(float v);
float e8m0_to_f32(uint8_t v);
uint8_t f32_to_e8m0(
    float v);  // exact powers of two only map exactly; others round to nearest power (in log2)
float e2m1_to_f32(uint8_t nibble);
uint8_t f32_to_e2m1(float v);

// Converts n elements of type src at `in` to fp32 at `out`. Integer types convert by value.
void convert_to_f32(DType src, const void* in, float* out, int64_t n);

}  // namespace deepinfer
