// Shared-KV attention with sinks for prefill-sized calls on Hopper's warpgroup MMA (wgmma,
// sm_90a): flash_attention_kernel's arithmetic (kernels_flash_attention.cu) in the same order,
// so the same bits, with the tensor cores fed by 64 x 64 and 64 x 256 products instead of
// m16n8 ones. One block per query row, its 64 heads the MMA's M, warp-specialised: two consumer
// warpgroups run the MMAs and the softmax, a producer warpgroup streams their operands through
// two rings of stage slots by cp.async, each slot completing on a "full" mbarrier and released
// on an "empty" one, so up to three stages are in flight ahead of the MMAs (the two-buffer
// kernel before had one, and ncu found it bound by that: L2 and the tensor cores both under a
// third busy). The keys go by super-chunks of 128:
//   S:  for each 64-dim slice of the head (a stage: Q's slice and the 128 keys' slice, each as
//       fp16 hi / lo halves), warpgroup w multiplies Q by keys [64 w, 64 w + 64): hi*hi +
//       hi*lo + lo*hi per k16 step into one accumulator per 128-dim quarter, the quarters then
//       added in order, as the mma.sync kernel's four warps and their shared-memory sum do
//       (under set_attention_fp16_qp Q and P are their hi halves: the lo*hi products go, as
//       there, and Q's lo halves are not copied);
//   softmax: per 32-key chunk, in the chunk order of the mma.sync kernel (its chunk maxima
//       exchanged through shared memory), P's fp16 hi / lo written to shared memory;
//   PV: 16 keys at a time (a stage: all 512 dims of their halves), warpgroup w adds P V over
//       its 256 output dims, the keys' 128-byte rows read MN-major (the same rows as in S).
// The bits match the mma.sync kernel's because each output adds the same k16 products in the
// same order into one fp32 accumulator (wgmma's k16 step rounds as mma.sync's does: the
// expert kernels showed it; AttentionWgmmaIsTheMmaSyncKernel and
// PrefillSizedCallsMatchSmallerCalls check it here). Q comes as halves made once per row by
// attention_q_halves_kernel (normalised and rotated there for raw queries: rms_norm_rope's
// values), so the producer only copies.
#include "backend/cuda/attention_wgmma.cuh"
#include "backend/cuda/half_split.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tma_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kHd = kWgHd, kRows = kWgRows, kChunk = kWgChunk;
constexpr int kSuper = 128;  // keys per super-chunk, 64 per warpgroup in S
constexpr int kChunks = kSuper / kChunk;
constexpr int kConsumers = 256, kProducers = 128, kThreads = kConsumers + kProducers;
constexpr int kVKeys = 16;  // keys per PV stage (one k16 step)
// Registers per thread after the split, within what the launch gives the block (168 a thread
// of 384: setmaxnreg.inc waits for registers the block holds): the producer only computes
// addresses.
constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
constexpr int kProducerRegs = 56, kConsumerRegs = 224;
static_assert(kProducerRegs * kProducers + kConsumerRegs * kConsumers <= kLaunchRegs * kThreads,
              "the block's registers");
// The consumers' named barrier (0 is __syncthreads'): their softmax exchanges.
constexpr uint32_t kConsumerBar = 1;
// Shared memory, bytes; every MMA tile 1024-aligned. Rows are 128 bytes (64 fp16) with their
// 16-byte chunks swizzled by the row (chunk c of row r at c ^ (r % 8)).
constexpr int kQSlots = 3, kKvSlots = 4;
constexpr int kQPrefetchAfter = 2;       // P V stages before the next super-chunk's Q slices go out
constexpr int kQSlot = 2 * kRows * 128;  // Q's 64-dim slice, hi then lo: 16 KiB
constexpr int kKvSlot = 2 * kSuper * 128;          // the keys' slice, hi then lo: 32 KiB
constexpr int kVHalf = (kHd / 64) * kVKeys * 128;  // 16 keys' hi (or lo): 8 slices of 2 KiB
static_assert(2 * kVHalf == kKvSlot, "a PV stage fills a key slot");
constexpr int kPHalf = (kSuper / 64) * kRows * 128;  // P's hi (or lo): 2 key slices of 8 KiB
constexpr int kOffKv = kQSlots * kQSlot, kOffP = kOffKv + kKvSlots * kKvSlot;
constexpr int kOffMax = kOffP + 2 * kPHalf;
constexpr int kOffSum = kOffMax + kChunks * kRows * 4;
constexpr int kOffRope = kOffSum + kChunks * kRows * 4;
constexpr int kOffBar = kOffRope + kHd * 4;
constexpr size_t kSmemBytes = kOffBar + 2 * (kQSlots + kKvSlots) * 8 + 1024;  // + alignment

