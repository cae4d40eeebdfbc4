// The prefill attention on Hopper wgmma where Q and P are one fp16 operand each
// (set_attention_fp16_qp, the default): the arithmetic of kernels_attention_wgmma.cu's kernel
// under that switch, in the same order, so the same bits as the mma.sync kernel, with each key
// read from L2 once instead of twice and Q once per row instead of once per 128 keys.
//
// Why: the streaming kernel stages a key's 2 KiB of fp16 hi / lo halves for the scores and again
// for P V, and Q's 64 KiB for every 128 keys: 4.5 KiB through L2 a key, against 256 KiB of MMA
// work a key (64 heads x 512 dims x 2 products x 2 MMAs; ncu counted 19.3 GB through L2 in its
// 4.4 ms at 16k tokens). Here Q's hi halves stay in shared memory
// for the row (64 KiB) and each 32-key chunk lands once (64 KiB: 8 slices of 64 dims, hi then
// lo), serving the scores as the K-major B operand and P V as the MN-major one: 2 KiB a key.
//
// Q comes as fp32 (normalised and rotated here for raw queries): at the start of each row both
// consumer warpgroups make its fp16 in shared memory (stage_q), so no kernel writes and reads
// fp16 halves of every query first (attention_q_halves_kernel: 0.3 ms a layer at 4096 tokens,
// 4.8 ms at 65,536, on an H100).
// Roles: a producer warpgroup copies by cp.async (each copy completing on an mbarrier) the
// chunks into a ring of two slots; two consumer warpgroups split the head dims: warpgroup w
// takes quarters 2 w and 2 w + 1 of every score (m64n32k16: 64 heads x 32 keys) and dims
// [256 w, 256 w + 256) of the output. The scores' quarters add in order ((q0 + q1) + q2) + q3 as
// the mma.sync kernel adds them: warpgroup 0 leaves q0 + q1 in shared memory, warpgroup 1 adds
// its two and runs the chunk's softmax (each of its threads holds 8 of a head's 32 keys, the
// mma.sync kernel's fragment), writing P and the chunk's running max and sum; both rescale their
// outputs and add P V (m64n256k16), then release the slot. Blocks are persistent (one per SM,
// rows m = blockIdx.x + i * gridDim.x), so the producer loads the next row's first chunks while
// the consumers finish a row. Measured, the halved bytes took the kernel only ~8% faster:
// its consumers' steps, one after another, bound it (docs/perf.md, session of 2026-12-06).
#include "backend/cuda/attention_wgmma.cuh"
#include "backend/cuda/half_split.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tma_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kHd = kWgHd, kRows = kWgRows, kKeys = kWgChunk;
constexpr int kSlices = kHd / 64;  // 64-dim slices: a 128-byte row each
constexpr int kConsumers = 256, kProducers = 128, kThreads = kConsumers + kProducers;
constexpr int kProducerRegs = 56, kConsumerRegs = 224;
static_assert(kProducerRegs * kProducers + kConsumerRegs * kConsumers <=
                  65536 / kThreads / 8 * 8 * kThreads,
              "the block's registers");
constexpr uint32_t kConsumerBar = 1;  // the consumers' named barrier (0 is __syncthreads')
constexpr int kSlots = 2;
// Shared memory, bytes; every MMA tile 1024-aligned; rows of 128 bytes with their 16-byte
// chunks swizzled by the row (chunk c of row r at c ^ (r % 8)).
constexpr int kQBytes = kSlices * kRows * 128;  // Q's hi halves by slice: 64 KiB
constexpr int kSliceBytes = kKeys * 128;        // a slice of a chunk's keys: 4 KiB
constexpr int kHalfBytes = kSlices * kSliceBytes;
constexpr int kSlotBytes = 2 * kHalfBytes;  // hi, then lo: 64 KiB
constexpr int kOffSlots = kQBytes;
constexpr int kOffP = kOffSlots + kSlots * kSlotBytes;  // P: 64 rows of 128 bytes (32 keys used)
constexpr int kOffPart = kOffP + kRows * 128;           // q0 + q1: 16 floats a consumer thread
constexpr int kOffStat = kOffPart + 128 * 16 * 4;       // per head: the new running max, the sum
constexpr int kOffRope = kOffStat + 2 * kRows * 4;
constexpr int kOffQRed = kOffRope + kHd * 4;  // the queries' norms: [64 heads][4 warps]
constexpr int kOffBar = kOffQRed + kRows * 4 * 4;
constexpr size_t kSmemBytes = kOffBar + 2 * kSlots * 8 + 1024;  // + alignment
constexpr int kQBatch = 16;  // heads a consumer thread stages at once (64 registers)

