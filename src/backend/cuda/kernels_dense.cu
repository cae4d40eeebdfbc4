// Elementwise and row kernels: bf16 casts, embedding, add, rms_norm, RoPE, swiglu.
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover any n with a bounded grid.
constexpr int64_t kMaxBlocks = 1 << 16;

unsigned grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

__global__ void f32_to_bf16_kernel(const float* in, uint16_t* out, int64_t n) {
  wait_for_prior_grid();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = f32_to_bf16_bits(in[i]);
}

__global__ void bf16_to_f32_kernel(const uint16_t* in, float* out, int64_t n) {
  wait_for_prior_grid();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = bf16_bits_to_f32(in[i]);
}

// 8 elements per step (two 16-byte loads, one 16-byte store: prefill's casts of activations
// move hundreds of MB) where both ends are 16-byte aligned; the last n % 8 one per thread.
// Every element rounds as in f32_to_bf16_kernel.
__global__ void f32_to_bf16_x8_kernel(const float* in, uint16_t* out, int64_t n) {
  wait_for_prior_grid();
  const int64_t n8 = n / 8, first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  for (int64_t i = first; i < n8; i += int64_t{gridDim.x} * blockDim.x) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(in) + 2 * i);
    const float4 b = __ldg(reinterpret_cast<const float4*>(in) + 2 * i + 1);
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      w[j] = static_cast<uint32_t>(f32_to_bf16_bits(v[2 * j])) |
             (static_cast<uint32_t>(f32_to_bf16_bits(v[2 * j + 1])) << 16);
    reinterpret_cast<uint4*>(out)[i] = make_uint4(w[0], w[1], w[2], w[3]);
  }
  if (first < n - 8 * n8) out[8 * n8 + first] = f32_to_bf16_bits(in[8 * n8 + first]);
}

// One block per id: out[m] = table[ids[m]] as fp32 (NaN and an error flag for a bad id). A bf16
// table row whose columns go by 8 (16-byte aligned rows) is read 16 bytes a load, every load of
// a thread issued before its stores (a scalar loop waited out one load's latency per column
// pair: 7.7 us for a decode step's four 4096-column rows).
__global__ void embedding_kernel(const int32_t* ids, const void* table, bool bf16, int64_t V,
                                 int64_t D, float* out, int32_t* err) {
  wait_for_prior_grid();
  const int64_t m = blockIdx.x;
  const int32_t id = ids[m];
  float* o = out + m * D;
  if (id < 0 || id >= V) {
    if (threadIdx.x == 0) flag_error(err, kErrEmbeddingId);
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) o[c] = nan_f();
    return;
  }
  if (bf16) {
    const uint16_t* t = static_cast<const uint16_t*>(table) + id * D;
    const bool by8 = D % 8 == 0 && (reinterpret_cast<uintptr_t>(t) & 15) == 0 &&
                     (reinterpret_cast<uintptr_t>(o) & 15) == 0;
    if (by8) {
      constexpr int kUnroll = 4;
      const int64_t n8 = D / 8;
      for (int64_t c0 = threadIdx.x; c0 < n8; c0 += kUnroll * int64_t{blockDim.x}) {
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t c = c0 + u * int64_t{blockDim.x};
          if (c < n8) v[u] = __ldg(reinterpret_cast<const uint4*>(t) + c);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t c = c0 + u * int64_t{blockDim.x};
          if (c >= n8) continue;
          const uint32_t w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
          float f[8];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            f[2 * i] = bf16_bits_to_f32(static_cast<uint16_t>(w[i] & 0xFFFFu));
            f[2 * i + 1] = bf16_bits_to_f32(static_cast<uint16_t>(w[i] >> 16));
          }
          float4* dst = reinterpret_cast<float4*>(o) + 2 * c;
          dst[0] = make_float4(f[0], f[1], f[2], f[3]);
          dst[1] = make_float4(f[4], f[5], f[6], f[7]);
        }
      }
      return;
    }
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) o[c] = bf16_bits_to_f32(t[c]);
  } else {
    const float* t = static_cast<const float*>(table) + id * D;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) o[c] = t[c];
  }
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  wait_for_prior_grid();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = a[i] + b[i];
}

