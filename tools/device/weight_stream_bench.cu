// How fast the decode tiles' weight streaming can go on this GPU, without their arithmetic: a
// cp.async ring of S stages, each ROWS rows x BKB bytes of a row-major weight matrix (strided:
// the layout the tiles read) or the same bytes contiguous (a tile-major layout), over 201 MB
// (a batch-1 layer's six routed experts' gate and up). Prints time and TB/s per pattern.
// Build and run on the GPU machine:
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 \
//     tools/device/weight_stream_bench.cu -o /tmp/wsb && /tmp/wsb
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
__device__ __forceinline__ void cp16(void* s, const void* g) {
  unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(s));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(g));
}
__device__ __forceinline__ void commit() {
  asm volatile("cp.async.commit_group;");
}
template <int N>
__device__ __forceinline__ void waitg() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}
// ROWS rows x BKB bytes per stage, S stages, NT threads. contiguous: the tile's bytes are one
// block.
template <int ROWS, int BKB, int S, int NT, bool CONTIG>
__global__ void __launch_bounds__(NT)
    stream(const char* w, int64_t rowbytes, int ktiles, float* sink) {
  extern __shared__ __align__(16) char sm[];
  const int tile = blockIdx.x;  // ROWS rows of the matrix
  const int64_t r0 = static_cast<int64_t>(tile) * ROWS;
  constexpr int kChunks = ROWS * BKB / 16 / NT;
  auto load = [&](int kt) {
    if (kt < ktiles) {
      char* dst = sm + (kt % S) * ROWS * BKB;
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        const int c = threadIdx.x + i * NT;
        const char* src;
        if (CONTIG)
          src = w + (r0 * rowbytes) + static_cast<int64_t>(kt) * ROWS * BKB + c * 16;
        else
          src = w + (r0 + c / (BKB / 16)) * rowbytes + static_cast<int64_t>(kt) * BKB +
                (c % (BKB / 16)) * 16;
        cp16(dst + c * 16, src);
      }
    }
    commit();
  };
  for (int s = 0; s < S - 1; ++s) load(s);
  float acc = 0.f;
  for (int kt = 0; kt < ktiles; ++kt) {
    waitg<S - 2>();
    __syncthreads();
    load(kt + S - 1);
    acc += reinterpret_cast<const float*>(sm + (kt % S) * ROWS * BKB)[threadIdx.x];
  }
  if (acc == 12345.f) sink[0] = acc;
}
template <int ROWS, int BKB, int S, int NT, bool CONTIG>
void run(const char* name, const char* w, int64_t bytes, int64_t rowbytes, float* sink) {
  const int64_t rows = bytes / rowbytes;
  const int blocks = static_cast<int>(rows / ROWS);
  const int ktiles = static_cast<int>(rowbytes / BKB);
  const size_t smem = static_cast<size_t>(S) * ROWS * BKB;
  auto k = stream<ROWS, BKB, S, NT, CONTIG>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, NT, smem);
  for (int i = 0; i < 3; ++i) k<<<blocks, NT, smem>>>(w, rowbytes, ktiles, sink);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const int iters = 20;
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) k<<<blocks, NT, smem>>>(w, rowbytes, ktiles, sink);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  const double us = ms * 1000 / iters;
  printf("%-34s blocks %6d (%2d/SM) smem %6zu  %8.1f us  %6.3f TB/s  err=%s\n", name, blocks,
         per_sm, smem, us, bytes / us / 1e6, cudaGetErrorString(cudaGetLastError()));
}
int main() {
  // 6 experts x 4096 rows x 4096 k bf16 = 201 MB, four times L2: a launch finds none of its
  // bytes there.
  const int64_t rowbytes = 4096 * 2, bytes = int64_t{6} * 4096 * rowbytes;
  char* w;
  float* sink;
  cudaMalloc(&w, bytes);
  cudaMalloc(&sink, 4);
  cudaMemset(w, 1, bytes);
  for (int rep = 0; rep < 2; ++rep) {
    run<64, 128, 4, 128, false>("narrow 64r x128B S4 strided", w, bytes, rowbytes, sink);
    run<64, 128, 4, 128, true>("narrow 64r x128B S4 contig", w, bytes, rowbytes, sink);
    run<64, 128, 8, 128, false>("narrow 64r x128B S8 strided", w, bytes, rowbytes, sink);
    run<64, 256, 4, 128, false>("64r x256B S4 strided", w, bytes, rowbytes, sink);
    run<64, 512, 3, 128, false>("64r x512B S3 strided", w, bytes, rowbytes, sink);
    run<32, 256, 4, 128, false>("32r x256B S4 strided", w, bytes, rowbytes, sink);
    run<16, 128, 8, 32, false>("thin 16r x128B S8 strided", w, bytes, rowbytes, sink);
    run<16, 128, 8, 32, true>("thin 16r x128B S8 contig", w, bytes, rowbytes, sink);
    run<16, 512, 4, 32, false>("16r x512B S4 strided", w, bytes, rowbytes, sink);
    run<128, 128, 4, 256, false>("128r x128B S4 strided", w, bytes, rowbytes, sink);
  }
  return 0;
}
