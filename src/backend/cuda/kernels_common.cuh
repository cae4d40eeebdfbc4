// Device helpers shared by the kernel files (C++17, nvcc only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

// First statement of every kernel launched by launch_kernel (launch.cuh), or at least ahead of
// its first access to memory another kernel writes or reads: returns once the kernel before it
// in the stream has finished and its writes are visible (at once for a plain launch). Only the
// GEMM tiles let their dependents launch early (griddepcontrol.launch_dependents, once their last
// weight stage is queued; they say why): a dependent's blocks wait on the SMs beside the running
// kernel's, measured slower elsewhere (that trigger at the top of every kernel: decode batch 1
// 3.19 -> 3.51 ms; of the short kernels only: batch 64 27.0 -> 27.6 ms; at swiglu's top: no
// faster, docs/perf.md).
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the grid launched after this one (a programmatic dependent, launch.cuh) be scheduled
// once every block of this grid has called this or exited, instead of only when this grid
// completes; the dependent's wait_for_prior_grid() still waits for this grid's completion.
__device__ __forceinline__ void trigger_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ float neg_inf() {
  return __int_as_float(0xff800000);
}
__device__ __forceinline__ float nan_f() {
  return __int_as_float(0x7fffffff);
}

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t v) {
  return __uint_as_float(static_cast<uint32_t>(v) << 16);
}

__device__ __forceinline__ uint16_t f32_to_bf16_bits(float v) {
  const __nv_bfloat16 b = __float2bfloat16_rn(v);
  return *reinterpret_cast<const uint16_t*>(&b);
}

// Two values rounded to bf16, lo in the low half (a 32-bit store of two adjacent elements).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return static_cast<uint32_t>(f32_to_bf16_bits(lo)) |
         (static_cast<uint32_t>(f32_to_bf16_bits(hi)) << 16);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `red` is 32 floats of shared memory; the call ends with the block synchronised.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = lane < nw ? red[lane] : 0.f;
  s = warp_sum(s);
  return s;
}

// The widest row rms_norm4_kernel takes (one float4 per thread of a 1024-thread block); the
// kernels that reproduce its bits (hc_pre_norm's) take the same rows.
inline constexpr int kRmsNorm4MaxCols = 4096;

// rms_norm's sum of squares of 4 columns (one thread's share before the block's sum).
__device__ __forceinline__ float sum_sq4(const float4& v) {
  float ss = v.x * v.x;
  ss = fmaf(v.y, v.y, ss);
  ss = fmaf(v.z, v.z, ss);
  return fmaf(v.w, v.w, ss);
}

// rms_norm's scale of a row of D columns whose squares sum to ss.
__device__ __forceinline__ float inv_rms(float ss, int64_t D, float eps) {
  return 1.f / sqrtf(ss / static_cast<float>(D) + eps);
}

// 1 / rms of a row held one float4 per thread (zeros past D), for the block.
__device__ __forceinline__ float row_inv_rms4(const float4& v, int64_t D, float eps, float* red) {
  return inv_rms(block_sum(sum_sq4(v), red), D, eps);
}

// rms_norm's scaling of 4 columns from i: v * inv [* w[i..i+4)] (w null: unweighted). Every
// kernel writing normed rows goes through it, so that they give the same bits.
__device__ __forceinline__ float4 scale4(const float4& v, float inv, const float* w, int64_t i) {
  if (!w) return make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
  const float4 g = *reinterpret_cast<const float4*>(w + i);
  return make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
}

// Stores 4 values at column i of a row: into out (fp32), or where out_bf16 is given, into it
// rounded to bf16 as launch_f32_to_bf16 rounds them (a product's operand made by its producer).
// 16-byte aligned fp32 rows, 8-byte aligned bf16 ones.
__device__ __forceinline__ void store4(float* out, uint16_t* out_bf16, int64_t i, const float4& v) {
  if (out_bf16)
    *reinterpret_cast<uint2*>(out_bf16 + i) = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
  else
    *reinterpret_cast<float4*>(out + i) = v;
}

// SwiGLU of one gate / up pair with V4's clamps (limit > 0). Every kernel computing it goes
// through this, so that they give the same bits.
__device__ __forceinline__ float swiglu1(float g, float u, float limit) {
  if (limit > 0.f) {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
  }
  return g / (1.f + expf(-g)) * u;
}

