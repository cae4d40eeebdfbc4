// Projections of one input by a fused matrix (weights.h: x_proj): one GEMM for all of them.
#include <numeric>

#include "model/deepseek_v4/blocks.h"

namespace deepinfer::deepseek_v4 {

std::vector<Tensor> project_fused(Backend& b, const TensorView& x, const Tensor& fused,
                                  const std::vector<int64_t>& widths) {
  const int64_t T = x.dim(0), N = fused.dim(0);
  DI_CHECK(std::accumulate(widths.begin(), widths.end(), int64_t{0}) == N, ErrorCode::kInternal,
           "fused projection: the widths do not add up to the matrix's {} rows", N);
  Tensor product = b.empty({T, N});
  b.matmul(x, fused, product);
  std::vector<Tensor> parts;
  int64_t col = 0;
  for (int64_t w : widths) {
    if (T == 1) {  // one row: every column block is contiguous already
      parts.push_back(
          product.with_view(product.view().reshape({N}).slice_rows(col, col + w).reshape({1, w})));
    } else {
      parts.push_back(b.empty({T, w}));
      b.copy_columns(product, col, parts.back());
    }
    col += w;
  }
  return parts;
}

}  // namespace deepinfer::deepseek_v4
