// Skinny GEMMs over bf16 weights for few rows (decode): out[r, n] = bf16(x[r]) . W[n], the fp32
// activations read directly and rounded in registers (no cast kernel), each weight row streamed
// once per batch of 8 rows. One kernel serves dense matmul (1 group), the block-diagonal grouped
// projection (G groups, every row) and the routed experts (E groups, the rows routed to each, gate
// and up fused with swiglu). A row's value never depends on which other rows share its block (fixed
// lane split of K, fixed reduction order), so results are the same at any batch size and any expert
// placement.
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kRowsPerPass = 8;  // activation rows sharing one read of a weight row
// Output features per warp: more of them share each activation load (plain GEMMs); the swiglu
// variant reads two weight matrices, so it keeps fewer to stay in registers.
template <bool kSwiglu>
constexpr int kFeaturesFor = kSwiglu ? 2 : 4;

__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float* f) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ float round_bf16(float v) {
  return bf16_bits_to_f32(f32_to_bf16_bits(v));
}

__device__ __forceinline__ float swiglu_value(float g, float u, float limit) {
  if (limit > 0.f) {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
  }
  return g / (1.f + expf(-g)) * u;
}

// Grid: (group slot a) x (feature tile). Group = active[a] (or a), its rows [lo, hi) = offsets
// (or [0, M)); row r reads x + (row_map ? row_map[r] : r) * ldx + group * gx and writes
// out + r * ldo + group * go.
template <bool kSwiglu>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(GemvArgs a) {
  constexpr int kFeatures = kFeaturesFor<kSwiglu>;
  const int64_t tiles = (a.N + kWarps * kFeatures - 1) / (kWarps * kFeatures);
  const int64_t slot = blockIdx.x / tiles, tile = blockIdx.x % tiles;
  int64_t group = slot, lo = 0, hi = a.M;
  if (a.active) {
    if (slot >= *a.num_active) return;
    group = a.active[slot];
  }
  if (a.offsets) {
    lo = a.offsets[group];
    hi = a.offsets[group + 1];
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n0 = (tile * kWarps + warp) * kFeatures;
  if (n0 >= a.N) return;
  const int nf = a.N - n0 < kFeatures ? static_cast<int>(a.N - n0) : kFeatures;
  const int64_t K8 = a.K / 8;
  const uint4* w1 = reinterpret_cast<const uint4*>(a.w1 + (group * a.N + n0) * a.K);
  const uint4* w3 =
      kSwiglu ? reinterpret_cast<const uint4*>(a.w3 + (group * a.N + n0) * a.K) : nullptr;

  for (int64_t r0 = lo; r0 < hi; r0 += kRowsPerPass) {
    const int nr = hi - r0 < kRowsPerPass ? static_cast<int>(hi - r0) : kRowsPerPass;
    const float* xr[kRowsPerPass];
#pragma unroll
    for (int i = 0; i < kRowsPerPass; ++i) {
      const int64_t r = r0 + (i < nr ? i : 0);
      const int64_t src = a.row_map ? int64_t{a.row_map[r]} : r;
      xr[i] = a.x + src * a.ldx + group * a.gx;
    }
    float acc1[kFeatures][kRowsPerPass] = {}, acc3[kFeatures][kRowsPerPass] = {};
#pragma unroll 2
    for (int64_t c = lane; c < K8; c += 32) {
      float wf1[kFeatures][8], wf3[kFeatures][8];
#pragma unroll
      for (int f = 0; f < kFeatures; ++f) {
        if (f < nf) {
          bf16x8_to_f32(__ldg(w1 + f * K8 + c), wf1[f]);
          if (kSwiglu) bf16x8_to_f32(__ldg(w3 + f * K8 + c), wf3[f]);
        }
      }
#pragma unroll
      for (int i = 0; i < kRowsPerPass; ++i) {
        if (i >= nr) break;
        const float4 xa = __ldg(reinterpret_cast<const float4*>(xr[i]) + 2 * c);
        const float4 xb = __ldg(reinterpret_cast<const float4*>(xr[i]) + 2 * c + 1);
        // Activations rounded to bf16 like the tensor-core paths (cuBLAS, the expert tiles), so
        // a row's value does not depend on which path its batch size picked.
        const float xv[8] = {round_bf16(xa.x), round_bf16(xa.y), round_bf16(xa.z),
                             round_bf16(xa.w), round_bf16(xb.x), round_bf16(xb.y),
                             round_bf16(xb.z), round_bf16(xb.w)};
#pragma unroll
        for (int f = 0; f < kFeatures; ++f) {
          if (f >= nf) break;
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            acc1[f][i] = fmaf(xv[j], wf1[f][j], acc1[f][i]);
            if (kSwiglu) acc3[f][i] = fmaf(xv[j], wf3[f][j], acc3[f][i]);
          }
        }
      }
    }
#pragma unroll
    for (int f = 0; f < kFeatures; ++f) {
#pragma unroll
      for (int i = 0; i < kRowsPerPass; ++i) {
        const float s1 = warp_sum(acc1[f][i]);
        const float s3 = kSwiglu ? warp_sum(acc3[f][i]) : 0.f;
        if (lane == 0 && f < nf && i < nr) {
          float* o = a.out + (r0 + i) * a.ldo + group * a.go + n0 + f;
          const float v = kSwiglu ? swiglu_value(s1, s3, a.limit) : s1;
          *o = a.accumulate ? *o + v : v;
        }
      }
    }
  }
}

}  // namespace

bool gemv_supported(int64_t K, const void* x, const void* w) {
  return K % 8 == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0 &&
         (reinterpret_cast<uintptr_t>(w) & 15) == 0;
}

cudaError_t launch_gemv(const GemvArgs& args, int64_t groups, cudaStream_t stream) {
  if (args.M <= 0 || args.N <= 0 || groups <= 0) return cudaSuccess;
  if (args.K % 8 != 0 || (args.w3 != nullptr) != args.swiglu) return cudaErrorInvalidValue;
  const int features = args.swiglu ? kFeaturesFor<true> : kFeaturesFor<false>;
  const int64_t tiles = (args.N + kWarps * features - 1) / (kWarps * features);
  if (groups * tiles > 0x7fffffff) return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>(groups * tiles);
  if (args.swiglu)
    gemv_kernel<true><<<blocks, kWarps * 32, 0, stream>>>(args);
  else
    gemv_kernel<false><<<blocks, kWarps * 32, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace deepinfer::cuda
