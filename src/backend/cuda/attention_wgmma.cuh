// What the two Hopper wgmma attention kernels share (kernels_attention_wgmma.cu: every operand
// split, the keys streamed per 128-key super-chunk; kernels_attention_wgmma_onepass.cu: Q and P
// as one fp16 operand, Q resident and each key read once): the shape they take, their
// parameters and the epilogue that normalises a row's 64 heads with
// their sinks and stores them. C++17, nvcc only; each including file gets its own copy.
#pragma once

#include "backend/cuda/attention_keys.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

#include <cstdint>

namespace deepinfer::cuda {

struct WgmmaAttnParams {
  const uint16_t* q;  // [M, 64, 2 * 512]: each head's hi halves, then its lo
  const AttnRow* rows;
  int64_t M;
  int64_t window;
  const int32_t* list;
  const int32_t* count;
  int64_t Kmax;
  const float* sinks;
  float scale;
  int32_t* err;
  AttnOutput o;
  bool split_a;  // Q and P as hi + lo (three MMAs a product); else hi alone (two)
};

// The kernel of kernels_attention_wgmma_onepass.cu, for p.split_a == false (launch_attention_wgmma
// checked the arguments), one persistent block per SM of the sms.
cudaError_t launch_attention_wgmma_onepass(const WgmmaAttnParams& p, int sms, cudaStream_t stream);

namespace {

constexpr int kWgHd = 512;         // head dim (the only one taken)
constexpr int kWgRows = 64;        // heads: the MMA's M
constexpr int kWgChunk = 32;       // the mma.sync kernel's softmax chunk
constexpr int kWgQNormRopeR = 32;  // raw queries: the rotated pairs, the last 64-dim slice (V4's)

// Row m's output from a consumer thread's accumulators (warpgroup wg of two, each holding 256
// dims: rows r0 and r0 + 8 are heads, dims 256 wg + 8 j + 2 tq (+ 1) in o[4 j + 2 r (+ 1)]):
// normalised with the head's sink, de-rotated where the output asks (rope_cs: rope_table's),
// stored by pairs.
__device__ __forceinline__ void store_wgmma_rows(const WgmmaAttnParams& p, int64_t m, int wg,
                                                 int r0, int tq, const float (&o)[128],
                                                 const float (&run_max)[2],
                                                 const float (&run_sum)[2], const float* rope_cs) {
  const bool derotate = p.o.rope_pos != nullptr;
  const int rot_first = derotate ? static_cast<int>(kWgHd - 2 * p.o.rope_R) : kWgHd;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r0 + 8 * r;
    const float sink = p.sinks[h], mx = fmaxf(run_max[r], sink);
    const float w = run_max[r] == neg_inf() ? 0.f : expf(run_max[r] - mx);
    const float den = run_sum[r] * w + expf(sink - mx);
    const float mul = w / den;
    const int64_t at = (m * kWgRows + h) * kWgHd;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int d = 256 * wg + 8 * j + 2 * tq;
      float v0 = o[4 * j + 2 * r] * mul, v1 = o[4 * j + 2 * r + 1] * mul;
      if (d >= rot_first) {
        const int i = (d - rot_first) / 2;
        rotate_by(v0, v1, rope_cs[i], rope_cs[p.o.rope_R + i]);
      }
      store_out_pair(p.o, at, d, v0, v1);
    }
  }
}

}  // namespace
}  // namespace deepinfer::cuda