// Row m's queries into Q's shared slices as fp16, made from fp32 q by both consumer warpgroups
// (warpgroup wg heads wg, wg + 2, ...; thread t dims 4 t .. 4 t + 3 of each: the mapping of
// attention_q_halves_kernel's 128-thread blocks), with q_norm first that kernel's unweighted
// RMSNorm and RoPE, so its values: each head's sum of squares is its four warp sums w0..w3
// added as (w0 + w2) + (w1 + w3), what block_sum's second warp_sum makes of four nonzero lanes,
// and the rotation takes the row's rope_cs table (rope_table's, the inverse: sin negated back
// exactly). The caller publishes Q (a fence and a consumer barrier).
__device__ __forceinline__ void stage_q(const WgmmaAttnParams& p, int64_t m, int wg,
                                        unsigned char* smem, float* qred, const float* rope_cs) {
  const int t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
  const float* qrow = p.q_f32 + m * kRows * kHd + 4 * t;
  unsigned char* dst = smem + (t >> 4) * (kRows * 128) + ((t & 1) << 3);
  const int chunk = (t & 15) >> 1;
  const int first = kHd - 2 * p.o.rope_R;  // the rotated dims (with q_norm)
  for (int b = 0; b < kRows / 2; b += kQBatch) {
    float4 v[kQBatch];
#pragma unroll
    for (int u = 0; u < kQBatch; ++u)
      v[u] = __ldg(reinterpret_cast<const float4*>(qrow + (2 * (b + u) + wg) * kHd));
    if (p.q_norm) {
#pragma unroll
      for (int u = 0; u < kQBatch; ++u) {
        const float ss = warp_sum(sum_sq4(v[u]));
        if (lane == 0) qred[(2 * (b + u) + wg) * 4 + warp] = ss;
      }
      named_barrier_sync(2 + wg, 128);  // this warpgroup's heads' warp sums
#pragma unroll
      for (int u = 0; u < kQBatch; ++u) {
        const float* w = qred + (2 * (b + u) + wg) * 4;
        v[u] = scale4(v[u], inv_rms((w[0] + w[2]) + (w[1] + w[3]), kHd, p.q_eps), nullptr, 0);
        if (4 * t >= first) {
          const int pair = (4 * t - first) / 2;
          rotate_by(v[u].x, v[u].y, rope_cs[pair], -rope_cs[p.o.rope_R + pair]);
          rotate_by(v[u].z, v[u].w, rope_cs[pair + 1], -rope_cs[p.o.rope_R + pair + 1]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kQBatch; ++u) {
      const int h = 2 * (b + u) + wg;
      const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
      store_hi(dst + h * 128 + ((chunk ^ (h & 7)) << 4), x);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) attention_onepass_kernel(WgmmaAttnParams p) {
  wait_for_prior_grid();
#if DI_HAVE_WGMMA
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const uint32_t sbase = smem_u32(smem);
  float* stat_max = reinterpret_cast<float*>(smem + kOffStat);
  float* stat_sum = stat_max + kRows;
  float* rope_cs = reinterpret_cast<float*>(smem + kOffRope);
  float* qred = reinterpret_cast<float*>(smem + kOffQRed);
  uint64_t* kv_full = reinterpret_cast<uint64_t*>(smem + kOffBar);
  uint64_t* kv_empty = kv_full + kSlots;

  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < kSlots; ++s) {
      mbarrier_init(&kv_full[s], kProducers);
      mbarrier_init(&kv_empty[s], 2);
    }
  }
  __syncthreads();

  if (tid >= kConsumers) {
    // Producer: per row, its chunks into the ring.
    setmaxnreg_dec<kProducerRegs>();
    const int t = tid - kConsumers;
    const int c = t & 7, r8 = t >> 3;  // chunk c of rows r8 + 16 u
    Ring<kSlots> kr;
    for (int64_t m = blockIdx.x; m < p.M; m += gridDim.x) {
      const KeySet keys =
          key_set(m, kHd, p.rows[m], p.window, p.list, p.count, p.Kmax, t == 0, p.err);
      const int64_t n = keys.nw + keys.nc;
      // Keys r8 and r8 + 16 of each chunk: list entries a chunk ahead of their copies.
      int32_t entry[2] = {r8 < n ? keys.entry(r8) : 0, r8 + 16 < n ? keys.entry(r8 + 16) : 0};
      for (int64_t kb = 0; kb < n; kb += kKeys) {
        const uint16_t* src[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int64_t key = kb + r8 + 16 * j;
          src[j] = key < n ? keys.halves_at(key, entry[j]) : nullptr;
          entry[j] = key + kKeys < n ? keys.entry(key + kKeys) : 0;
        }
        mbarrier_wait(&kv_empty[kr.slot()], kr.parity() ^ 1);
        unsigned char* ks = smem + kOffSlots + kr.slot() * kSlotBytes;
#pragma unroll
        for (int hl = 0; hl < 2; ++hl)
#pragma unroll
          for (int s = 0; s < kSlices; ++s)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const int r = r8 + 16 * j;  // absent keys land as zeros (P V multiplies them by 0)
              cp_async16(ks + hl * kHalfBytes + s * kSliceBytes + r * 128 + ((c ^ (r & 7)) << 4),
                         src[j] ? static_cast<const void*>(src[j] + hl * kHd + s * 64 + c * 8)
                                : static_cast<const void*>(p.q_f32),
                         src[j] != nullptr);
            }
        cp_async_mbarrier_arrive(&kv_full[kr.slot()]);
        ++kr.use;
      }
    }
    cp_async_wait_all();
    return;
  }

  // Consumers.
  setmaxnreg_inc<kConsumerRegs>();
  const int wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int tq = lane & 3, r0 = warp * 16 + (lane >> 2);  // accumulator rows r0, r0 + 8
  const bool leader = (tid & 127) == 0;                   // arrives for its warpgroup
  float2* part = reinterpret_cast<float2*>(smem + kOffPart) + (tid & 127);  // [8][128]
  Ring<kSlots> kr;
  for (int64_t m = blockIdx.x; m < p.M; m += gridDim.x) {
    const KeySet keys = key_set(m, kHd, p.rows[m], p.window, p.list, p.count, p.Kmax, false, p.err);
    const int64_t n = keys.nw + keys.nc;
    // The last row is done with Q, P and the rope table (its epilogue included); this row's
    // table (the queries' rotation and the outputs' de-rotation), then its queries.
    named_barrier_sync(kConsumerBar, kConsumers);
    if (p.o.rope_pos) {
      if (tid < p.o.rope_R) rope_table(p.o.rope_pos[m], p.o.rope_freq, p.o.rope_R, rope_cs);
      named_barrier_sync(kConsumerBar, kConsumers);
    }
    if (n > 0) {
      stage_q(p, m, wg, smem, qred, rope_cs);
      fence_proxy_async_smem();                      // the queries, for wgmma's reads
      named_barrier_sync(kConsumerBar, kConsumers);  // ... both warpgroups' heads
    }
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;
    float run_max[2] = {neg_inf(), neg_inf()}, run_sum[2] = {0.f, 0.f};
    for (int64_t kb = 0; kb < n; kb += kKeys) {
      mbarrier_wait(&kv_full[kr.slot()], kr.parity());
      fence_proxy_async_smem();  // the producer's cp.async writes, for wgmma's reads
      const uint32_t ks = sbase + kOffSlots + kr.slot() * kSlotBytes;
      // S: this warpgroup's two quarters of the 64 heads x 32 keys, each from 0 (hi * hi +
      // hi * lo per k16 step, as the streaming kernel under the switch).
      float a[2][16];
#pragma unroll
      for (int i = 0; i < 16; ++i) a[0][i] = a[1][i] = 0.f;
      // Accumulator writes stay before the fence (else ptxas serialises every wgmma, C7519).
      wgmma_fence_operands(a[0]);
      wgmma_fence_operands(a[1]);
      wgmma_fence();
#pragma unroll
      for (int qq = 0; qq < 2; ++qq)
#pragma unroll
        for (int sl = 0; sl < 2; ++sl) {
          const int s = 4 * wg + 2 * qq + sl;
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const uint64_t qh = wgmma_desc_sw128(sbase + s * (kRows * 128) + k * 32);
            const uint64_t kh = wgmma_desc_sw128(ks + s * kSliceBytes + k * 32);
            const uint64_t kl = wgmma_desc_sw128(ks + kHalfBytes + s * kSliceBytes + k * 32);
            wgmma_m64n32k16_f16(a[qq], qh, kh);
            wgmma_m64n32k16_f16(a[qq], qh, kl);
          }
        }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(a[0]);
      wgmma_fence_operands(a[1]);
      if (wg == 0) {
#pragma unroll
        for (int i = 0; i < 8; ++i)
          part[i * 128] = make_float2((0.f + a[0][2 * i]) + a[1][2 * i],
                                      (0.f + a[0][2 * i + 1]) + a[1][2 * i + 1]);
      }
      named_barrier_sync(kConsumerBar, kConsumers);  // q0 + q1 in
      if (wg == 1) {
        float* s = a[0];  // the scores, in place: key kb + 8 j + 2 tq + e in s[4 j + 2 r + e]
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float2 prev = part[i * 128];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int k = 2 * i + e;
            const int64_t key = kb + 8 * (k >> 2) + 2 * tq + e;
            s[k] = key < n ? (((e ? prev.y : prev.x) + a[0][k]) + a[1][k]) * p.scale : neg_inf();
          }
        }
        unsigned char* ps = smem + kOffP;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float* v = s + 2 * r;
          float mx = fmaxf(fmaxf(v[0], v[1]), fmaxf(v[4], v[5]));
          mx = fmaxf(mx, fmaxf(fmaxf(v[8], v[9]), fmaxf(v[12], v[13])));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float nmax = fmaxf(run_max[r], mx);
          float sum = 0.f;
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int i = 2 * r; i < 2 * r + 2; ++i) {
              float& x = s[4 * j + i];
              x = nmax == neg_inf() ? 0.f : expf(x - nmax);
              sum += x;
            }
          sum += __shfl_xor_sync(0xffffffffu, sum, 1);
          sum += __shfl_xor_sync(0xffffffffu, sum, 2);
          const int rr = r0 + 8 * r;
          if (tq == 0) {
            stat_max[rr] = nmax;
            stat_sum[rr] = sum;
          }
          // P's fp16 (the A operand, K-major: head rr's keys in its 128-byte row).
#pragma unroll
          for (int j = 0; j < 4; ++j)
            *reinterpret_cast<uint32_t*>(ps + rr * 128 + ((j ^ (rr & 7)) << 4) + tq * 4) =
                half2_bits(__floats2half2_rn(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
        }
        fence_proxy_async_smem();
      }
      named_barrier_sync(kConsumerBar, kConsumers);  // P and the chunk's max and sum in
      // The online softmax's rescale, then P V over this warpgroup's 256 dims.
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int rr = r0 + 8 * r;
        const float nmax = stat_max[rr];
        const float corr = run_max[r] == neg_inf() ? 0.f : expf(run_max[r] - nmax);
        run_sum[r] = run_sum[r] * corr + stat_sum[rr];
        run_max[r] = nmax;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          o[4 * j + 2 * r] *= corr;
          o[4 * j + 2 * r + 1] *= corr;
        }
      }
      wgmma_fence_operands(o);
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const uint64_t ph = wgmma_desc_sw128(sbase + kOffP + k * 32);
        const uint32_t va = ks + 4 * wg * kSliceBytes + k * 16 * 128;
        wgmma_m64n256k16_f16_bmn(o, ph, wgmma_desc_sw128_mn(va, kSliceBytes, 1024));
        wgmma_m64n256k16_f16_bmn(o, ph, wgmma_desc_sw128_mn(va + kHalfBytes, kSliceBytes, 1024));
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(o);
      if (leader) mbarrier_arrive(&kv_empty[kr.slot()]);
      ++kr.use;
    }
    store_wgmma_rows(p, m, wg, r0, tq, o, run_max, run_sum, rope_cs);
  }
#else
  __trap();  // launched only on sm_90a devices (wgmma_available)
#endif
}

}  // namespace

cudaError_t launch_attention_wgmma_onepass(const WgmmaAttnParams& p, int sms, cudaStream_t stream) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(attention_onepass_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmemBytes));
  if (attr != cudaSuccess) return attr;
  const int64_t blocks = p.M < sms ? p.M : sms;  // persistent: any grid serves every row
  return launch_kernel(attention_onepass_kernel, static_cast<unsigned>(blocks), kThreads,
                       kSmemBytes, stream, p);
}

}  // namespace deepinfer::cuda