// One block per row, one float4 per thread (D % 4 == 0, 16-byte aligned rows, D <=
// kRmsNorm4MaxCols): a row's loads all in flight at once (a 4096-wide decode row in one round
// trip instead of 16).
// The whole row is read before any write, so out may be x. With pos, RoPE on each row's
// trailing 2 R dims in the same pass (rows are heads of hd = D; row r belongs to position
// pos[r / H]): the values of this kernel and rope_kernel in turn. (D - 2 R) % 4 == 0, so a float4
// holds two whole pairs or none.
// out_bf16 (no RoPE): the rows rounded to bf16 instead (store4).
__global__ void rms_norm4_kernel(const float* x, const float* w, float eps, int64_t D, int64_t H,
                                 const int32_t* pos, const float* freq, int64_t R, float* out,
                                 uint16_t* out_bf16) {
  wait_for_prior_grid();
  __shared__ float red[32];
  const int64_t i = threadIdx.x * int64_t{4};
  const bool mine = i < D;
  float4 v = mine ? *reinterpret_cast<const float4*>(x + blockIdx.x * D + i)
                  : make_float4(0.f, 0.f, 0.f, 0.f);
  const float inv = row_inv_rms4(v, D, eps, red);
  if (!mine) return;
  v = scale4(v, inv, w, i);
  const int64_t first = D - 2 * R;  // the first rotated dim
  if (pos && i >= first) {
    const int32_t p = pos[blockIdx.x / H];
    const int64_t pair = (i - first) / 2;
    rotate_pair(v.x, v.y, p, freq[pair], 1.f);
    rotate_pair(v.z, v.w, p, freq[pair + 1], 1.f);
  }
  store4(out, out_bf16, blockIdx.x * D + i, v);
}

// One block per row (any D). The whole row is read (sum of squares) before any write, so out may
// be x. out_bf16: the rows rounded to bf16 instead.
__global__ void rms_norm_kernel(const float* x, const float* w, float eps, int64_t D, float* out,
                                uint16_t* out_bf16) {
  wait_for_prior_grid();
  __shared__ float red[32];
  const float* xr = x + blockIdx.x * D;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss, red);
  const float inv = 1.f / sqrtf(ss / static_cast<float>(D) + eps);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = w ? xr[i] * inv * w[i] : xr[i] * inv;
    if (out_bf16)
      out_bf16[blockIdx.x * D + i] = f32_to_bf16_bits(v);
    else
      out[blockIdx.x * D + i] = v;
  }
}

// One thread per (row m, head h, pair i), rotated by rotate_pair.
__global__ void rope_kernel(float* x, int64_t M, int64_t H, int64_t hd, const int32_t* pos,
                            const float* freq, int64_t R, float sign) {
  wait_for_prior_grid();
  const int64_t total = M * H * R;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = t % R, mh = t / R, m = mh / H;
    float* v = x + mh * hd + (hd - 2 * R) + 2 * i;
    rotate_pair(v[0], v[1], pos[m], freq[i], sign);
  }
}

__global__ void swiglu_kernel(const float* g, const float* u, float limit, int64_t n, float* out,
                              uint16_t* out_bf16) {
  wait_for_prior_grid();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = swiglu1(g[i], u[i], limit);
    if (out) out[i] = v;
    if (out_bf16) out_bf16[i] = f32_to_bf16_bits(v);
  }
}

__global__ void swiglu_pairs_kernel(const float* h, int64_t R, int64_t I, float limit,
                                    uint16_t* act) {
  wait_for_prior_grid();
  const int64_t n = R * I;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < n;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = t / I, i = t % I;
    act[t] = f32_to_bf16_bits(swiglu1(h[r * 2 * I + i], h[r * 2 * I + I + i], limit));
  }
}