// The PV stages of a super-chunk starting at key kb: two per 32-key chunk holding keys (later
// chunks would add exact zeros).
__device__ __forceinline__ int pv_stages(int64_t n, int64_t kb) {
  const int64_t left = n - kb;
  return 2 * (left >= kSuper ? kChunks : static_cast<int>((left + kChunk - 1) / kChunk));
}

// kSplitA: p.split_a as a constant, so that each stage's wgmmas are one straight run (a branch
// between them makes ptxas wait out every wgmma before the next, C7519).
template <bool kSplitA>
__global__ void __launch_bounds__(kThreads, 1) attention_wgmma_kernel(WgmmaAttnParams p) {
  wait_for_prior_grid();
#if DI_HAVE_WGMMA
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const uint32_t sbase = smem_u32(smem);
  float* cmax = reinterpret_cast<float*>(smem + kOffMax);  // [chunk][row]
  float* csum = reinterpret_cast<float*>(smem + kOffSum);
  float* rope_cs = reinterpret_cast<float*>(smem + kOffRope);
  uint64_t* q_full = reinterpret_cast<uint64_t*>(smem + kOffBar);
  uint64_t* q_empty = q_full + kQSlots;
  uint64_t* kv_full = q_empty + kQSlots;
  uint64_t* kv_empty = kv_full + kKvSlots;

  const int tid = threadIdx.x;
  const int64_t m = blockIdx.x;
  const AttnRow& row = p.rows[m];
  // The row's key set waits in shared memory (registers go to the accumulators).
  __shared__ KeySet keys;
  if (tid == 0) {
    keys = key_set(m, kHd, row, p.window, p.list, p.count, p.Kmax, true, p.err);
    for (int s = 0; s < kQSlots; ++s) {
      mbarrier_init(&q_full[s], kProducers);  // every producer thread's copies
      mbarrier_init(&q_empty[s], 2);          // both consumer warpgroups
    }
    for (int s = 0; s < kKvSlots; ++s) {
      mbarrier_init(&kv_full[s], kProducers);
      mbarrier_init(&kv_empty[s], 2);
    }
  }
  const bool derotate = p.o.rope_pos != nullptr;
  if (derotate) rope_table(p.o.rope_pos[m], p.o.rope_freq, p.o.rope_R, rope_cs);
  __syncthreads();
  const int64_t n = keys.nw + keys.nc;
  const int supers = static_cast<int>((n + kSuper - 1) / kSuper);

  if (tid >= kConsumers) {
    // Producer: the consumers' stage sequence, each stage's copies into its ring slots.
    setmaxnreg_dec<kProducerRegs>();
    const int t = tid - kConsumers;
    const uint16_t* qrow = p.q + m * kRows * 2 * kHd;
    Ring<kQSlots> qr;
    Ring<kKvSlots> kr;
    // Thread t copies 16-byte chunk t % 8 of key rows t / 8 + 16 j (j < 8) of each super-chunk,
    // all their slices and both halves: eight row pointers held for the whole super-chunk (a
    // warp's copy covers four rows' lines). In P V stage v its row is t / 8 + 16 v.
    const int c = t & 7, r8 = t >> 3;
    // Q's slice st (chunk c of heads t / 8 + 16 u, u < 4, in both halves) into the next Q slot.
    auto issue_q = [&](int st) {
      mbarrier_wait(&q_empty[qr.slot()], qr.parity() ^ 1);
      unsigned char* qs = smem + qr.slot() * kQSlot;
#pragma unroll
      for (int u = 0; u < kQSlot / 16 / kProducers; ++u) {
        const int hl = u >> 2, h = r8 + 16 * (u & 3);
        if (hl == 1 && !kSplitA) break;  // the lo halves: no MMA reads them
        cp_async16(qs + hl * (kRows * 128) + h * 128 + ((c ^ (h & 7)) << 4),
                   qrow + h * 2 * kHd + hl * kHd + st * 64 + c * 8, true);
      }
      cp_async_mbarrier_arrive(&q_full[qr.slot()]);
      ++qr.use;
    };
    // The list entries of this thread's rows of super-chunk sc (loaded a super-chunk ahead, so
    // that their latency is not the next one's first stage's).
    int32_t entry[8];
    auto load_entries = [&](int sc) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int64_t key = int64_t{sc} * kSuper + r8 + 16 * j;
        entry[j] = key < n ? keys.entry(key) : 0;
      }
    };
    load_entries(0);
    for (int sc = 0; sc < supers; ++sc) {
      const int64_t kb = int64_t{sc} * kSuper;
      const uint16_t* src[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int64_t key = kb + r8 + 16 * j;
        src[j] = key < n ? keys.halves_at(key, entry[j]) : nullptr;
      }
      if (sc + 1 < supers) load_entries(sc + 1);
      for (int st = 0; st < kHd / 64; ++st) {
        // The first kQSlots slices went out during the last super-chunk's P V stages.
        if (sc == 0 || st >= kQSlots) issue_q(st);
        // The 128 keys' slice st; absent keys land as zeros.
        mbarrier_wait(&kv_empty[kr.slot()], kr.parity() ^ 1);
        unsigned char* ks = smem + kOffKv + kr.slot() * kKvSlot;
#pragma unroll
        for (int u = 0; u < kKvSlot / 16 / kProducers; ++u) {
          const int hl = u >> 3, j = u & 7, r = r8 + 16 * j;
          cp_async16(ks + hl * (kSuper * 128) + r * 128 + ((c ^ (r & 7)) << 4),
                     src[j] ? static_cast<const void*>(src[j] + hl * kHd + st * 64 + c * 8) : p.q,
                     src[j] != nullptr);
        }
        cp_async_mbarrier_arrive(&kv_full[kr.slot()]);
        ++kr.use;
      }
      // Keys [16 v, 16 v + 16) of the super-chunk, all dims, for P V: row t / 8 of the stage,
      // chunk c of each of its 64-dim slices, both halves. After its first two stages, the next
      // super-chunk's first Q slices (the Q slots free as the consumers finish S; a stage's
      // arrival waits for every earlier copy of the thread, so not before the first ones).
      const int stages = pv_stages(n, kb);
      const bool prefetch_q = sc + 1 < supers;
#pragma unroll
      for (int v = 0; v < 2 * kChunks; ++v) {
        if (v >= stages) break;
        if (prefetch_q && v == kQPrefetchAfter)
          for (int st = 0; st < kQSlots; ++st) issue_q(st);
        mbarrier_wait(&kv_empty[kr.slot()], kr.parity() ^ 1);
        unsigned char* vs = smem + kOffKv + kr.slot() * kKvSlot;
        const uint16_t* row_src = src[v];
#pragma unroll
        for (int u = 0; u < kKvSlot / 16 / kProducers; ++u) {
          const int hl = u >> 3, slice = u & 7;
          cp_async16(
              vs + hl * kVHalf + slice * (kVKeys * 128) + r8 * 128 + ((c ^ (r8 & 7)) << 4),
              row_src ? static_cast<const void*>(row_src + hl * kHd + slice * 64 + c * 8) : p.q,
              row_src != nullptr);
        }
        cp_async_mbarrier_arrive(&kv_full[kr.slot()]);
        ++kr.use;
      }
      if (prefetch_q && stages <= kQPrefetchAfter)
        for (int st = 0; st < kQSlots; ++st) issue_q(st);
    }
    cp_async_wait_all();
    return;
  }

  // Consumers.
  setmaxnreg_inc<kConsumerRegs>();
  const int wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int tq = lane & 3, r0 = warp * 16 + (lane >> 2);  // accumulator rows r0, r0 + 8
  const bool leader = (tid & 127) == 0;                   // arrives for its warpgroup
  Ring<kQSlots> qr;
  Ring<kKvSlots> kr;
  // The slots of the stage whose MMAs may still run (released once they are done).
  int held_q = -1, held_kv = -1;
  auto release = [&]() {
    if (leader) {
      if (held_q >= 0) mbarrier_arrive(&q_empty[held_q]);
      if (held_kv >= 0) mbarrier_arrive(&kv_empty[held_kv]);
    }
    held_q = held_kv = -1;
  };

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float run_max[2] = {neg_inf(), neg_inf()}, run_sum[2] = {0.f, 0.f};
  for (int sc = 0; sc < supers; ++sc) {
    const int64_t kb = int64_t{sc} * kSuper;
    const bool s_live = kb + 64 * wg < n;  // this warpgroup's 64 keys hold any
    // Both warpgroups' P V of the last super-chunk read P, which the running sums overwrite.
    if (sc > 0) named_barrier_sync(kConsumerBar, kConsumers);
    // S: each 128-dim quarter's accumulator (acc) added in order into the running sums, which
    // wait in the P buffer (free until the softmax; each thread keeps to its own elements).
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.f;
    float2* part = reinterpret_cast<float2*>(smem + kOffP) + tid;  // [16][consumers]
#pragma unroll
    for (int st = 0; st < kHd / 64; ++st) {
      if (st == 2 || st == 4 || st == 6) {
        wgmma_wait<0>();  // the quarter's products are done
        wgmma_fence_operands(acc);
        release();
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          // From 0, as the mma.sync kernel sums its quarters.
          const float2 prev = st == 2 ? make_float2(0.f, 0.f) : part[i * kConsumers];
          part[i * kConsumers] = make_float2(prev.x + acc[2 * i], prev.y + acc[2 * i + 1]);
          acc[2 * i] = acc[2 * i + 1] = 0.f;
        }
      }
      mbarrier_wait(&q_full[qr.slot()], qr.parity());
      mbarrier_wait(&kv_full[kr.slot()], kr.parity());
      fence_proxy_async_smem();  // the producer's cp.async writes, for wgmma's reads
      if (s_live) {
        wgmma_fence_operands(acc);  // the partial sums' zeroing stays before the fence
        wgmma_fence();
        const uint32_t qa = sbase + qr.slot() * kQSlot;
        const uint32_t ka = sbase + kOffKv + kr.slot() * kKvSlot + wg * 64 * 128;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const uint64_t qh = wgmma_desc_sw128(qa + k * 32);
          const uint64_t ql = wgmma_desc_sw128(qa + kRows * 128 + k * 32);
          const uint64_t kh = wgmma_desc_sw128(ka + k * 32);
          const uint64_t kl = wgmma_desc_sw128(ka + kSuper * 128 + k * 32);
          wgmma_m64n64k16_f16(acc, qh, kh);
          wgmma_m64n64k16_f16(acc, qh, kl);
          if constexpr (kSplitA) wgmma_m64n64k16_f16(acc, ql, kh);
        }
        wgmma_commit();
        wgmma_wait<1>();  // the previous stage's products are done
        wgmma_fence_operands(acc);
      } else {
        wgmma_wait<0>();
      }
      release();
      held_q = qr.slot();
      held_kv = kr.slot();
      ++qr.use;
      ++kr.use;
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    release();
    float* s = acc;  // the scores, in place
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float2 prev = part[i * kConsumers];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int k = 2 * i + e, j = k >> 2;
        const int64_t key = kb + 64 * wg + 8 * j + 2 * tq + e;
        s[k] = key < n ? ((e ? prev.y : prev.x) + acc[k]) * p.scale : neg_inf();
      }
    }

    // Softmax by 32-key chunks: this warpgroup's chunks are 2 wg and 2 wg + 1.
