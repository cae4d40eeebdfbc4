// Thin wrappers over Hopper's warpgroup MMA PTX (wgmma, sm_90a only; C++17, nvcc only): shared
// memory matrix descriptors for the 128-byte swizzled K-major tiles the expert GEMM and the
// indexer stage (and their MN-major reading, the attention's V), the m64n256k16 bf16 and
// m64n{32,64,128,256}k16 fp16 MMAs with fp32 accumulation, bf16 MMAs with A from registers, and
// the fences and group waits around them. Outside sm_90a every wrapper compiles to nothing
// (DI_HAVE_WGMMA is 0): callers check it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DI_HAVE_WGMMA 1
#else
#define DI_HAVE_WGMMA 0
#endif

namespace deepinfer::cuda {

// A K-major tile whose rows are 128 bytes (64 bf16) and whose 16-byte chunks are swizzled by
// the row within each 8-row, 1024-byte atom (chunk c of row r at c ^ (r % 8)); `addr` is the
// shared-memory address of the first row's k offset (atom-aligned tile + 32 bytes per k16 step).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4)  // start address
         | (uint64_t{1} << 16)                         // leading byte offset (unused when swizzled)
         | (uint64_t{1024 >> 4} << 32)                 // stride byte offset: one 8-row atom
         | (uint64_t{1} << 62);                        // 128-byte swizzle
}

// The same 128-byte swizzled rows read MN-major (a B operand whose N runs along the rows: row
// r holds k index r, 64 n values): 8-row groups along k `sbo` bytes apart, 64-wide n blocks
// `lbo` bytes apart (CUTLASS's canonical ((64, m), (8, k)) : ((1, LBO), (64, SBO)) layout).
__device__ __forceinline__ uint64_t wgmma_desc_sw128_mn(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{(lbo & 0x3FFFF) >> 4} << 16) |
         (uint64_t{(sbo & 0x3FFFF) >> 4} << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() {
#if DI_HAVE_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#if DI_HAVE_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if DI_HAVE_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Generic-proxy writes to shared memory (cp.async, st.shared) made visible to the async proxy
// that wgmma reads its operands through.
__device__ __forceinline__ void fence_proxy_async_smem() {
#if DI_HAVE_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Keeps the compiler from moving accumulator reads or writes across a wgmma still in flight.
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define DI_ACC8(i)                                                                            \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])

// The accumulators as asm operands (DI_ACC32 ...) and the register lists of the MMAs that
// take them (DI_REGS32 ...: operands %0 up).
#define DI_ACC16 DI_ACC8(0), DI_ACC8(8)
#define DI_ACC32 DI_ACC8(0), DI_ACC8(8), DI_ACC8(16), DI_ACC8(24)
#define DI_ACC48 DI_ACC32, DI_ACC8(32), DI_ACC8(40)
#define DI_ACC64 DI_ACC48, DI_ACC8(48), DI_ACC8(56)
#define DI_ACC128                                                                          \
  DI_ACC64, DI_ACC8(64), DI_ACC8(72), DI_ACC8(80), DI_ACC8(88), DI_ACC8(96), DI_ACC8(104), \
      DI_ACC8(112), DI_ACC8(120)
#define DI_REGS16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define DI_REGS32                                                          \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, " \
  "%30, %31"
#define DI_REGS48                                                            \
  DI_REGS32                                                                  \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, " \
  "%46, %47"
#define DI_REGS64 \
  DI_REGS48       \
  ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define DI_REGS128                                                           \
  DI_REGS64                                                                  \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "   \
  "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, "   \
  "%105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, " \
  "%117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// d[64 x 256] += a[64 x 16] b[256 x 16]^T for the warpgroup (both K-major in shared memory).
// Thread t of warp w holds rows 16 w + t / 4 (+ 8) and columns 8 j + 2 (t % 4) (+ 1) in
// d[4 j + {0, 1, 2, 3}], as mma.sync's m16n8 accumulators repeated over 32 column blocks.
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t a_desc,
                                                      uint64_t b_desc) {
#if DI_HAVE_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" DI_REGS128
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : DI_ACC128
      : "l"(a_desc), "l"(b_desc), "r"(1));
