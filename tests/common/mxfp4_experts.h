// Random MXFP4 experts for the moe_experts tests (CPU and CUDA): packed e2m1 codes, scales in the
// range ExpertWeights allows (its ends included), and the same values widened to fp32 by
// core/dtype's conversions, the reference the packed paths must equal.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace deepinfer::testing_mxfp4 {

struct Mxfp4Matrices {
  Tensor packed;  // FP4E2M1 [E, rows, cols]
  Tensor scales;  // E8M0 [E, cols / 32, rows]
  Tensor wide;    // F32 [E, rows, cols]
};

// Rng: a test's generator with integer(lo, hi), inclusive.
template <typename Rng>
Mxfp4Matrices random_mxfp4(Rng& rng, int64_t E, int64_t rows, int64_t cols) {
  const int64_t groups = cols / 32;
  Mxfp4Matrices m{Tensor::empty({E, rows, cols}, DType::kFP4E2M1),
                  Tensor::empty({E, groups, rows}, DType::kE8M0), Tensor::empty({E, rows, cols})};
  uint8_t* p = m.packed.data_as<uint8_t>();
  uint8_t* s = m.scales.data_as<uint8_t>();
  for (int64_t i = 0; i < E * rows * cols / 2; ++i)
    p[i] = static_cast<uint8_t>(rng.integer(0, 255));
  for (int64_t i = 0; i < E * groups * rows; ++i)
    s[i] = static_cast<uint8_t>(i % 97 == 0   ? kMxfp4MinScale
                                : i % 89 == 0 ? kMxfp4MaxScale
                                              : rng.integer(118, 126));
  float* w = m.wide.data_as<float>();
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t b = p[(e * rows + r) * cols / 2 + c / 2];
        w[(e * rows + r) * cols + c] =
            e2m1_to_f32(c % 2 ? b >> 4 : b & 15) * e8m0_to_f32(s[(e * groups + c / 32) * rows + r]);
      }
  return m;
}

}  // namespace deepinfer::testing_mxfp4
