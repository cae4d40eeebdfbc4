// exp() for the sampler, bit-identical on the host and on CUDA devices.
//
// A sampled token depends on the exact float p = exp(z - zmax) of every kept token (its weight is
// floor(p * 2^40)), so the CPU sampler and the device sampler must round exp identically. Library
// exp functions are not specified to the bit (glibc's expf, CUDA's expf and other libms differ in
// the last place for some inputs), so both use this one: double precision, built only from
// operations IEEE 754 rounds exactly (conversions, multiplications, explicit fma; no a * b + c
// that a compiler could contract), so every conforming host and device computes the same bits.
// Relative error before the final rounding to float is below 2^-47: the result is the correctly
// rounded exp except for inputs within about 2^-24 ulp of a rounding boundary.
//
// C++17 and nvcc compatible (src/sampling/cuda includes it from .cu files).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__CUDACC__)
#define DI_SAMPLING_HD __host__ __device__
#else
#define DI_SAMPLING_HD
#endif

namespace deepinfer::sampling {

namespace exp_detail {

// 2^e for e in [-1022, 1023], exactly.
DI_SAMPLING_HD inline double pow2(int e) {
  const auto bits = static_cast<uint64_t>(e + 1023) << 52;
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
#endif
}

DI_SAMPLING_HD inline double fma_rn(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// 2^(j/64), j in [0, 64), each the double nearest the exact value.
DI_SAMPLING_HD inline double exp2_j64(int j) {
  static constexpr double kTable[64] = {
      0x1.0000000000000p+0, 0x1.02c9a3e778061p+0, 0x1.059b0d3158574p+0, 0x1.0874518759bc8p+0,
      0x1.0b5586cf9890fp+0, 0x1.0e3ec32d3d1a2p+0, 0x1.11301d0125b51p+0, 0x1.1429aaea92de0p+0,
      0x1.172b83c7d517bp+0, 0x1.1a35beb6fcb75p+0, 0x1.1d4873168b9aap+0, 0x1.2063b88628cd6p+0,
      0x1.2387a6e756238p+0, 0x1.26b4565e27cddp+0, 0x1.29e9df51fdee1p+0, 0x1.2d285a6e4030bp+0,
      0x1.306fe0a31b715p+0, 0x1.33c08b26416ffp+0, 0x1.371a7373aa9cbp+0, 0x1.3a7db34e59ff7p+0,
      0x1.3dea64c123422p+0, 0x1.4160a21f72e2ap+0, 0x1.44e086061892dp+0, 0x1.486a2b5c13cd0p+0,
      0x1.4bfdad5362a27p+0, 0x1.4f9b2769d2ca7p+0, 0x1.5342b569d4f82p+0, 0x1.56f4736b527dap+0,
      0x1.5ab07dd485429p+0, 0x1.5e76f15ad2148p+0, 0x1.6247eb03a5585p+0, 0x1.6623882552225p+0,
      0x1.6a09e667f3bcdp+0, 0x1.6dfb23c651a2fp+0, 0x1.71f75e8ec5f74p+0, 0x1.75feb564267c9p+0,
      0x1.7a11473eb0187p+0, 0x1.7e2f336cf4e62p+0, 0x1.82589994cce13p+0, 0x1.868d99b4492edp+0,
      0x1.8ace5422aa0dbp+0, 0x1.8f1ae99157736p+0, 0x1.93737b0cdc5e5p+0, 0x1.97d829fde4e50p+0,
      0x1.9c49182a3f090p+0, 0x1.a0c667b5de565p+0, 0x1.a5503b23e255dp+0, 0x1.a9e6b5579fdbfp+0,
      0x1.ae89f995ad3adp+0, 0x1.b33a2b84f15fbp+0, 0x1.b7f76f2fb5e47p+0, 0x1.bcc1e904bc1d2p+0,
      0x1.c199bdd85529cp+0, 0x1.c67f12e57d14bp+0, 0x1.cb720dcef9069p+0, 0x1.d072d4a07897cp+0,
      0x1.d5818dcfba487p+0, 0x1.da9e603db3285p+0, 0x1.dfc97337b9b5fp+0, 0x1.e502ee78b3ff6p+0,
      0x1.ea4afa2a490dap+0, 0x1.efa1bee615a27p+0, 0x1.f50765b6e4540p+0, 0x1.fa7c1819e90d8p+0,
  };
  return kTable[j];
}

}  // namespace exp_detail

// e^d for a float d; NaN stays NaN, e^d below half the smallest subnormal is 0, above FLT_MAX inf.
DI_SAMPLING_HD inline float sampling_exp(float d) {
  using namespace exp_detail;
  if (!(d > -104.0f)) return d != d ? d : 0.0f;  // e^-104 < 2^-150
  if (d > 89.0f) return std::numeric_limits<float>::infinity();
  const double x = d;
  // x = n * ln2/64 + r, n = trunc(x * 64/ln2), |r| < ln2/64; ln2/64 in two parts.
  const int n = static_cast<int>(x * 0x1.71547652b82fep+6);
  const double nd = n;
  double r = fma_rn(-nd, 0x1.62e42fefa39efp-7, x);
  r = fma_rn(-nd, 0x1.abc9e3b39803fp-62, r);
  // e^r: Taylor to degree 5 (the next term is below 2^-48 for |r| < ln2/64).
  double q = fma_rn(r, 0x1.1111111111111p-7, 0x1.5555555555555p-5);
  q = fma_rn(q, r, 0x1.5555555555555p-3);
  q = fma_rn(q, r, 0.5);
  q = fma_rn(q, r, 1.0);
  q = fma_rn(q, r, 1.0);
  // e^x = 2^(n/64) e^r = 2^e * 2^(j/64) * e^r with n = 64 e + j; the scaling by 2^e is exact.
  const int j = n & 63;
  const int e = (n - j) / 64;
  const double s = exp2_j64(j) * q;
  return static_cast<float>(s * pow2(e));
}

}  // namespace deepinfer::sampling
