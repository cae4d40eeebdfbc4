// fill_random: the counter-based uniform fill of backend.h on the device (bit-identical to the
// CPU backend: integer hashing, an exactly representable u, one correctly rounded fma and
// round-to-nearest-even bf16).
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"

namespace deepinfer::cuda {

namespace {

__device__ __forceinline__ unsigned long long fill_hash(unsigned long long seed,
                                                        unsigned long long i) {
  unsigned long long z = seed + (i + 1ull) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ float fill_unit(unsigned long long seed, unsigned long long i) {
  return __uint2float_rn(static_cast<unsigned>(fill_hash(seed, i) >> 40)) * (1.0f / 16777216.0f);
}

// FP4E2M1: byte j is the top byte of element j's hash.
__global__ void fill_random_bytes_kernel(uint8_t* out, int64_t n, unsigned long long seed) {
  wait_for_prior_grid();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += stride)
    out[j] = static_cast<uint8_t>(fill_hash(seed, static_cast<unsigned long long>(j)) >> 56);
}

// Grid-stride over pairs of elements, so bf16 stores are 4 bytes wide.
__global__ void fill_random_kernel(void* out, bool bf16, int64_t n, unsigned long long seed,
                                   float lo, float span) {
  wait_for_prior_grid();
  const int64_t pairs = (n + 1) / 2;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs;
       p += stride) {
    const int64_t i = 2 * p;
    const float v0 = __fmaf_rn(span, fill_unit(seed, static_cast<unsigned long long>(i)), lo);
    if (i + 1 < n) {
      const float v1 = __fmaf_rn(span, fill_unit(seed, static_cast<unsigned long long>(i + 1)), lo);
      if (bf16) {
        const uint32_t packed = static_cast<uint32_t>(f32_to_bf16_bits(v0)) |
                                (static_cast<uint32_t>(f32_to_bf16_bits(v1)) << 16);
        if ((reinterpret_cast<uintptr_t>(out) & 3u) == 0) {
          reinterpret_cast<uint32_t*>(out)[p] = packed;
        } else {
          static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(packed);
          static_cast<uint16_t*>(out)[i + 1] = static_cast<uint16_t>(packed >> 16);
        }
      } else {
        static_cast<float*>(out)[i] = v0;
        static_cast<float*>(out)[i + 1] = v1;
      }
    } else if (bf16) {
      static_cast<uint16_t*>(out)[i] = f32_to_bf16_bits(v0);
    } else {
      static_cast<float*>(out)[i] = v0;
    }
  }
}

}  // namespace

cudaError_t launch_fill_random(void* out, bool bf16, int64_t n, uint64_t seed, float lo, float hi,
                               cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t pairs = (n + 1) / 2;
  // Enough blocks to fill the device many times over; the grid-stride loop covers the rest.
  const int64_t max_blocks = int64_t{132} * 32;
  const int64_t want = (pairs + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < max_blocks ? want : max_blocks);
  return launch_kernel(fill_random_kernel, blocks, kThreads, 0, stream, out, bf16, n, seed, lo,
                       hi - lo);
}

cudaError_t launch_fill_random_bytes(uint8_t* out, int64_t n, uint64_t seed, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t max_blocks = int64_t{132} * 32, want = (n + kThreads - 1) / kThreads;
  return launch_kernel(fill_random_bytes_kernel,
                       static_cast<unsigned>(want < max_blocks ? want : max_blocks), kThreads, 0,
                       stream, out, n, seed);
}

}  // namespace deepinfer::cuda
