// MXFP4 weights (backend.h, ExpertWeights) in the CUDA backend's resident order, widened to bf16
// in registers, exactly: the MMA tiles of MXFP4-resident experts build their weight fragments
// with these.
//
// Resident order (CudaBackend::prepare_mxfp4_experts reorders a checkpoint's rows into it): each
// row's k tiles of 64 values (32 bytes) are four 8-byte runs, run t holding the 16 values an MMA
// fragment's thread column t (lane % 4) reads: for 16-wide chunks c = 0..3, its "lo" pair k = 16 c
// + 2 t + {0, 1} and its "hi" pair k = 16 c + 2 t + 8 + {0, 1}. The run is two words, word w for
// chunks 2 w and 2 w + 1 (so one scale group a word); pair i of a word (i = 2 (c % 2) + {0 lo,
// 1 hi}) has its even value's code in bits 4 i .. 4 i + 3 and its odd value's in bits 16 + 4 i ..
// 19 + 4 i, which puts both where one shift lines them up with a bf16x2's halves.
#pragma once

#include <cstdint>

namespace deepinfer::cuda {

// The bf16x2 multiplier of e8m0 scale s for widen_e2m1_pair: 2^(s - 1) in both halves (a normal
// bf16 for the scales ExpertWeights allows, 2..128).
__device__ __forceinline__ uint32_t mxfp4_scale_mul(uint32_t s) {
  return (s + 126u) * 0x00800080u;
}

// Pair i of resident word w (its even value in the low half) times the scale `mul` stands for,
// as bf16x2. A code's sign and three magnitude bits placed at bf16 bits 15 and 8..6 read as its
// value times 2^-126 (code 1, e2m1's 0.5, lands on a bf16 subnormal), so one multiply by 2^(s - 1)
// gives value * 2^(s - 127), exact (the product is a normal bf16 with two significant bits). The
// fma's addend is -0 so that -0 stays -0, as dequantising gives.
__device__ __forceinline__ uint32_t widen_e2m1_pair(uint32_t w, int i, uint32_t mul) {
  // The pair's codes at bits 12..15 and 28..31: each sign where its half's sign goes, each
  // magnitude 6 bits above its half's bits 6..8.
  const uint32_t t = w << (12 - 4 * i);
  const uint32_t v = (t & 0x80008000u) | ((t >> 6) & 0x01C001C0u);
  uint32_t r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(v), "r"(mul), "r"(0x80008000u));
  return r;
}

// Word `word` (0..7: run word / 2, word word % 2) of a 32-byte k tile in the resident order, from
// the tile's 32 bytes in a checkpoint's order (byte b: values 2 b, the low nibble, and 2 b + 1).
__device__ __forceinline__ uint32_t mxfp4_resident_word(const uint8_t (&tile)[32], int word) {
  const int t = word >> 1, w = word & 1;
  uint32_t out = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int c = 2 * w + (i >> 1), hi = i & 1;   // pair i: chunk c, lo / hi
    const uint32_t b = tile[8 * c + 4 * hi + t];  // values 16 c + 2 t + 8 hi + {0, 1}
    out |= (b & 15u) << (4 * i) | (b >> 4) << (16 + 4 * i);
  }
  return out;
}

}  // namespace deepinfer::cuda
