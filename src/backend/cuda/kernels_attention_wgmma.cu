// Shared-KV attention with sinks for prefill-sized calls on Hopper's warpgroup MMA (wgmma,
// sm_90a): flash_attention_kernel's arithmetic (kernels_flash_attention.cu) in the same order,
// so the same bits, with the tensor cores fed by 64 x 64 and 64 x 256 products instead of
// m16n8 ones. One block per query row, its 64 heads the MMA's M, two warpgroups; the keys go by
// super-chunks of 128:
//   S:  for each 64-dim slice of the head (a stage: Q's slice converted to fp16 hi / lo, the
//       128 keys' slice as the halves launch_split_keys made, by cp.async, double-buffered),
//       warpgroup w multiplies Q by keys [64 w, 64 w + 64): hi*hi + hi*lo + lo*hi per k16
//       step into one accumulator per 128-dim quarter, the quarters then added in order, as the
//       mma.sync kernel's four warps and their shared-memory sum do;
//   softmax: per 32-key chunk, in the chunk order of the mma.sync kernel (its chunk maxima
//       exchanged through shared memory), P's fp16 hi / lo written to shared memory;
//   PV: 16 keys at a time (a stage: all 512 dims of their halves), warpgroup w adds P V over
//       its 256 output dims, the keys' 128-byte rows read MN-major (the same rows as in S).
// The bits match the mma.sync kernel's because each output adds the same k16 products in the
// same order into one fp32 accumulator (wgmma's k16 step rounds as mma.sync's does: the
// expert kernels showed it; AttentionWgmmaIsTheMmaSyncKernel and
// PrefillSizedCallsMatchSmallerCalls check it here). Two buffers of each stage kind fill the
// shared memory, so one stage is in flight and both warpgroups step through it together: ncu
// finds the kernel bound by that (L2 and the tensor cores both under a third busy; docs/perf.md).
// With q_inv, q holds the heads before their unweighted RMSNorm and RoPE (rms_norm_rope's
// input) and q_inv their scales (launch_rms_scales: a read of the queries instead of
// rms_norm_rope's read and write); the block applies both as it converts Q's slices, so the
// same values reach the MMAs.
#include "backend/cuda/attention_keys.cuh"
#include "backend/cuda/half_split.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace deepinfer::cuda {

