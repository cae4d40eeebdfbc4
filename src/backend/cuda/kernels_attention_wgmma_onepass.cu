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
// Roles: a producer warpgroup copies by cp.async (each copy completing on an mbarrier) Q, then
// the chunks into a ring of two slots; two consumer warpgroups split the head dims: warpgroup w
// takes quarters 2 w and 2 w + 1 of every score (m64n32k16: 64 heads x 32 keys) and dims
// [256 w, 256 w + 256) of the output. The scores' quarters add in order ((q0 + q1) + q2) + q3 as
// the mma.sync kernel adds them, and the chunk's softmax is split by keys: warpgroup 0 takes
// keys 0-15 (q2 and q3 of them from warpgroup 1), warpgroup 1 keys 16-31 (q0 + q1 from
// warpgroup 0), each with the mma.sync kernel's fragment of its keys; the two halves' maxima
// meet in shared memory, and each row's sum runs key by key as that kernel's, warpgroup 0's
// half first, continued by warpgroup 1, which keeps the row's running sum. Both write their
// half of P, rescale their outputs and add P V (m64n256k16), then release the slot. Blocks are
// persistent (one per SM, rows m = blockIdx.x + i * gridDim.x), so the producer loads the next
// row's Q and first chunks while the consumers finish a row. Measured, the halved bytes took
// the kernel only ~8% faster: its consumers' steps, one after another, bound it; splitting the
// softmax over both warpgroups took 11% more off (docs/perf.md, sessions of 2026-12-06).
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
// The softmax's exchanges between the warpgroups, per consumer thread of a warpgroup: q0 + q1
// of keys 16-31 (8 floats, warpgroup 0's), q2 and q3 of keys 0-15 (16, warpgroup 1's), the
// first half of each row's sum (2, warpgroup 0's); per head: each warpgroup's chunk max, and
// the row's final sum (warpgroup 1's, for warpgroup 0's epilogue; two rows apart).
constexpr int kOffX01 = kOffP + kRows * 128;
constexpr int kOffX23 = kOffX01 + 128 * 8 * 4;
constexpr int kOffPSum = kOffX23 + 128 * 16 * 4;
constexpr int kOffXMax = kOffPSum + 128 * 2 * 4;
constexpr int kOffFinSum = kOffXMax + 2 * kRows * 4;
constexpr int kOffRope = kOffFinSum + 2 * kRows * 4;
constexpr int kOffBar = kOffRope + kHd * 4;
constexpr size_t kSmemBytes = kOffBar + (2 + 2 * kSlots) * 8 + 1024;  // + alignment

