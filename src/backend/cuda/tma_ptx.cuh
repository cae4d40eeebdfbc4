// Hopper's tensor memory accelerator (TMA, sm_90) from device code (C++17, nvcc only): the
// shared-memory mbarrier a bulk tensor copy completes on, and the 3-D tiled copy itself; and
// what warp-specialised kernels build their stage rings from (mbarrier arrivals, cp.async
// completion on an mbarrier, named barriers, warpgroup register reallocation). The
// host side (the tensor maps) is tensor_map.h. Outside sm_90 every wrapper compiles to nothing
// (DI_HAVE_WGMMA, wgmma_ptx.cuh, says where they are real); callers check it.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace deepinfer::cuda {

// An mbarrier expecting `count` arrivals per phase, visible to the async proxy (the TMA unit)
// once the block has synchronised after this.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
#if DI_HAVE_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// One arrival that also announces `bytes` of copies still to land in this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if DI_HAVE_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
#endif
}

// One plain arrival (a consumer releasing a stage).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
#if DI_HAVE_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#endif
}

// One arrival, made once this thread's cp.async copies issued so far have landed (the barrier
// counts it among the arrivals it was initialised with).
__device__ __forceinline__ void cp_async_mbarrier_arrive(uint64_t* bar) {
#if DI_HAVE_WGMMA
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar))
               : "memory");
#endif
}

// A barrier over `threads` threads (whole warps) of the block under id (1-15; 0 is
// __syncthreads'), so that a warp-specialised block's roles synchronise apart.
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
#if DI_HAVE_WGMMA
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}

// The registers per thread of the calling warpgroup (a multiple of 8 in [24, 256]): a producer
// gives its registers to the consumers' accumulators.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if DI_HAVE_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if DI_HAVE_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// A ring of stage slots: use u of the ring lands in slot u % N, whose barriers' phase parity
// for it is (u / N) % 2.
template <int N>
struct Ring {
  int use = 0;
  __device__ int slot() const { return use % N; }
  __device__ uint32_t parity() const { return static_cast<uint32_t>((use / N) & 1); }
};

// Waits until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if DI_HAVE_WGMMA
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
#endif
}

// The box of `map` at coordinates (c0, c1, c2) (innermost first) into shared memory at dst,
// completing `bar`'s transaction bytes. Out-of-range elements land as zeros.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint64_t* bar) {
#if DI_HAVE_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4}], [%5];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
#endif
}

// tma_load_3d into the same shared-memory offset of every block of the cluster in `mask` (bit
// r: rank r), each completing the mbarrier at bar's offset in its own shared memory.
__device__ __forceinline__ void tma_load_3d_multicast(void* dst, const CUtensorMap* map, int c0,
                                                      int c1, int c2, uint64_t* bar,
                                                      uint16_t mask) {
#if DI_HAVE_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::"
      "cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar)), "h"(mask)
      : "memory");
#endif
}

// Every thread of every block of the cluster arrives, then waits for all (release / acquire:
// shared-memory writes and mbarrier initialisations before it are visible cluster-wide after).
__device__ __forceinline__ void cluster_sync_all() {
#if DI_HAVE_WGMMA
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#endif
}

// One arrival on the mbarrier at bar's offset in the shared memory of cluster block `rank`.
// Release at CTA scope, not cluster: a cluster-scope release waits for the thread's MMAs still
// in flight (measured: tensor pipes ~35% busy against ~75%).
__device__ __forceinline__ void mbarrier_arrive_cluster(uint64_t* bar, uint32_t rank) {
#if DI_HAVE_WGMMA
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_u32(bar)),
      "r"(rank)
      : "memory");
#endif
}

}  // namespace deepinfer::cuda
