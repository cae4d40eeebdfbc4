// The fp16 hi/lo operand split the fp32-accurate tensor-core kernels share (C++17, nvcc only):
// x = hi + lo with hi = fp16(x) (saturated) and lo = fp16(x - hi), so a product takes three fp16
// MMAs (hi * hi + hi * lo + lo * hi) for about 21 bits of mantissa.
// Pairs convert with one cvt.rn.f16x2.f32 each and saturate in fp16 (min / max of the rounded
// pair): rounding then clamping to +-65504 gives what clamping then rounding does (a value past
// 65504 rounds to 65504 or to inf, which the clamp takes to 65504; NaN takes the bound, as
// fminf / fmaxf would have given), at half the instructions of converting one value at a time.
// The decode attention spent about a third of its stall samples in the scalar version.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

__device__ __forceinline__ uint32_t half2_bits(__half2 h) {
  return *reinterpret_cast<const uint32_t*>(&h);
}

// (fp16(a), fp16(b)) rounded to nearest even, saturated to +-65504.
__device__ __forceinline__ __half2 to_half2_sat(float a, float b) {
  const __half2 bound = __float2half2_rn(65504.f);
  return __hmin2(__hmax2(__floats2half2_rn(a, b), __hneg2(bound)), bound);
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  return half2_bits(__floats2half2_rn(lo, hi));
}

// The hi and lo halves of the pair (a, b), each packed (a in the low 16 bits).
__device__ __forceinline__ void split_pair(float a, float b, uint32_t* hi, uint32_t* lo) {
  const __half2 h = to_half2_sat(a, b);
  const float2 hf = __half22float2(h);
  *hi = half2_bits(h);
  *lo = pack_half2(a - hf.x, b - hf.y);
}

// Stores 4 values' hi halves alone at hi_dst (8 bytes): an operand that takes no lo products.
__device__ __forceinline__ void store_hi(void* hi_dst, const float (&x)[4]) {
  *reinterpret_cast<uint2*>(hi_dst) =
      make_uint2(half2_bits(to_half2_sat(x[0], x[1])), half2_bits(to_half2_sat(x[2], x[3])));
}

// Stores 4 values as fp16 halves: hi at hi_dst, lo = x - hi at lo_dst (8 bytes each).
__device__ __forceinline__ void store_hi_lo(void* hi_dst, void* lo_dst, const float (&x)[4]) {
  uint2 hi, lo;
  split_pair(x[0], x[1], &hi.x, &lo.x);
  split_pair(x[2], x[3], &hi.y, &lo.y);
  *reinterpret_cast<uint2*>(hi_dst) = hi;
  *reinterpret_cast<uint2*>(lo_dst) = lo;
}

}  // namespace deepinfer::cuda