#pragma unroll
    for (int cl = 0; cl < 2; ++cl)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float* v = s + 16 * cl + 2 * r;
        float mx = fmaxf(fmaxf(v[0], v[1]), fmaxf(v[4], v[5]));
        mx = fmaxf(mx, fmaxf(fmaxf(v[8], v[9]), fmaxf(v[12], v[13])));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        if (tq == 0) cmax[(2 * wg + cl) * kRows + r0 + 8 * r] = mx;
      }
    named_barrier_sync(kConsumerBar, kConsumers);
    float nm[kChunks][2];  // the running max after each chunk
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float prev = run_max[r];
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        prev = fmaxf(prev, cmax[c * kRows + r0 + 8 * r]);
        nm[c][r] = prev;
      }
    }
#pragma unroll
    for (int cl = 0; cl < 2; ++cl)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float nmax = nm[2 * wg + cl][r];
        float sum = 0.f;
#pragma unroll
        for (int t = 0; t < 4; ++t)
#pragma unroll
          for (int i = 2 * r; i < 2 * r + 2; ++i) {
            float& x = s[16 * cl + 4 * t + i];
            x = nmax == neg_inf() ? 0.f : expf(x - nmax);
            sum += x;
          }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (tq == 0) csum[(2 * wg + cl) * kRows + r0 + 8 * r] = sum;
      }
    // P as fp16 hi / lo (the mma.sync kernel's A-fragment conversion), K-major: key slice wg.
    unsigned char* ps = smem + kOffP + wg * (kRows * 128);
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int rr = r0 + 8 * r, off = rr * 128 + ((j ^ (rr & 7)) << 4) + tq * 4;
        const float a = s[4 * j + 2 * r], b = s[4 * j + 2 * r + 1];
        const __half2 h = __floats2half2_rn(a, b);
        const float2 hf = __half22float2(h);
        *reinterpret_cast<uint32_t*>(ps + off) = half2_bits(h);
        if constexpr (kSplitA)
          *reinterpret_cast<uint32_t*>(ps + kPHalf + off) = pack_half2(a - hf.x, b - hf.y);
      }
    fence_proxy_async_smem();
    named_barrier_sync(kConsumerBar, kConsumers);  // P and the chunk sums are in

    const int stages = pv_stages(n, kb);
    for (int v = 0; v < stages; ++v) {
      if ((v & 1) == 0) {  // a new chunk: the online softmax's rescale, its products done
        wgmma_wait<0>();
        wgmma_fence_operands(o);
        release();
        const int c = v >> 1;
        float corr[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          corr[r] = run_max[r] == neg_inf() ? 0.f : expf(run_max[r] - nm[c][r]);
          run_sum[r] = run_sum[r] * corr[r] + csum[c * kRows + r0 + 8 * r];
          run_max[r] = nm[c][r];
        }
#pragma unroll
        for (int t = 0; t < 32; ++t) {
          o[4 * t] *= corr[0];
          o[4 * t + 1] *= corr[0];
          o[4 * t + 2] *= corr[1];
          o[4 * t + 3] *= corr[1];
        }
      }
      mbarrier_wait(&kv_full[kr.slot()], kr.parity());
      fence_proxy_async_smem();
      wgmma_fence_operands(o);  // the rescale stays before the fence
      wgmma_fence();
      const uint32_t pa = sbase + kOffP + (v >> 2) * (kRows * 128) + (v & 3) * 32;
      const uint32_t va = sbase + kOffKv + kr.slot() * kKvSlot + 4 * wg * (kVKeys * 128);
      const uint64_t ph = wgmma_desc_sw128(pa), pl = wgmma_desc_sw128(pa + kPHalf);
      const uint64_t vh = wgmma_desc_sw128_mn(va, kVKeys * 128, 1024);
      const uint64_t vl = wgmma_desc_sw128_mn(va + kVHalf, kVKeys * 128, 1024);
      wgmma_m64n256k16_f16_bmn(o, ph, vh);
      wgmma_m64n256k16_f16_bmn(o, ph, vl);
      if constexpr (kSplitA) wgmma_m64n256k16_f16_bmn(o, pl, vh);
      wgmma_commit();
      if (v & 1) {
        wgmma_wait<1>();  // the chunk's first stage is done
        wgmma_fence_operands(o);
        release();
      }
      held_kv = kr.slot();
      ++kr.use;
    }
    wgmma_wait<0>();
    wgmma_fence_operands(o);
    release();
  }

  store_wgmma_rows(p, m, wg, r0, tq, o, run_max, run_sum, rope_cs);