__global__ void __launch_bounds__(kThreads, 1) attention_onepass_kernel(WgmmaAttnParams p) {
  wait_for_prior_grid();
#if DI_HAVE_WGMMA
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const uint32_t sbase = smem_u32(smem);
  float* xmax = reinterpret_cast<float*>(smem + kOffXMax);       // [warpgroup][head]
  float* fin_sum = reinterpret_cast<float*>(smem + kOffFinSum);  // [row parity][head]
  float* rope_cs = reinterpret_cast<float*>(smem + kOffRope);
  uint64_t* q_full = reinterpret_cast<uint64_t*>(smem + kOffBar);
  uint64_t* q_empty = q_full + 1;
  uint64_t* kv_full = q_empty + 1;
  uint64_t* kv_empty = kv_full + kSlots;

  const int tid = threadIdx.x;
  if (tid == 0) {
    mbarrier_init(q_full, kProducers);  // every producer thread's copies
    mbarrier_init(q_empty, 2);          // both consumer warpgroups, done with the row's scores
    for (int s = 0; s < kSlots; ++s) {
      mbarrier_init(&kv_full[s], kProducers);
      mbarrier_init(&kv_empty[s], 2);
    }
  }
  __syncthreads();

  if (tid >= kConsumers) {
    // Producer: per row, Q, then its chunks into the ring.
    setmaxnreg_dec<kProducerRegs>();
    const int t = tid - kConsumers;
    const int c = t & 7, r8 = t >> 3;  // chunk c of rows r8 + 16 u
    Ring<kSlots> kr;
    Ring<1> qr;
    for (int64_t m = blockIdx.x; m < p.M; m += gridDim.x) {
      const KeySet keys =
          key_set(m, kHd, p.rows[m], p.window, p.list, p.count, p.Kmax, t == 0, p.err);
      const int64_t n = keys.nw + keys.nc;
      // Q's hi halves, heads r8 + 16 u, every slice, once the last row's scores are done.
      mbarrier_wait(q_empty, qr.parity() ^ 1);
      const uint16_t* qrow = p.q + m * kRows * 2 * kHd;
#pragma unroll
      for (int s = 0; s < kSlices; ++s)
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int h = r8 + 16 * u;
          cp_async16(smem + s * (kRows * 128) + h * 128 + ((c ^ (h & 7)) << 4),
                     qrow + h * 2 * kHd + s * 64 + c * 8, true);
        }
      cp_async_mbarrier_arrive(q_full);
      ++qr.use;
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
              cp_async16(
                  ks + hl * kHalfBytes + s * kSliceBytes + r * 128 + ((c ^ (r & 7)) << 4),
                  src[j] ? static_cast<const void*>(src[j] + hl * kHd + s * 64 + c * 8) : p.q,
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
  const int tt = tid & 127;
  float2* x01 = reinterpret_cast<float2*>(smem + kOffX01) + tt;    // [4][128]
  float2* x23 = reinterpret_cast<float2*>(smem + kOffX23) + tt;    // [8][128]
  float2* psum = reinterpret_cast<float2*>(smem + kOffPSum) + tt;  // [128]
  int parity = 0;                                                  // the row's fin_sum half
  Ring<kSlots> kr;
  Ring<1> qr;
  for (int64_t m = blockIdx.x; m < p.M; m += gridDim.x) {
    const KeySet keys = key_set(m, kHd, p.rows[m], p.window, p.list, p.count, p.Kmax, false, p.err);
    const int64_t n = keys.nw + keys.nc;
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;
    float run_max[2] = {neg_inf(), neg_inf()}, run_sum[2] = {0.f, 0.f};
    mbarrier_wait(q_full, qr.parity());
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
      const bool last = kb + kKeys >= n;
      if (last && leader) mbarrier_arrive(q_empty);  // the row's Q is read
      // The chunk's softmax, split by keys: warpgroup 0 takes keys 0-15 (j = 0, 1 of a
      // thread's fragment: s[k] holds key kb + 8 (k >> 2) + 2 tq + (k & 1) of head
      // r0 + 8 ((k >> 1) & 1)), warpgroup 1 keys 16-31 (j = 2, 3), each adding the quarters
      // ((q0 + q1) + q2) + q3 as the mma.sync kernel does, with the other's halves through
      // shared memory; the row's max and sum combine across both in the mma.sync kernel's
      // order (max is exact; the sum runs key by key, warpgroup 0's half first).
      if (wg == 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          x01[i * 128] = make_float2((0.f + a[0][8 + 2 * i]) + a[1][8 + 2 * i],
                                     (0.f + a[0][9 + 2 * i]) + a[1][9 + 2 * i]);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          x23[i * 128] = make_float2(a[0][2 * i], a[0][2 * i + 1]);
          x23[(4 + i) * 128] = make_float2(a[1][2 * i], a[1][2 * i + 1]);
        }
      }
      named_barrier_sync(kConsumerBar, kConsumers);  // the halves in
      float sv[8];  // this warpgroup's scores: sv[kk] is s[kk + 8 wg]
      // (the accumulators indexed by constants only: a runtime index would put them in local
      // memory)
      if (wg == 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 q2 = x23[i * 128], q3 = x23[(4 + i) * 128];
          sv[2 * i] = (((0.f + a[0][2 * i]) + a[1][2 * i]) + q2.x) + q3.x;
          sv[2 * i + 1] = (((0.f + a[0][2 * i + 1]) + a[1][2 * i + 1]) + q2.y) + q3.y;
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 o01 = x01[i * 128];
          sv[2 * i] = (o01.x + a[0][8 + 2 * i]) + a[1][8 + 2 * i];
          sv[2 * i + 1] = (o01.y + a[0][9 + 2 * i]) + a[1][9 + 2 * i];
        }
      }
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) {
        const int64_t key = kb + 16 * wg + 8 * (kk >> 2) + 2 * tq + (kk & 1);
        sv[kk] = key < n ? sv[kk] * p.scale : neg_inf();
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = fmaxf(fmaxf(sv[2 * r], sv[2 * r + 1]), fmaxf(sv[2 * r + 4], sv[2 * r + 5]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        if (tq == 0) xmax[wg * kRows + r0 + 8 * r] = mx;
      }
      named_barrier_sync(kConsumerBar, kConsumers);  // both halves' maxima in
      float nmax[2], half_sum[2];
      unsigned char* ps = smem + kOffP;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int rr = r0 + 8 * r;
        nmax[r] = fmaxf(run_max[r], fmaxf(xmax[rr], xmax[kRows + rr]));
        float sum = 0.f;
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = sv[4 * jj + 2 * r + e];
            x = nmax[r] == neg_inf() ? 0.f : expf(x - nmax[r]);
            sum += x;
          }
        half_sum[r] = sum;
        // P's fp16 (the A operand, K-major: head rr's keys in its 128-byte row).
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int j = jj + 2 * wg;
          *reinterpret_cast<uint32_t*>(ps + rr * 128 + ((j ^ (rr & 7)) << 4) + tq * 4) =
              half2_bits(__floats2half2_rn(sv[4 * jj + 2 * r], sv[4 * jj + 2 * r + 1]));
        }
      }
      if (wg == 0) psum[0] = make_float2(half_sum[0], half_sum[1]);
      fence_proxy_async_smem();                      // P, for wgmma's reads
      named_barrier_sync(kConsumerBar, kConsumers);  // P and warpgroup 0's half sums in
      // The online softmax's rescale (and for warpgroup 1, which keeps the row's sum, the
      // chunk's sum: warpgroup 0's half continued over its own keys, then the lanes), then P V
      // over this warpgroup's 256 dims.
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float corr = run_max[r] == neg_inf() ? 0.f : expf(run_max[r] - nmax[r]);
        if (wg == 1) {
          float sum = r ? psum[0].y : psum[0].x;
#pragma unroll
          for (int jj = 0; jj < 2; ++jj)
#pragma unroll
            for (int e = 0; e < 2; ++e) sum += sv[4 * jj + 2 * r + e];
          sum += __shfl_xor_sync(0xffffffffu, sum, 1);
          sum += __shfl_xor_sync(0xffffffffu, sum, 2);
          run_sum[r] = run_sum[r] * corr + sum;
        }
        run_max[r] = nmax[r];
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
    if (n == 0 && leader) mbarrier_arrive(q_empty);
    ++qr.use;
    // Warpgroup 1 kept the row's sums; warpgroup 0's epilogue takes them from it (the halves
    // alternate by row, so a row without keys cannot overwrite one still being read).
    if (wg == 1 && tq == 0) {
      fin_sum[parity * kRows + r0] = run_sum[0];
      fin_sum[parity * kRows + r0 + 8] = run_sum[1];
    }
    named_barrier_sync(kConsumerBar, kConsumers);
    if (wg == 0) {
      run_sum[0] = fin_sum[parity * kRows + r0];
      run_sum[1] = fin_sum[parity * kRows + r0 + 8];
    }
    parity ^= 1;
    // The de-rotation's table for this row (the last row's epilogue is past the barriers above
    // or, for a row without keys, this one).
    if (p.o.rope_pos) {
      named_barrier_sync(kConsumerBar, kConsumers);
      if (tid < p.o.rope_R) rope_table(p.o.rope_pos[m], p.o.rope_freq, p.o.rope_R, rope_cs);
      named_barrier_sync(kConsumerBar, kConsumers);
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