// The MoE combine of 4 columns d.. of token m: o (out's old values) + sum_j w[m, j] *
// y[where[m, j]] in slot order (where < 0: skipped), as explicit FMAs, so that every kernel
// combining gives the same bits. y is read through L2 (other blocks of the caller's grid may
// have just written it).
__device__ __forceinline__ float4 moe_combine4(float4 o, const float* y, const int32_t* where,
                                               const float* w, int64_t m, int64_t k, int64_t D,
                                               int64_t d) {
  // The slots' rows load together (kBatch at a time), then add in slot order: one slot at a
  // time left each load waiting on the one before it (a DRAM round trip per slot).
  constexpr int kBatch = 8;
  for (int64_t j0 = 0; j0 < k; j0 += kBatch) {
    float4 v[kBatch];
    float wj[kBatch];
    bool adds[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t j = j0 + u;
      const int64_t r = j < k ? where[m * k + j] : -1;
      adds[u] = r >= 0;
      wj[u] = adds[u] ? w[m * k + j] : 0.f;
      v[u] = adds[u] ? __ldcg(reinterpret_cast<const float4*>(y + r * D + d))
                     : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (!adds[u]) continue;
      o.x = __fmaf_rn(wj[u], v[u].x, o.x);
      o.y = __fmaf_rn(wj[u], v[u].y, o.y);
      o.z = __fmaf_rn(wj[u], v[u].z, o.z);
      o.w = __fmaf_rn(wj[u], v[u].w, o.w);
    }
  }
  return o;
}

// Max over the block, like block_sum.
__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = lane < nw ? red[lane] : neg_inf();
  return warp_max(s);
}

__device__ __forceinline__ float sigmoidf_(float x) {
  return 1.f / (1.f + expf(-x));
}

// RoPE: the cosine and (sign times) the sine of pos * freq (fp32 angle like the reference, cos /
// sin in double as the CPU backend does), and the rotation of one pair (a, b) by them. Every
// kernel rotating pairs goes through these two, so that they give the same bits; sign -1: the
// inverse rotation.
__device__ __forceinline__ void rope_cos_sin(int32_t pos, float freq, float sign, float* cf,
                                             float* sf) {
  const float ang = static_cast<float>(pos) * freq;
  double s, c;
  sincos(static_cast<double>(ang), &s, &c);
  *cf = static_cast<float>(c);
  *sf = sign * static_cast<float>(s);
}
__device__ __forceinline__ void rotate_by(float& a, float& b, float cf, float sf) {
  // Rounded products and sums, never contracted into FMAs: the plain expression let the
  // compiler pick a different contraction in different kernels (the attention's de-rotation
  // against rope_kernel's), and this is what the CPU backend computes.
  const float x = a, y = b;
  a = __fsub_rn(__fmul_rn(x, cf), __fmul_rn(y, sf));
  b = __fadd_rn(__fmul_rn(y, cf), __fmul_rn(x, sf));
}
__device__ __forceinline__ void rotate_pair(float& a, float& b, int32_t pos, float freq,
                                            float sign) {
  float cf, sf;
  rope_cos_sin(pos, freq, sign, &cf, &sf);
  rotate_by(a, b, cf, sf);
}

// A strict total order as one 64-bit key, larger = earlier: the value (NaN lowest, -0 == +0),
// then the lower index. Key 0 is never produced, so it pads.
__device__ __forceinline__ unsigned long long topk_key(float v, int64_t i) {
  uint32_t o = 0;
  if (!isnan(v)) {
    const uint32_t u = __float_as_uint(v == 0.f ? 0.f : v);
    o = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  }
  return (static_cast<unsigned long long>(o) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(i));
}

// dst[dst_index(i)] = src[i] for i < n, by the whole block, in batches of kBatch loads per
// thread that all issue before the batch's stores (non-coherent loads cannot alias the stores;
// a loop of load-then-store goes one memory round trip per iteration).
template <int kBatch, typename DstIndex>
__device__ __forceinline__ void stage_rows(const float* src, int64_t n, float* dst,
                                           DstIndex dst_index) {
  for (int64_t i0 = 0; i0 < n; i0 += int64_t{kBatch} * blockDim.x) {
    float v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t i = i0 + int64_t{u} * blockDim.x + threadIdx.x;
      v[u] = i < n ? __ldg(src + i) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t i = i0 + int64_t{u} * blockDim.x + threadIdx.x;
      if (i < n) dst[dst_index(i)] = v[u];
    }
  }
}

// Records the first error code of a launch-sequence; later ones are dropped.
__device__ __forceinline__ void flag_error(int32_t* err, int32_t code) {
  if (err) atomicCAS(err, 0, code);
}

inline unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 0x7fffffff ? 0x7fffffff : b));
}

}  // namespace deepinfer::cuda