namespace {

constexpr int kHd = 512;     // head dim (the only one taken)
constexpr int kRows = 64;    // heads: the MMA's M
constexpr int kSuper = 128;  // keys per super-chunk, 64 per warpgroup in S
constexpr int kChunk = 32;   // the mma.sync kernel's softmax chunk
constexpr int kChunks = kSuper / kChunk;
constexpr int kThreads = 256;
constexpr int kVKeys = 16;       // keys per PV stage (one k16 step)
constexpr int kQNormRopeR = 32;  // kQNorm: the rotated pairs, the last 64-dim slice (V4's)
// Shared memory, bytes; every MMA tile 1024-aligned. Rows are 128 bytes (64 fp16) with their
// 16-byte chunks swizzled by the row (chunk c of row r at c ^ (r % 8)).
constexpr int kQPart = 2 * kRows * 128;              // Q's 64-dim slice, hi then lo: 16 KiB
constexpr int kKPart = 2 * kSuper * 128;             // the keys' slice, hi then lo: 32 KiB
constexpr int kSStage = kQPart + kKPart;             // 48 KiB
constexpr int kVHalf = (kHd / 64) * kVKeys * 128;    // 16 keys' hi (or lo): 8 slices of 2 KiB
constexpr int kVStage = 2 * kVHalf;                  // 32 KiB
constexpr int kPHalf = (kSuper / 64) * kRows * 128;  // P's hi (or lo): 2 key slices of 8 KiB
constexpr int kOffV = 2 * kSStage, kOffP = kOffV + 2 * kVStage, kOffMax = kOffP + 2 * kPHalf;
constexpr int kOffSum = kOffMax + kChunks * kRows * 4, kOffPtr = kOffSum + kChunks * kRows * 4;
constexpr int kOffRope = kOffPtr + 2 * kSuper * 8;
constexpr int kOffInv = kOffRope + kHd * 4;                      // kQNorm: the heads' scales
constexpr int kOffQRaw = kOffInv + kRows * 4;                    // Q's next slice as fp32: 16 KiB
constexpr size_t kSmemBytes = kOffQRaw + kRows * 64 * 4 + 1024;  // + alignment slack

struct WgmmaAttnParams {
  const float* q;  // [M, 64, 512]
  const AttnRow* rows;
  int64_t window;
  const int32_t* list;
  const int32_t* count;
  int64_t Kmax;
  const float* sinks;
  float scale;
  const float* q_inv;  // kQNorm: q is rms_norm_rope's input, these its rows' scales [M, 64]
  int32_t* err;
  AttnOutput o;
};

template <bool kQNorm>
__global__ void __launch_bounds__(kThreads, 1) attention_wgmma_kernel(WgmmaAttnParams p) {
  wait_for_prior_grid();
#if DI_HAVE_WGMMA
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const uint32_t sbase = smem_u32(smem);
  float* cmax = reinterpret_cast<float*>(smem + kOffMax);  // [chunk][row]
  float* csum = reinterpret_cast<float*>(smem + kOffSum);
  const uint16_t** kptr = reinterpret_cast<const uint16_t**>(smem + kOffPtr);  // [2][128]
  float* rope_cs = reinterpret_cast<float*>(smem + kOffRope);
  float* qraw = reinterpret_cast<float*>(smem + kOffQRaw);    // [64 rows][64 dims] fp32
  float* q_scale = reinterpret_cast<float*>(smem + kOffInv);  // kQNorm: p.q_inv of row m

  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int tq = lane & 3, r0 = warp * 16 + (lane >> 2);  // accumulator rows r0, r0 + 8
  const int64_t m = blockIdx.x;
  const AttnRow& row = p.rows[m];
  // The row's key set waits in shared memory (registers go to the accumulators).
  __shared__ KeySet keys;
  if (tid == 0) keys = key_set(m, kHd, row, p.window, p.list, p.count, p.Kmax, true, p.err);
  __syncthreads();
  const int64_t n = keys.nw + keys.nc;
  const int supers = static_cast<int>((n + kSuper - 1) / kSuper);
  const float* qrow = p.q + m * kRows * kHd;
  const bool derotate = p.o.rope_pos != nullptr;
  if (derotate) rope_table(p.o.rope_pos[m], p.o.rope_freq, p.o.rope_R, rope_cs);
  if (kQNorm && tid < kRows) q_scale[tid] = p.q_inv[m * kRows + tid];  // read after a barrier

  auto key_ptr = [&](int64_t j) -> const uint16_t* {
    return j < n ? keys.halves_at(j, keys.entry(j)) : nullptr;
  };
  // Q's slice st: each thread copies 16 floats into the raw buffer (load_q, cp.async) and later
  // converts the same 16 to halves (store_q), so no barrier sits between the two.
  auto load_q = [&](int st) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = u * kThreads + tid;
      cp_async16(qraw + i * 4, qrow + (i >> 4) * kHd + st * 64 + (i & 15) * 4, true);
    }
  };
  // kQNorm: rms_norm4_kernel's scaling, then its rotation of the last slice's pairs (by the
  // de-rotation's table: the same cosine, the sine negated back).
  auto store_q = [&](int b, int st) {
    unsigned char* qs = smem + b * kSStage;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = u * kThreads + tid, h = i >> 4, c4 = i & 15;
      const int off = h * 128 + (((c4 >> 1) ^ (h & 7)) << 4) + (c4 & 1) * 8;
      float4 v = *reinterpret_cast<const float4*>(qraw + i * 4);
      if (kQNorm) {
        v = scale4(v, q_scale[h], nullptr, 0);
        if (st == kHd / 64 - 1) {  // the rotated dims (2 R == 64)
          const int pr = c4 * 2;
          rotate_by(v.x, v.y, rope_cs[pr], -rope_cs[kQNormRopeR + pr]);
          rotate_by(v.z, v.w, rope_cs[pr + 1], -rope_cs[kQNormRopeR + pr + 1]);
        }
      }
      const float x[4] = {v.x, v.y, v.z, v.w};
      store_hi_lo(qs + off, qs + kRows * 128 + off, x);
    }
  };
  // The 128 keys' slice st (pointer slot `slot`) into S stage b; absent keys read as zeros.
  auto issue_k = [&](int slot, int st, int b) {
    unsigned char* ks = smem + b * kSStage + kQPart;
    const uint16_t* const* kp = kptr + slot * kSuper;
#pragma unroll
    for (int u = 0; u < kKPart / 16 / kThreads; ++u) {
      const int i = u * kThreads + tid, hl = i >> 10, r = (i >> 3) & 127, c = i & 7;
      const uint16_t* src = kp[r];
      cp_async16(ks + hl * (kSuper * 128) + r * 128 + ((c ^ (r & 7)) << 4),
                 src ? static_cast<const void*>(src + hl * kHd + st * 64 + c * 8) : p.q,
                 src != nullptr);
    }
    cp_async_commit();
  };
  // Keys [16 v, 16 v + 16) of the super-chunk, all dims, into PV stage b.
  auto issue_v = [&](int slot, int v, int b) {
    unsigned char* vs = smem + kOffV + b * kVStage;
    const uint16_t* const* kp = kptr + slot * kSuper + v * kVKeys;
#pragma unroll
    for (int u = 0; u < kVStage / 16 / kThreads; ++u) {
      const int i = u * kThreads + tid, r = i >> 7, hl = (i >> 6) & 1, c8 = i & 63;
      const uint16_t* src = kp[r];
      cp_async16(
          vs + hl * kVHalf + (c8 >> 3) * (kVKeys * 128) + r * 128 + (((c8 & 7) ^ (r & 7)) << 4),
          src ? static_cast<const void*>(src + hl * kHd + c8 * 8) : p.q, src != nullptr);
    }
    cp_async_commit();
  };

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float run_max[2] = {neg_inf(), neg_inf()}, run_sum[2] = {0.f, 0.f};
  int ss = 0, vc = 0;  // S / PV stages issued so far (their buffers alternate)
  if (supers > 0) {
    if (tid < kSuper) kptr[tid] = key_ptr(tid);
    __syncthreads();
    load_q(0);
    issue_k(0, 0, 0);
  }
  for (int sc = 0; sc < supers; ++sc) {
    const int slot = sc & 1;
    const int64_t kb = int64_t{sc} * kSuper;
    const bool s_live = kb + 64 * wg < n;  // this warpgroup's 64 keys hold any
    // S: each 128-dim quarter's accumulator (acc) added in order into the running sums, which
    // wait in the P buffer (free until the softmax; each thread keeps to its own elements).
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.f;
    float2* part = reinterpret_cast<float2*>(smem + kOffP) + tid;  // [16][threads]
#pragma unroll
    for (int st = 0; st < kHd / 64; ++st) {
      const int b = ss & 1;
      wgmma_wait<0>();  // this warpgroup's products of stage st - 1 are done
      wgmma_fence_operands(acc);
      if (st == 2 || st == 4 || st == 6) {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          // From 0, as the mma.sync kernel sums its quarters.
          const float2 prev = st == 2 ? make_float2(0.f, 0.f) : part[i * kThreads];
          part[i * kThreads] = make_float2(prev.x + acc[2 * i], prev.y + acc[2 * i + 1]);
          acc[2 * i] = acc[2 * i + 1] = 0.f;
        }
      }
      cp_async_wait_all();  // this thread's copies of stage st (its Q floats, its key chunks)
      store_q(b, st);
      fence_proxy_async_smem();
      __syncthreads();  // stage st landed; every stage st - 1 product is done (buffer b ^ 1 free)
      if (s_live) {
        wgmma_fence();
        const uint32_t qa = sbase + b * kSStage;
        const uint32_t ka = qa + kQPart + wg * 64 * 128;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const uint64_t qh = wgmma_desc_sw128(qa + k * 32);
          const uint64_t ql = wgmma_desc_sw128(qa + kRows * 128 + k * 32);
          const uint64_t kh = wgmma_desc_sw128(ka + k * 32);
          const uint64_t kl = wgmma_desc_sw128(ka + kSuper * 128 + k * 32);
          wgmma_m64n64k16_f16(acc, qh, kh);
          wgmma_m64n64k16_f16(acc, qh, kl);
          wgmma_m64n64k16_f16(acc, ql, kh);
        }
        wgmma_commit();
      }
      if (st + 1 < kHd / 64) {
        load_q(st + 1);
        issue_k(slot, st + 1, b ^ 1);
      } else {
        issue_v(slot, 0, vc & 1);
      }
      ++ss;
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    float* s = acc;  // the scores, in place
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float2 prev = part[i * kThreads];
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
    __syncthreads();
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
        *reinterpret_cast<uint32_t*>(ps + kPHalf + off) = pack_half2(a - hf.x, b - hf.y);
      }
    if (sc + 1 < supers && tid < kSuper)
      kptr[(slot ^ 1) * kSuper + tid] = key_ptr(kb + kSuper + tid);
    fence_proxy_async_smem();
    __syncthreads();  // P and the chunk sums are in; the next super-chunk's key rows known

    // PV over the chunks that hold keys (later ones would add exact zeros).
    const int64_t left = n - kb;
    const int live = left >= kSuper ? kChunks : static_cast<int>((left + kChunk - 1) / kChunk);
