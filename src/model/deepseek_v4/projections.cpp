// Projections of one input by a fused matrix (weights.h: x_proj): one GEMM for all of them.
#include "model/deepseek_v4/blocks.h"

namespace deepinfer::deepseek_v4 {

std::vector<Tensor> project_fused(Backend& b, const TensorView& x, const Tensor& fused,
                                  const std::vector<int64_t>& widths) {
  const int64_t T = x.dim(0), N = fused.dim(0);
  Tensor product = b.empty({T, N});
  b.matmul(x, fused, product);
  std::vector<Tensor> parts;
  int64_t col = 0;
  if (T == 1) {  // one row: every column block is contiguous already
    const TensorView row = product.view().reshape({N});
    for (int64_t w : widths) {
      parts.push_back(product.with_view(row.slice_rows(col, col + w).reshape({1, w})));
      col += w;
    }
    return parts;
  }
  CopyBatch copies;
  for (int64_t w : widths) {
    parts.push_back(b.empty({T, w}));
    for (int64_t t = 0; t < T; ++t)
      copies.add(product.view().slice_rows(t, t + 1).reshape({N}).slice_rows(col, col + w),
                 parts.back().view().slice_rows(t, t + 1).reshape({w}));
    col += w;
  }
  DI_CHECK(col == N, ErrorCode::kInternal, "fused projection: widths sum to {}, matrix has {}", col,
           N);
  copies.flush(b);
  return parts;
}

}  // namespace deepinfer::deepseek_v4
