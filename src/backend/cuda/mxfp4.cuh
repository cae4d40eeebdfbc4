// MXFP4 weights (backend.h, ExpertWeights) widened to bf16 in registers, exactly: the MMA tiles
// of MXFP4-resident experts build their weight fragments with these.
#pragma once

#include <cstdint>

namespace deepinfer::cuda {

// The bf16x2 multiplier of e8m0 scale s for widen_e2m1x2: 2^(s - 1) in both halves (a normal
// bf16 for the scales ExpertWeights allows, 2..128).
__device__ __forceinline__ uint32_t mxfp4_scale_mul(uint32_t s) {
  const uint32_t h = (s + 126u) << 7;
  return h | (h << 16);
}

// The two e2m1 values of `byte` (the low nibble first) times the scale `mul` stands for, as
// bf16x2. A nibble's sign and three magnitude bits placed at bf16 bits 15 and 8..6 read as its
// value times 2^-126 (code 1, e2m1's 0.5, lands on a bf16 subnormal), so one multiply by 2^(s - 1)
// gives value * 2^(s - 127), exact (the product is a normal bf16 with two significant bits). The
// fma's addend is -0 so that -0 stays -0, as dequantising gives.
__device__ __forceinline__ uint32_t widen_e2m1x2(uint32_t byte, uint32_t mul) {
  // The byte at bits 12..19 and 24..31: the low nibble at 12..15, the high one at 28..31, each
  // nibble's sign where its half's sign goes and its magnitude 6 bits above its half's bits 6..8.
  const uint32_t t = byte * 0x01001000u;
  const uint32_t v = (t & 0x80008000u) | ((t >> 6) & 0x01C001C0u);
  uint32_t r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(v), "r"(mul), "r"(0x80008000u));
  return r;
}

}  // namespace deepinfer::cuda
