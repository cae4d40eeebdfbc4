// The device sampler's per-token arithmetic and radix layout, shared by the kernels (nvcc, C++17)
// and the host emulation test. Each function reproduces sampler.cpp's roundings bit for bit.
//
// Only tokens of positive weight can be drawn, and they decide every cut: a token of weight 0
// (p < 2^-40) comes after all of them in the order (p desc, id asc), so it neither moves a top_k
// cut among them nor adds mass. The device therefore works on the "candidates": p >= 2^-40 and
// p >= min_p. Their float bits lie in [kPMinBits, kPOneBits] and order like p, so
// u = bits - kPMinBits (29 bits) is the radix key, in three levels:
//   level 1: u >> 17 (0..2560)   level 2: (u >> 6) & 2047   level 3: u & 63
// and ties in p resolve by id, ascending.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>
#include <limits>

#include "sampling/cuda/sampler_kernels.h"
#include "sampling/rng.h"
#include "sampling/sampling_exp.h"

namespace deepinfer::sampling::cuda {

inline constexpr uint32_t kPMinBits = 0x2B800000u;  // 2^-40: the smallest p of weight 1
inline constexpr uint32_t kPOneBits = 0x3F800000u;  // 1.0f
inline constexpr int kL1Shift = 17;
inline constexpr int kL1Buckets = 3072;  // >= ((kPOneBits - kPMinBits) >> 17) + 1 = 2561
inline constexpr int kL2Shift = 6;
inline constexpr int kL2Buckets = 2048;
inline constexpr int kL3Buckets = 64;
// Capacity of the sorted top prefix the kernel keeps in shared memory.
inline constexpr int kGather = 2048;

// Correctly rounded fp32 operations that nvcc may not contract or approximate.
DI_SAMPLING_HD inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
DI_SAMPLING_HD inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
DI_SAMPLING_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DI_SAMPLING_HD inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

DI_SAMPLING_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
DI_SAMPLING_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// sampler.h's token_weight, from p's bits.
DI_SAMPLING_HD inline uint64_t weight_of_bits(uint32_t pb) {
  return static_cast<uint64_t>(mul_rn(bits_float(pb), 1099511627776.0f));  // 2^40
}

// The sort key: larger = earlier in the order (p desc, id asc). Never 0 for a candidate.
DI_SAMPLING_HD inline uint64_t order_key(uint32_t pb, uint32_t id) {
  return (static_cast<uint64_t>(pb) << 32) | static_cast<uint32_t>(~id);
}
DI_SAMPLING_HD inline uint32_t key_bits(uint64_t key) {
  return static_cast<uint32_t>(key >> 32);
}
DI_SAMPLING_HD inline int32_t key_id(uint64_t key) {
  return static_cast<int32_t>(~static_cast<uint32_t>(key));
}

// What a random row needs to turn a logit into p: z = x / t, p = exp(z - zmax).
struct RowMath {
  float t;
  float zmax;
  float min_p;
};

// Bounds on d = z - zmax outside of which p = sampling_exp(d) cannot lie in the bits range
// [lo, hi]: a pass looking for that range skips the exp there. The margin (1e-3) is far above
// sampling_exp's error (2^-47 relative) and the float rounding of the log.
struct DRange {
  float lo;
  float hi;
};
DI_SAMPLING_HD inline DRange d_range(uint32_t lo_bits, uint32_t hi_bits) {
  return {static_cast<float>(::log(static_cast<double>(bits_float(lo_bits)))) - 1e-3f,
          static_cast<float>(::log(static_cast<double>(bits_float(hi_bits)))) + 1e-3f};
}

// p's bits when logit x is a candidate (p >= 2^-40 and p >= min_p), else 0. Tokens with d outside
// `range` may be reported as 0 without computing p (see d_range).
DI_SAMPLING_HD inline uint32_t candidate_bits(float x, const RowMath& m, DRange range) {
  const float z = div_rn(x, m.t);
  float p = 1.0f;  // the top token, also for a +inf maximum
  if (!(z == m.zmax)) {
    const float d = sub_rn(z, m.zmax);
    if (!(d >= range.lo && d <= range.hi)) return 0;  // NaN lands here too
    p = sampling_exp(d);
  }
  if (!(p >= m.min_p)) return 0;
  const uint32_t pb = float_bits(p);
  return pb >= kPMinBits ? pb : 0;
}

// top_p: max(1, ceil(top_p_q * mass / 2^24)), exact (sampler.cpp's fraction_of).
DI_SAMPLING_HD inline uint64_t top_p_need(uint32_t top_p_q, uint64_t mass) {
  const auto need =
      static_cast<uint64_t>((static_cast<unsigned __int128>(top_p_q) * mass + 16777215u) >> 24);
  return need > 0 ? need : 1;
}

// The draw: floor(u * mass) with u = bits24 / 2^24, exact; always < mass.
DI_SAMPLING_HD inline uint64_t draw_target(uint32_t bits24, uint64_t mass) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits24) * mass) >> 24);
}

// logits_processors.cpp's operations on one logit, in its order, each rounded as there.
DI_SAMPLING_HD inline float edit_logit(float x, const LogitEdit& e, const RowParams& rp) {
  if (e.flags & kEditMask) x = -std::numeric_limits<float>::infinity();
  if (e.flags & kEditBias) x = add_rn(x, e.bias);
  if (e.flags & kEditRepetition)
    x = x > 0.0f ? div_rn(x, rp.repetition_penalty) : mul_rn(x, rp.repetition_penalty);
  if (e.flags & kEditFrequency) {
    x = sub_rn(x, mul_rn(rp.frequency_penalty, static_cast<float>(e.count)));
    x = sub_rn(x, rp.presence_penalty);
  }
  return x;
}

// The first token, in the order (p desc, id asc), whose running count or weight exceeds a
// target, and the running weight through it; id < 0 reports a broken invariant.
struct Crossing {
  int32_t id;
  uint64_t through;
};

// A random row's token from its candidates (count n_cand, total weight mass), given
// cross(by_count, target) -> Crossing: top_k, then top_p, then the Philox draw, each cut a
// crossing (sampler.cpp's build_dist and draw). -1 when a crossing fails.
template <class Cross>
DI_SAMPLING_HD int32_t select_token(const RowParams& rp, uint64_t n_cand, uint64_t mass,
                                    Cross&& cross) {
  if (rp.top_k > 0 && static_cast<uint64_t>(rp.top_k) < n_cand) {
    const Crossing c = cross(true, static_cast<uint64_t>(rp.top_k) - 1);
    if (c.id < 0) return -1;
    mass = c.through;
  }
  if (rp.top_p_q < kTopPOff) {
    const Crossing c = cross(false, top_p_need(rp.top_p_q, mass) - 1);
    if (c.id < 0) return -1;
    mass = c.through;
  }
  const uint32_t bits24 = uniform_bits24(rp.seed, rp.position, kSampleStream);
  return cross(false, draw_target(bits24, mass)).id;
}

}  // namespace deepinfer::sampling::cuda
