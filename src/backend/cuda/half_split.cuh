// The fp16 hi/lo operand split the fp32-accurate tensor-core kernels share (C++17, nvcc only):
// x = hi + lo with hi = fp16(x) (saturated) and lo = fp16(x - hi), so a product takes three fp16
// MMAs (hi * hi + hi * lo + lo * hi) for about 21 bits of mantissa.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

__device__ __forceinline__ __half to_half_sat(float v) {
  return __float2half_rn(fminf(fmaxf(v, -65504.f), 65504.f));
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Stores 4 values as fp16 halves: hi at hi_dst, lo = x - hi at lo_dst (8 bytes each).
__device__ __forceinline__ void store_hi_lo(void* hi_dst, void* lo_dst, const float (&x)[4]) {
  float hi[4], lo[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    hi[i] = __half2float(to_half_sat(x[i]));
    lo[i] = x[i] - hi[i];
  }
  *reinterpret_cast<uint2*>(hi_dst) =
      make_uint2(pack_half2(hi[0], hi[1]), pack_half2(hi[2], hi[3]));
  *reinterpret_cast<uint2*>(lo_dst) =
      make_uint2(pack_half2(lo[0], lo[1]), pack_half2(lo[2], lo[3]));
}

}  // namespace deepinfer::cuda