__global__ void gather_rows_bf16_kernel(const float* x, const int32_t* rows, int64_t D,
                                        uint16_t* xg) {
  wait_for_prior_grid();
  const int64_t r = blockIdx.x;
  const float* src = x + int64_t{rows[r]} * D;
  uint16_t* dst = xg + r * D;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) dst[c] = f32_to_bf16_bits(src[c]);
}

}  // namespace

cudaError_t launch_bf16_to_f32(const uint16_t* in, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return launch_kernel(bf16_to_f32_kernel, grid_for(n), kThreads, 0, stream, in, out, n);
}

cudaError_t launch_f32_to_bf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (aligned16(in) && aligned16(out))
    return launch_kernel(f32_to_bf16_x8_kernel, grid_for((n + 7) / 8), kThreads, 0, stream, in, out,
                         n);
  else
    return launch_kernel(f32_to_bf16_kernel, grid_for(n), kThreads, 0, stream, in, out, n);
}

cudaError_t launch_embedding(const int32_t* ids, int64_t M, const void* table, bool table_bf16,
                             int64_t V, int64_t D, float* out, int32_t* err, cudaStream_t stream) {
  if (M <= 0 || D <= 0) return cudaSuccess;
  return launch_kernel(embedding_kernel, static_cast<unsigned>(M), kThreads, 0, stream, ids, table,
                       table_bf16, V, D, out, err);
}

cudaError_t launch_add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return launch_kernel(add_kernel, grid_for(n), kThreads, 0, stream, a, b, out, n);
}

cudaError_t launch_rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t D,
                            float* out, uint16_t* out_bf16, cudaStream_t stream) {
  if (rows <= 0 || D <= 0) return cudaSuccess;
  if ((out == nullptr) == (out_bf16 == nullptr)) return cudaErrorInvalidValue;
  if (D % 4 == 0 && D <= kRmsNorm4MaxCols && aligned16(x) &&
      (out ? aligned16(out) : aligned16(out_bf16)) && (!weight || aligned16(weight))) {
    const int64_t threads = (D / 4 + 31) / 32 * 32;
    return launch_kernel(rms_norm4_kernel, static_cast<unsigned>(rows),
                         static_cast<unsigned>(threads), 0, stream, x, weight, eps, D, int64_t{1},
                         static_cast<const int32_t*>(nullptr), static_cast<const float*>(nullptr),
                         int64_t{0}, out, out_bf16);
  }
  return launch_kernel(rms_norm_kernel, static_cast<unsigned>(rows), kThreads, 0, stream, x, weight,
                       eps, D, out, out_bf16);
}

bool rms_norm_rope_fused(const float* x, const float* weight, int64_t hd, int64_t R,
                         const float* out) {
  return hd % 4 == 0 && hd <= kRmsNorm4MaxCols && (hd - 2 * R) % 4 == 0 && 2 * R <= hd &&
         aligned16(x) && aligned16(out) && (!weight || aligned16(weight));
}

cudaError_t launch_rms_norm_rope(const float* x, const float* weight, float eps, int64_t M,
                                 int64_t H, int64_t hd, const int32_t* positions,
                                 const float* inv_freq, int64_t R, float* out,
                                 cudaStream_t stream) {
  if (M <= 0 || H <= 0 || hd <= 0) return cudaSuccess;
  if (!rms_norm_rope_fused(x, weight, hd, R, out)) return cudaErrorInvalidValue;
  const int64_t threads = (hd / 4 + 31) / 32 * 32;
  return launch_kernel(rms_norm4_kernel, static_cast<unsigned>(M * H),
                       static_cast<unsigned>(threads), 0, stream, x, weight, eps, hd, H, positions,
                       inv_freq, R, out, static_cast<uint16_t*>(nullptr));
}

cudaError_t launch_rope(float* x, int64_t M, int64_t H, int64_t hd, const int32_t* positions,
                        const float* inv_freq, int64_t R, bool inverse, cudaStream_t stream) {
  if (M <= 0 || H <= 0 || R <= 0) return cudaSuccess;
  return launch_kernel(rope_kernel, grid_for(M * H * R), kThreads, 0, stream, x, M, H, hd,
                       positions, inv_freq, R, inverse ? -1.f : 1.f);
}