#else
  __trap();  // launched only on sm_90a devices (wgmma_available)
#endif
}

// One block of 128 threads per head row (M x 64 of them), a float4 each: the row as fp16 hi /
// lo halves (hi then lo, 512 each; without `lo` the hi halves alone, set_attention_fp16_qp's). With
// eps, first rms_norm4_kernel's unweighted norm and its RoPE of the last 2 R dims (rms_norm_rope's
// values: the same sums, scale4 and rotate_pair).
__global__ void __launch_bounds__(kHd / 4)
    attention_q_halves_kernel(const float* q, bool norm, float eps, const int32_t* pos,
                              const float* freq, int R, bool lo, uint16_t* out) {
  wait_for_prior_grid();
  __shared__ float red[32];
  const int64_t i = threadIdx.x * int64_t{4}, r = blockIdx.x;
  float4 v = *reinterpret_cast<const float4*>(q + r * kHd + i);
  if (norm) {
    v = scale4(v, row_inv_rms4(v, kHd, eps, red), nullptr, 0);
    const int64_t first = kHd - 2 * R;
    if (pos && i >= first) {
      const int32_t at = pos[r / kRows];
      const int64_t pair = (i - first) / 2;
      rotate_pair(v.x, v.y, at, freq[pair], 1.f);
      rotate_pair(v.z, v.w, at, freq[pair + 1], 1.f);
    }
  }
  const float x[4] = {v.x, v.y, v.z, v.w};
  if (lo)
    store_hi_lo(out + r * 2 * kHd + i, out + r * 2 * kHd + kHd + i, x);
  else
    store_hi(out + r * 2 * kHd + i, x);
}