#pragma unroll
    for (int v = 0; v < 2 * kChunks; ++v) {
      if (v >= 2 * live) continue;  // block-uniform
      const int b = vc & 1;
      wgmma_wait<0>();
      wgmma_fence_operands(o);
      if ((v & 1) == 0) {  // a new chunk: the online softmax's rescale
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
      cp_async_wait_all();
      fence_proxy_async_smem();
      __syncthreads();  // stage v landed; every product of stage v - 1 is done
      wgmma_fence();
      const uint32_t pa = sbase + kOffP + (v >> 2) * (kRows * 128) + (v & 3) * 32;
      const uint32_t va = sbase + kOffV + b * kVStage + 4 * wg * (kVKeys * 128);
      const uint64_t ph = wgmma_desc_sw128(pa), pl = wgmma_desc_sw128(pa + kPHalf);
      const uint64_t vh = wgmma_desc_sw128_mn(va, kVKeys * 128, 1024);
      const uint64_t vl = wgmma_desc_sw128_mn(va + kVHalf, kVKeys * 128, 1024);
      wgmma_m64n256k16_f16_bmn(o, ph, vh);
      wgmma_m64n256k16_f16_bmn(o, ph, vl);
      wgmma_m64n256k16_f16_bmn(o, pl, vh);
      wgmma_commit();
      if (v + 1 < 2 * live) {
        issue_v(slot, v + 1, b ^ 1);
      } else if (sc + 1 < supers) {
        load_q(0);
        issue_k(slot ^ 1, 0, ss & 1);
      }
      ++vc;
    }
  }
  wgmma_wait<0>();
  wgmma_fence_operands(o);
  __syncthreads();  // the de-rotation table

  // Rows r0, r0 + 8 = heads; dims 256 wg + 8 j + 2 tq (+ 1).
  const int rot_first = derotate ? static_cast<int>(kHd - 2 * p.o.rope_R) : kHd;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r0 + 8 * r;
    const float sink = p.sinks[h], mx = fmaxf(run_max[r], sink);
    const float w = run_max[r] == neg_inf() ? 0.f : expf(run_max[r] - mx);
    const float den = run_sum[r] * w + expf(sink - mx);
    const float mul = w / den;
    const int64_t at = (m * kRows + h) * kHd;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int d = 256 * wg + 8 * j + 2 * tq;
      float v0 = o[4 * j + 2 * r] * mul, v1 = o[4 * j + 2 * r + 1] * mul;
      if (d >= rot_first) {
        const int i = (d - rot_first) / 2;
        rotate_by(v0, v1, rope_cs[i], rope_cs[p.o.rope_R + i]);
      }
      store_out_pair(p.o, at, d, v0, v1);
    }
  }
