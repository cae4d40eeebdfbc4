// rms_norm and interleaved partial RoPE.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace deepinfer {

void CpuBackend::rms_norm(const TensorView& x, const TensorView& weight, float eps,
                          const TensorView& out) {
  DI_CHECK(x.ndim() >= 1 && x.dtype() == DType::kF32 && x.device() == Device::kCpu &&
               x.is_contiguous() && (x.data() != nullptr || x.numel() == 0),
           ErrorCode::kInvalidArgument,
           "rms_norm: x is {} {}, expected a contiguous F32 host tensor of rank >= 1",
           dtype_name(x.dtype()), x.shape_str());
  const int64_t D = x.dim(-1);
  if (cpu::given(weight)) cpu::expect("rms_norm", "weight", weight, DType::kF32, {D});
  cpu::expect_like("rms_norm", "out", out, "x", x);
  if (D == 0) return;
  const int64_t rows = x.numel() / D;
  const float* xp = x.data_as<float>();
  const float* wp = cpu::given(weight) ? weight.data_as<float>() : nullptr;
  float* op = out.data_as<float>();
  // out may be x itself: each row is fully read (sum of squares) before it is written.
  cpu::pool().parallel_for(rows, std::max<int64_t>(1, 8192 / D), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = xp + r * D;
      float* orow = op + r * D;
      const float inv = 1.f / std::sqrt(cpu::sum_squares(xr, D) / static_cast<float>(D) + eps);
      if (wp) {
        for (int64_t i = 0; i < D; ++i) orow[i] = xr[i] * inv * wp[i];
      } else {
        for (int64_t i = 0; i < D; ++i) orow[i] = xr[i] * inv;
      }
    }
  });
}

void CpuBackend::rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
                      bool inverse) {
  using cpu::kAny;
  cpu::expect("rope", "x", x, DType::kF32, {kAny, kAny, kAny});
  const int64_t M = x.dim(0), H = x.dim(1), hd = x.dim(2);
  cpu::expect("rope", "positions", positions, DType::kI32, {M});
  cpu::expect("rope", "inv_freq", inv_freq, DType::kF32, {kAny});
  const int64_t R = inv_freq.dim(0);
  DI_CHECK(2 * R <= hd, ErrorCode::kInvalidArgument,
           "rope: inv_freq {} rotates {} dims but heads of x {} have only {}", inv_freq.shape_str(),
           2 * R, x.shape_str(), hd);
  if (M == 0 || H == 0 || R == 0) return;
  const int32_t* pos = positions.data_as<int32_t>();
  const float* freq = inv_freq.data_as<float>();
  float* xp = x.data_as<float>();
  const int64_t off = hd - 2 * R;  // heads are [nope | rope]
  const float sign = inverse ? -1.f : 1.f;
  cpu::pool().parallel_for(M, std::max<int64_t>(1, 4096 / (H * R)), [&](int64_t b, int64_t e) {
    std::vector<float> cs(2 * R);
    for (int64_t m = b; m < e; ++m) {
      // The angle is formed in fp32 like the reference (inv_freq @ positions in float); its
      // cos / sin are then evaluated accurately.
      const float p = static_cast<float>(pos[m]);
      for (int64_t i = 0; i < R; ++i) {
        const double ang = static_cast<double>(p * freq[i]);
        cs[2 * i] = static_cast<float>(std::cos(ang));
        cs[2 * i + 1] = sign * static_cast<float>(std::sin(ang));
      }
      for (int64_t h = 0; h < H; ++h) {
        float* v = xp + (m * H + h) * hd + off;
        for (int64_t i = 0; i < R; ++i) {
          const float c = cs[2 * i], s = cs[2 * i + 1];
          const float a = v[2 * i], bb = v[2 * i + 1];
          v[2 * i] = a * c - bb * s;
          v[2 * i + 1] = bb * c + a * s;
        }
      }
    }
  });
}

}  // namespace deepinfer
