// Branch-light fp32 -> bf16 / e4m3 / e2m1 conversions for writing random checkpoints at
// gigabytes per minute. They round exactly like core/dtype.h's reference conversions
// (nearest-even, saturating; tests/bench compares them), which favour clarity over speed.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace deepinfer::bench {

inline uint16_t fast_f32_to_bf16(float v) {
  uint32_t u = std::bit_cast<uint32_t>(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// e4m3fn: bias 7, 3 mantissa bits, max 448 (saturating), subnormals down to 2^-9, 0x7F = NaN.
inline uint8_t fast_f32_to_e4m3(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  const uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7F;
  const auto sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const float a = std::bit_cast<float>(mag);
  if (a >= 448.0f) return sign | 0x7E;
  if (a < 0.015625f)  // below 2^-6: subnormal steps of 2^-9, nearest-even
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  // Round the fp32 mantissa to 3 bits (nearest-even), then rebias the exponent 127 -> 7.
  const uint32_t r = (mag + 0x7FFFFu + ((mag >> 20) & 1u)) >> 20;
  return sign | static_cast<uint8_t>(r - ((127u - 7u) << 3));
}

// e2m1: codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6 (sign in bit 3), nearest-even, saturating.
inline uint8_t fast_f32_to_e2m1(float v) {
  if (std::isnan(v)) return 0x7;
  const uint8_t sign = std::signbit(v) ? 0x8 : 0;
  const float a = std::fabs(v);
  uint8_t c;
  if (a <= 0.25f)
    c = 0;
  else if (a < 0.75f)
    c = 1;
  else if (a <= 1.25f)
    c = 2;
  else if (a < 1.75f)
    c = 3;
  else if (a <= 2.5f)
    c = 4;
  else if (a < 3.5f)
    c = 5;
  else if (a <= 5.0f)
    c = 6;
  else
    c = 7;
  return sign | c;
}

}  // namespace deepinfer::bench
