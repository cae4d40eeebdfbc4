// WeightStore over FP8 (128x128 block scales) and MXFP4 (e8m0 per 32) checkpoints, in official
// and transformers spellings, including slices of fused expert tensors.
#include <gtest/gtest.h>

#include <cstring>

#include "io/weights.h"
#include "test_util.h"

namespace deepinfer {
namespace {

using testing::expect_error;
using testing::f32_tensor;
using testing::pattern_bf16;
using testing::raw_tensor;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::TestTensor;
using testing::write_file;

void write_checkpoint(const TempDir& dir, const std::vector<TestTensor>& tensors) {
  write_file(dir / "model.safetensors", safetensors_bytes(tensors));
}

// Deterministic e4m3 codes, avoiding the NaN codes 0x7F / 0xFF.
std::vector<uint8_t> fp8_codes(int64_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t c = static_cast<uint8_t>((i * 37 + seed * 11) % 256);
    v[i] = (c & 0x7F) == 0x7F ? 0x38 : c;
  }
  return v;
}

TEST(QuantizedWeights, Fp8OfficialScale) {
  TempDir dir;
  const int64_t rows = 130, cols = 200;
  std::vector<uint8_t> w = fp8_codes(rows * cols, 1);
  w[0] = 0x3C;                 // 1.5
  w[129 * cols + 199] = 0xC0;  // -2
  const std::vector<float> scale = {0.5f, 4.0f, 2.0f, 0.25f};
  write_checkpoint(dir, {raw_tensor("layers.0.attn.wq_a.weight", "F8_E4M3", {rows, cols}, w),
                         f32_tensor("layers.0.attn.wq_a.scale", {2, 2}, scale)});
  auto store = WeightStore::open(dir.str());
  EXPECT_FALSE(store->has("layers.0.attn.wq_a.scale"));  // a companion, not a weight
  EXPECT_EQ(store->canonical_names().size(), 1u);
  const Tensor t = store->get_f32("layers.0.attn.wq_a.weight", {rows, cols});
  const float* out = t.data_as<float>();
  EXPECT_EQ(out[0], 0.75f);
  EXPECT_EQ(out[129 * cols + 199], -0.5f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      ASSERT_EQ(out[i * cols + j], e4m3_to_f32(w[i * cols + j]) * scale[(i / 128) * 2 + j / 128])
          << i << "," << j;
}

TEST(QuantizedWeights, Fp8TransformersScaleInvE8M0) {
  TempDir dir;
  std::vector<uint8_t> w(4 * 3, 0x38);  // 1.0
  w[5] = 0xB0;                          // -0.5
  write_checkpoint(
      dir, {raw_tensor("model.layers.1.self_attn.q_a_proj.weight", "F8_E4M3", {4, 3}, w),
            raw_tensor("model.layers.1.self_attn.q_a_proj.weight_scale_inv", "F8_E8M0", {1, 1},
                       {130})});  // 2^3
  auto store = WeightStore::open(dir.str());
  const Tensor t = store->get_f32("layers.1.attn.wq_a.weight", {4, 3});
  EXPECT_EQ(t.data_as<float>()[0], 8.0f);
  EXPECT_EQ(t.data_as<float>()[5], -4.0f);
}

TEST(QuantizedWeights, Mxfp4Experts) {
  TempDir dir;
  // [2, 64] logical, stored I8 [2, 32]; scales F8_E8M0 [2, 2].
  std::vector<uint8_t> packed(2 * 32, 0x22);                // 1.0, 1.0
  packed[0] = 0x71;                                         // cols 0, 1 = 0.5, 6
  packed[16] = 0xF9;                                        // cols 32, 33 = -0.5, -6
  packed[63] = 0x50;                                        // row 1, cols 62, 63 = 0, 3
  const std::vector<uint8_t> scale = {127, 129, 126, 131};  // 1, 4 ; 1/2, 16
  write_checkpoint(dir, {raw_tensor("layers.3.ffn.experts.7.w2.weight", "I8", {2, 32}, packed),
                         raw_tensor("layers.3.ffn.experts.7.w2.scale", "F8_E8M0", {2, 2}, scale)});
  auto store = WeightStore::open(dir.str());
  EXPECT_EQ(store->shape("layers.3.ffn.experts.7.w2.weight"), (std::vector<int64_t>{2, 64}));
  const Tensor t = store->get_f32("layers.3.ffn.experts.7.w2.weight", {2, 64});
  const float* o = t.data_as<float>();
  EXPECT_EQ(o[0], 0.5f);
  EXPECT_EQ(o[1], 6.0f);
  EXPECT_EQ(o[2], 1.0f);
  EXPECT_EQ(o[32], -2.0f);
  EXPECT_EQ(o[33], -24.0f);
  EXPECT_EQ(o[64], 0.5f);
  EXPECT_EQ(o[126], 0.0f);
  EXPECT_EQ(o[127], 48.0f);
  expect_error(
      [&] {
        store->get_f32("layers.3.ffn.experts.7.w2.weight", {2, 32});
      },
      ErrorCode::kCorrupt, {"has shape [2, 64], expected [2, 32]"});
}

TEST(QuantizedWeights, Mxfp4U8AndF4Storage) {
  TempDir dir;
  const std::vector<uint8_t> packed = {0x21, 0x43, 0x65, 0x87};  // 0.5 1 1.5 2 3 4 6 -0
  write_checkpoint(dir,
                   {raw_tensor("layers.0.ffn.shared_experts.w1.weight", "U8", {1, 4}, packed),
                    raw_tensor("layers.0.ffn.shared_experts.w1.scale", "U8", {1, 1}, {128}),
                    raw_tensor("layers.0.ffn.shared_experts.w3.weight", "F4", {1, 8}, packed),
                    raw_tensor("layers.0.ffn.shared_experts.w3.scale", "F8_E8M0", {1, 1}, {126})});
  auto store = WeightStore::open(dir.str());
  const std::vector<float> w1 = {1, 2, 3, 4, 6, 8, 12, -0.0f};
  const Tensor a = store->get_f32("layers.0.ffn.shared_experts.w1.weight", {1, 8});
  const Tensor b = store->get_f32("layers.0.ffn.shared_experts.w3.weight", {1, 8});
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(a.data_as<float>()[i], w1[i]) << i;
    EXPECT_EQ(b.data_as<float>()[i], w1[i] / 4) << i;
  }
}

TEST(QuantizedWeights, FusedFp8ExpertSlices) {
  TempDir dir;
  // gate_up_proj [E=2, 2I=256, D=128]: w1 = rows [0, 128), w3 = rows [128, 256) per expert,
  // so each half has its own block row of the [2, 2, 1] scale grid.
  const int64_t E = 2, R = 256, C = 128;
  const std::vector<uint8_t> w = fp8_codes(E * R * C, 3);
  const std::vector<float> scale = {1.0f, 2.0f, 4.0f, 8.0f};
  write_checkpoint(
      dir, {raw_tensor("model.layers.0.mlp.experts.gate_up_proj", "F8_E4M3", {E, R, C}, w),
            f32_tensor("model.layers.0.mlp.experts.gate_up_proj_scale_inv", {E, 2, 1}, scale)});
  auto store = WeightStore::open(dir.str());
  for (int64_t e = 0; e < E; ++e) {
    for (int part = 0; part < 2; ++part) {
      const std::string name = fmt::format("layers.0.ffn.experts.{}.w{}.weight", e, 1 + 2 * part);
      const Tensor t = store->get_f32(name, {128, C});
      for (int64_t i = 0; i < 128; ++i)
        for (int64_t j = 0; j < C; ++j)
          ASSERT_EQ(t.data_as<float>()[i * C + j],
                    e4m3_to_f32(w[(e * R + part * 128 + i) * C + j]) * scale[e * 2 + part])
              << name << " " << i << "," << j;
    }
  }
}

TEST(QuantizedWeights, FusedMxfp4ExpertSlices) {
  TempDir dir;
  // gate_up_proj stored U8 [E=2, 2I=4, D/2=16] (D = 32), scales [2, 4, 1].
  std::vector<uint8_t> w(2 * 4 * 16, 0x22);
  w[(1 * 4 + 2) * 16] = 0x17;  // expert 1, row 2 (= w3 row 0), cols 0, 1 = 6, 0.5
  std::vector<uint8_t> scale(8, 127);
  scale[1 * 4 + 2] = 129;  // x4
  write_checkpoint(dir, {raw_tensor("model.layers.2.mlp.experts.gate_up_proj", "U8", {2, 4, 16}, w),
                         raw_tensor("model.layers.2.mlp.experts.gate_up_proj_scale_inv", "F8_E8M0",
                                    {2, 4, 1}, scale)});
  auto store = WeightStore::open(dir.str());
  const Tensor w3 = store->get_f32("layers.2.ffn.experts.1.w3.weight", {2, 32});
  EXPECT_EQ(w3.data_as<float>()[0], 24.0f);
  EXPECT_EQ(w3.data_as<float>()[1], 2.0f);
  EXPECT_EQ(w3.data_as<float>()[2], 4.0f);
  EXPECT_EQ(w3.data_as<float>()[32], 1.0f);
  const Tensor w1 = store->get_f32("layers.2.ffn.experts.1.w1.weight", {2, 32});
  EXPECT_EQ(w1.data_as<float>()[0], 1.0f);
}

TEST(QuantizedWeights, Mxfp4KeptPackedPlainAndFused) {
  TempDir dir;
  // A plain expert matrix [2, 64] (I8 [2, 32], scales [2, 2]) and a fused gate_up_proj stored U8
  // [E=2, 2I=4, D/2=16] (D = 32, scales [2, 4, 1]); a bf16 matrix is not MXFP4.
  std::vector<uint8_t> plain(2 * 32);
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>(i * 7);
  const std::vector<uint8_t> plain_scale = {127, 129, 126, 131};
  std::vector<uint8_t> fused(2 * 4 * 16);
  for (size_t i = 0; i < fused.size(); ++i) fused[i] = static_cast<uint8_t>(i * 13 + 1);
  std::vector<uint8_t> fused_scale = {120, 121, 122, 123, 124, 125, 126, 127};
  write_checkpoint(
      dir, {raw_tensor("layers.3.ffn.experts.7.w2.weight", "I8", {2, 32}, plain),
            raw_tensor("layers.3.ffn.experts.7.w2.scale", "F8_E8M0", {2, 2}, plain_scale),
            raw_tensor("model.layers.2.mlp.experts.gate_up_proj", "U8", {2, 4, 16}, fused),
            raw_tensor("model.layers.2.mlp.experts.gate_up_proj_scale_inv", "F8_E8M0", {2, 4, 1},
                       fused_scale),
            raw_tensor("layers.0.attn.wq_a.weight", "BF16", {1, 32}, std::vector<uint8_t>(64))});
  auto store = WeightStore::open(dir.str());
  std::vector<uint8_t> packed(64), scales(4);
  ASSERT_TRUE(
      store->get_mxfp4("layers.3.ffn.experts.7.w2.weight", {2, 64}, packed.data(), scales.data()));
  EXPECT_EQ(packed, plain);
  EXPECT_EQ(scales, plain_scale);
  // Expert 1's w3: rows 2, 3 of its [4, 16] slice.
  packed.assign(32, 0);
  scales.assign(2, 0);
  ASSERT_TRUE(
      store->get_mxfp4("layers.2.ffn.experts.1.w3.weight", {2, 32}, packed.data(), scales.data()));
  EXPECT_EQ(packed, std::vector<uint8_t>(fused.begin() + 6 * 16, fused.begin() + 8 * 16));
  EXPECT_EQ(scales, (std::vector<uint8_t>{126, 127}));
  EXPECT_FALSE(
      store->get_mxfp4("layers.0.attn.wq_a.weight", {1, 32}, packed.data(), scales.data()));
  expect_error(
      [&] {
        store->get_mxfp4("layers.3.ffn.experts.7.w2.weight", {2, 32}, packed.data(), scales.data());
      },
      ErrorCode::kCorrupt, {"has shape [2, 64], expected [2, 32]"});
}

TEST(QuantizedWeights, ScaleErrorsNameBothTensors) {
  TempDir dir;
  const std::vector<uint8_t> w(4 * 3, 0x38);
  write_checkpoint(dir, {raw_tensor("layers.0.attn.wkv.weight", "F8_E4M3", {4, 3}, w),
                         f32_tensor("layers.0.attn.wkv.scale", {2, 1}, {1, 1})});
  expect_error(
      [&] { WeightStore::open(dir.str()); }, ErrorCode::kCorrupt,
      {"'layers.0.attn.wkv.scale'", "[2, 1]", "expected [1, 1]", "'layers.0.attn.wkv.weight'"});
  write_checkpoint(dir, {raw_tensor("layers.0.attn.wkv.weight", "F8_E4M3", {4, 3}, w),
                         raw_tensor("layers.0.attn.wkv.scale", "I8", {1, 1}, {1})});
  expect_error([&] { WeightStore::open(dir.str()); }, ErrorCode::kCorrupt,
               {"'layers.0.attn.wkv.scale'", "I8"});
  write_checkpoint(dir, {pattern_bf16("layers.0.attn.wkv.weight", {4, 3}, 1),
                         f32_tensor("layers.0.attn.wkv.scale", {1, 1}, {1})});
  expect_error([&] { WeightStore::open(dir.str()); }, ErrorCode::kUnsupported,
               {"'layers.0.attn.wkv.weight'", "BF16", "'layers.0.attn.wkv.scale'"});
  write_checkpoint(dir, {raw_tensor("layers.0.attn.wkv.weight", "F8_E4M3", {4, 3}, w),
                         f32_tensor("layers.0.attn.wkv.scale", {1, 1}, {1}),
                         f32_tensor("layers.0.attn.wkv.weight_scale_inv", {1, 1}, {1})});
  expect_error(
      [&] { WeightStore::open(dir.str()); }, ErrorCode::kCorrupt,
      {"two scale tensors", "'layers.0.attn.wkv.scale'", "'layers.0.attn.wkv.weight_scale_inv'"});
  write_checkpoint(dir, {raw_tensor("layers.0.attn.attn_sink", "F8_E4M3", {4}, {1, 2, 3, 4}),
                         raw_tensor("layers.0.attn.attn_sink_scale_inv", "F8_E8M0", {1}, {127})});
  expect_error([&] { WeightStore::open(dir.str()); }, ErrorCode::kUnsupported,
               {"'layers.0.attn.attn_sink'", "[4]"});
  write_checkpoint(dir, {f32_tensor("model.layers.0.mlp.experts.down_proj_scale_inv", {1}, {1})});
  expect_error([&] { WeightStore::open(dir.str()); }, ErrorCode::kCorrupt,
               {"'model.layers.0.mlp.experts.down_proj_scale_inv'", "no fused expert weight"});
}

TEST(QuantizedWeights, LoneScaleIsAnOrdinaryTensor) {
  TempDir dir;
  write_checkpoint(dir, {f32_tensor("model.layers.0.foo.scale", {2}, {1, 2})});
  auto store = WeightStore::open(dir.str());
  ASSERT_TRUE(store->has("layers.0.foo.scale"));
  EXPECT_EQ(store->get_f32("layers.0.foo.scale", {2}).data_as<float>()[1], 2.0f);
}

}  // namespace
}  // namespace deepinfer