cudaError_t launch_swiglu(const float* gate, const float* up, float limit, int64_t n, float* out,
                          uint16_t* out_bf16, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return launch_kernel(swiglu_kernel, grid_for(n), kThreads, 0, stream, gate, up, limit, n, out,
                       out_bf16);
}

cudaError_t launch_swiglu_pairs(const float* h, int64_t R, int64_t I, float limit,
                                uint16_t* act_bf16, cudaStream_t stream) {
  if (R <= 0 || I <= 0) return cudaSuccess;
  return launch_kernel(swiglu_pairs_kernel, grid_for(R * I), kThreads, 0, stream, h, R, I, limit,
                       act_bf16);
}

cudaError_t launch_gather_rows_bf16(const float* x, const int32_t* rows, int64_t R, int64_t D,
                                    uint16_t* xg, cudaStream_t stream) {
  if (R <= 0 || D <= 0) return cudaSuccess;
  return launch_kernel(gather_rows_bf16_kernel, static_cast<unsigned>(R), kThreads, 0, stream, x,
                       rows, D, xg);
}

namespace {

// One block per copy (grid-strided over the copies): 16-byte moves when both ends and the length
// allow, else 4-byte, else bytes.
__global__ void copy_batch_kernel(const CopyDesc* descs, int64_t n) {
  wait_for_prior_grid();
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const CopyDesc d = descs[i];
    const auto s = reinterpret_cast<uintptr_t>(d.src), t = reinterpret_cast<uintptr_t>(d.dst);
    const uintptr_t all = s | t | static_cast<uintptr_t>(d.bytes);
    if (all % 16 == 0) {
      const auto* src = static_cast<const int4*>(d.src);
      auto* dst = static_cast<int4*>(d.dst);
      for (int64_t k = threadIdx.x; k < d.bytes / 16; k += blockDim.x) dst[k] = src[k];
    } else if (all % 4 == 0) {
      const auto* src = static_cast<const int32_t*>(d.src);
      auto* dst = static_cast<int32_t*>(d.dst);
      for (int64_t k = threadIdx.x; k < d.bytes / 4; k += blockDim.x) dst[k] = src[k];
    } else {
      const auto* src = static_cast<const unsigned char*>(d.src);
      auto* dst = static_cast<unsigned char*>(d.dst);
      for (int64_t k = threadIdx.x; k < d.bytes; k += blockDim.x) dst[k] = src[k];
    }
  }
}

// Row m: bytes [0, width) from src + m * src_pitch to dst + m * width. One block per row (grid-
// strided), the widest access the alignment allows.
__global__ void copy_rows_kernel(const char* src, int64_t src_pitch, char* dst, int64_t M,
                                 int64_t width) {
  wait_for_prior_grid();
  const bool wide = (reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                     static_cast<uintptr_t>(src_pitch) | static_cast<uintptr_t>(width)) %
                        16 ==
                    0;
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const char* s = src + m * src_pitch;
    char* d = dst + m * width;
    if (wide) {
      for (int64_t k = threadIdx.x; k < width / 16; k += blockDim.x)
        reinterpret_cast<int4*>(d)[k] = reinterpret_cast<const int4*>(s)[k];
    } else {
      for (int64_t k = threadIdx.x; k < width; k += blockDim.x) d[k] = s[k];
    }
  }
}

}  // namespace

cudaError_t launch_copy_rows(const void* src, int64_t src_pitch, void* dst, int64_t M,
                             int64_t width, cudaStream_t stream) {
  if (M <= 0 || width <= 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(M < 65535 ? M : 65535);
  return launch_kernel(copy_rows_kernel, blocks, 128, 0, stream, static_cast<const char*>(src),
                       src_pitch, static_cast<char*>(dst), M, width);
}

cudaError_t launch_copy_batch(const CopyDesc* descs, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(n < 65535 ? n : 65535);
  return launch_kernel(copy_batch_kernel, blocks, 128, 0, stream, descs, n);
}

}  // namespace deepinfer::cuda