#endif
}

}  // namespace

bool attention_wgmma_supported(int64_t H, int64_t hd) {
  return H == kRows && hd == kHd;
}

bool attention_wgmma_norms_q(int64_t R) {
  return R == kQNormRopeR;
}

cudaError_t launch_attention_wgmma(const float* q, int64_t M, const AttnRow* rows, int64_t window,
                                   const int32_t* list, const int32_t* count, int64_t Kmax,
                                   const float* sinks, float scale, const float* q_inv,
                                   const AttnOutput& out, int32_t* err, cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  const bool q_norm = q_inv != nullptr;
  if (q_norm && (!out.rope_pos || out.rope_R != kQNormRopeR)) return cudaErrorInvalidValue;
  const void* dst = out.out ? static_cast<const void*>(out.out) : out.out_bf16;
  if ((out.out == nullptr) == (out.out_bf16 == nullptr) ||
      !attention_stores_pairs(kHd, dst, out.out_bf16 != nullptr) || M > 0x7fffffff ||
      (reinterpret_cast<uintptr_t>(q) & 15) != 0 || out.rope_R < 0 || 2 * out.rope_R > kHd ||
      (out.rope_pos && (!out.rope_freq || out.rope_R == 0)))
    return cudaErrorInvalidValue;
  const WgmmaAttnParams p{q, rows, window, list, count, Kmax, sinks, scale, q_inv, err, out};
  const auto kernel = q_norm ? attention_wgmma_kernel<true> : attention_wgmma_kernel<false>;
  static const cudaError_t attr[2] = {
      cudaFuncSetAttribute(attention_wgmma_kernel<false>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmemBytes)),
      cudaFuncSetAttribute(attention_wgmma_kernel<true>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmemBytes))};
  if (attr[q_norm] != cudaSuccess) return attr[q_norm];
  return launch_kernel(kernel, static_cast<unsigned>(M), kThreads, kSmemBytes, stream, p);
}

}  // namespace deepinfer::cuda