#endif
}

// d[64 x 128] (+)= a[64 x 16] b[128 x 16]^T, fp16 operands, fp32 accumulation (both K-major in
// shared memory); accumulate == 0 overwrites d. d's layout as wgmma_m64n256k16_bf16's over 16
// column blocks.
__device__ __forceinline__ void wgmma_m64n128k16_f16(float (&d)[64], uint64_t a_desc,
                                                     uint64_t b_desc, int accumulate) {
#if DI_HAVE_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" DI_REGS64
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : DI_ACC64
      : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#endif
}

// d[64 x 64] += a[64 x 16] b[64 x 16]^T, fp16, both K-major; d as wgmma_m64n256k16_bf16's
// over 8 column blocks.
__device__ __forceinline__ void wgmma_m64n64k16_f16(float (&d)[32], uint64_t a_desc,
                                                    uint64_t b_desc) {
#if DI_HAVE_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" DI_REGS32
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : DI_ACC32
      : "l"(a_desc), "l"(b_desc), "r"(1));
#endif
}

// d[64 x 32] += a[64 x 16] b[32 x 16]^T, fp16, both K-major; d as wgmma_m64n256k16_bf16's
// over 4 column blocks.
__device__ __forceinline__ void wgmma_m64n32k16_f16(float (&d)[16], uint64_t a_desc,
                                                    uint64_t b_desc) {
#if DI_HAVE_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {" DI_REGS16
      "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : DI_ACC16
      : "l"(a_desc), "l"(b_desc), "r"(1));
#endif
}

// d[64 x N] += a[64 x 16] b[N x 16]^T, bf16, a from registers (mma.sync's m16k16 A fragment per
// warp: rows 16 w + t / 4 (+ 8), k pairs 2 (t % 4) (+ 8)), b K-major in shared memory; d's
// layout as wgmma_m64n256k16_bf16's over N / 8 column blocks. N = 32, 64, 96, 128 or 256. The
// fragment registers are read as the MMA runs: keep them until its group completes.
template <int N>
__device__ __forceinline__ void wgmma_m64nNk16_bf16_rs(float (&d)[N / 2], const uint32_t (&a)[4],
                                                       uint64_t b_desc) {
  static_assert(N == 32 || N == 64 || N == 96 || N == 128 || N == 256, "an instantiated width");
#if DI_HAVE_WGMMA
  if constexpr (N == 32) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {" DI_REGS16
        "}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
        : DI_ACC16
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
  } else if constexpr (N == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" DI_REGS32
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : DI_ACC32
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
  } else if constexpr (N == 96) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {" DI_REGS48
        "}, {%48, %49, %50, %51}, %52, p, 1, 1, 0;\n}\n"
        : DI_ACC48
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
  } else if constexpr (N == 128) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" DI_REGS64
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : DI_ACC64
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" DI_REGS128
        "}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
        : DI_ACC128
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
  }
#endif
}

// d[64 x 256] += a[64 x 16] b, fp16, a K-major, b [16 x 256] MN-major (wgmma_desc_sw128_mn).
__device__ __forceinline__ void wgmma_m64n256k16_f16_bmn(float (&d)[128], uint64_t a_desc,
                                                         uint64_t b_desc) {
#if DI_HAVE_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {" DI_REGS128
      "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
      : DI_ACC128
      : "l"(a_desc), "l"(b_desc), "r"(1));
#endif
}

#undef DI_REGS128
#undef DI_REGS64
#undef DI_REGS48
#undef DI_REGS32
#undef DI_REGS16
#undef DI_ACC128
#undef DI_ACC64
#undef DI_ACC48
#undef DI_ACC32
#undef DI_ACC16
#undef DI_ACC8

}  // namespace deepinfer::cuda
