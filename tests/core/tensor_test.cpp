#include <gtest/gtest.h>

#include <cstdint>

#include "core/tensor.h"

using namespace deepinfer;

TEST(Tensor, ShapeStridesAndAlignment) {
  Tensor t = Tensor::empty({3, 4, 5});
  EXPECT_EQ(t.numel(), 60);
  EXPECT_EQ(t.view().stride(0), 20);
  EXPECT_EQ(t.view().stride(-1), 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.view().data()) % 64, 0u);
  EXPECT_TRUE(t.view().is_contiguous());
  EXPECT_EQ(t.shape_str(), "[3, 4, 5]");
}

TEST(Tensor, SliceAndReshapeShareStorage) {
  Tensor t = Tensor::zeros({4, 6});
  float* p = t.data_as<float>();
  for (int i = 0; i < 24; ++i) p[i] = static_cast<float>(i);
  TensorView rows = t.view().slice_rows(1, 3);
  EXPECT_EQ(rows.dim(0), 2);
  EXPECT_EQ(rows.data_as<float>()[0], 6.0f);
  TensorView r = rows.reshape({2, 2, 3});
  EXPECT_EQ(r.data_as<float>()[5], 11.0f);
  Tensor t2 = t.reshaped({24});
  EXPECT_EQ(t2.data_as<float>(), p);
}

TEST(Tensor, WithViewKeepsTheStorageAlive) {
  Tensor part;
  {
    Tensor t = Tensor::zeros({4, 3});
    t.data_as<float>()[7] = 5.f;  // row 2, column 1
    part = t.with_view(t.view().slice_rows(2, 4));
  }  // t is gone; part still owns the memory
  EXPECT_EQ(part.shape_str(), "[2, 3]");
  EXPECT_EQ(part.data_as<float>()[1], 5.f);
  EXPECT_TRUE(part.defined());
}

TEST(Tensor, BadShapesThrow) {
  Tensor t = Tensor::zeros({4, 6});
  EXPECT_THROW(t.view().reshape({5, 5}), Error);
  EXPECT_THROW(Tensor::empty({1, 1, 1, 1, 1, 1, 1}), Error);
}