bool onepass = true;  // DEEPINFER_CUDA_ATTENTION_ONEPASS's default

}  // namespace

void set_attention_onepass(bool on) {
  onepass = on;
}

bool attention_onepass() {
  return onepass;
}

bool attention_wgmma_supported(int64_t H, int64_t hd) {
  return H == kRows && hd == kHd;
}

bool attention_wgmma_norms_q(int64_t R) {
  return R == kWgQNormRopeR;
}

cudaError_t launch_attention_q_halves(const float* q, int64_t M, const float* q_eps,
                                      const int32_t* positions, const float* inv_freq, int64_t R,
                                      uint16_t* halves, cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if (M * kRows > 0x7fffffff || (reinterpret_cast<uintptr_t>(q) & 15) != 0 ||
      (reinterpret_cast<uintptr_t>(halves) & 7) != 0 ||
      (q_eps && (!positions || !inv_freq || !attention_wgmma_norms_q(R))))
    return cudaErrorInvalidValue;
  return launch_kernel(attention_q_halves_kernel, static_cast<unsigned>(M * kRows), kHd / 4, 0,
                       stream, q, q_eps != nullptr, q_eps ? *q_eps : 0.f, positions, inv_freq,
                       static_cast<int>(R), !attention_fp16_qp(), halves);
}

cudaError_t launch_attention_wgmma(const uint16_t* q_halves, int64_t M, const AttnRow* rows,
                                   int64_t window, const int32_t* list, const int32_t* count,
                                   int64_t Kmax, const float* sinks, float scale,
                                   const AttnOutput& out, int32_t* err, int sms,
                                   cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  const void* dst = out.out ? static_cast<const void*>(out.out) : out.out_bf16;
  if ((out.out == nullptr) == (out.out_bf16 == nullptr) ||
      !attention_stores_pairs(kHd, dst, out.out_bf16 != nullptr) || M > 0x7fffffff ||
      (reinterpret_cast<uintptr_t>(q_halves) & 15) != 0 || out.rope_R < 0 || 2 * out.rope_R > kHd ||
      (out.rope_pos && (!out.rope_freq || out.rope_R == 0)))
    return cudaErrorInvalidValue;
  const WgmmaAttnParams p{q_halves, rows,  M,     window, list, count,
                          Kmax,     sinks, scale, err,    out,  !attention_fp16_qp()};
  if (!p.split_a && onepass) return launch_attention_wgmma_onepass(p, sms, stream);
  auto* kernel = p.split_a ? attention_wgmma_kernel<true> : attention_wgmma_kernel<false>;
  static const cudaError_t attr[2] = {
      cudaFuncSetAttribute(attention_wgmma_kernel<false>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmemBytes)),
      cudaFuncSetAttribute(attention_wgmma_kernel<true>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmemBytes))};
  if (attr[p.split_a] != cudaSuccess) return attr[p.split_a];
  return launch_kernel(kernel, static_cast<unsigned>(M), kThreads, kSmemBytes, stream, p);
}

}  // namespace deepinfer::cuda
