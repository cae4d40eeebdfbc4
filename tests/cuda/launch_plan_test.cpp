// Launch plans the CUDA backend decides on the host, tested without a GPU (so CI runs them):
// the dense K split tiles K exactly, depends on (N, K, batch) only (a split product's bits
// follow its segments) and stays within one wave of one-row blocks; the fp32-x rule takes the
// V4-Flash decode products it was measured faster on and refuses the ones it was slower for;
// the attention's key splits and head-group pairs, and the experts' tile rows, at the decode
// shapes docs/perf.md profiles.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "backend/cuda/kernels.h"

namespace deepinfer::cudatest {
namespace {

using namespace deepinfer::cuda;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

TEST(LaunchPlans, DenseSplitTilesKWithinOneWave) {
  for (int64_t N : {16, 1000, 2560, 4096, 4352, 8192, 32768, 129280})
    for (int64_t K : {8, 64, 72, 1024, 2048, 4096, 8192})
      for (int64_t batch : {1, 8}) {
        const DenseSplit s = dense_gemm_split(N, K, batch);
        const int64_t k_tiles = ceil_div(K, 64);
        SCOPED_TRACE(testing::Message() << N << " x " << K << " batch " << batch);
        ASSERT_GE(s.splits, 1);
        EXPECT_GE(int64_t{s.splits} * s.seg_tiles, k_tiles) << "the segments cover K";
        EXPECT_LT(int64_t{s.splits - 1} * s.seg_tiles, k_tiles) << "no empty segment";
        if (s.splits > 1) {
          EXPECT_GE(s.seg_tiles, 8);
          EXPECT_LE(s.splits, 16);
          EXPECT_LE(batch * ceil_div(N, 16) * s.splits, kDenseSplitTargetBlocks);
        }
      }
  // The V4-Flash decode products: wo_b, the fused input projections, router + shared gate / up,
  // the shared expert's down, wq_b, wo_a (8 groups), the head.
  EXPECT_EQ(dense_gemm_split(4096, 8192, 1).splits, 3);
  EXPECT_EQ(dense_gemm_split(2560, 4096, 1).splits, 4);
  EXPECT_EQ(dense_gemm_split(4352, 4096, 1).splits, 2);
  EXPECT_EQ(dense_gemm_split(4096, 2048, 1).splits, 3);
  EXPECT_EQ(dense_gemm_split(32768, 1024, 1).splits, 1);
  EXPECT_EQ(dense_gemm_split(1024, 4096, 8).splits, 1);
  EXPECT_EQ(dense_gemm_split(129280, 4096, 1).splits, 1);
  // Partials only where segments run on blocks of their own (up to 16 rows).
  EXPECT_EQ(dense_gemm_partials(1, 4096, 8192, 1), 3 * 4096);
  EXPECT_EQ(dense_gemm_partials(16, 4096, 8192, 1), 3 * 16 * 4096);
  EXPECT_EQ(dense_gemm_partials(17, 4096, 8192, 1), 0);
  EXPECT_EQ(dense_gemm_partials(1, 32768, 1024, 1), 0);
}

TEST(LaunchPlans, Fp32xProductsAreTheMeasuredOnes) {
  // Only the alignment of the pointers is looked at.
  const auto* x = reinterpret_cast<const float*>(uintptr_t{1} << 20);
  const void* w = x;
  auto takes = [&](int64_t M, int64_t N, int64_t K, int64_t batch = 1) {
    return dense_gemm_f32_supported(M, N, K, batch, K, K, x, w);
  };
  EXPECT_TRUE(takes(1, 2560, 4096));   // fused input projections: 1024 per segment
  EXPECT_TRUE(takes(1, 4352, 4096));   // router + shared gate / up: 2048
  EXPECT_TRUE(takes(1, 4096, 2048));   // shared expert's down: 704
  EXPECT_TRUE(takes(1, 32768, 1024));  // wq_b
  EXPECT_TRUE(takes(2, 2560, 4096));
  EXPECT_TRUE(takes(1, 4096, 8192));     // wo_b: 2752 per segment
  EXPECT_TRUE(takes(1, 1024, 4096, 8));  // wo_a: all of K, 4096
  EXPECT_TRUE(takes(1, 129280, 4096));   // the head
  EXPECT_TRUE(takes(2, 4352, 4096));     // 4096
  EXPECT_FALSE(takes(2, 4096, 8192));    // 5504
  EXPECT_FALSE(takes(8, 2560, 4096));    // 8192
  EXPECT_FALSE(takes(1, 12800, 8192));   // unsplit, 8192
  set_dense_resident_a(2048);            // the limit before the prologue's divides went
  EXPECT_FALSE(takes(1, 4096, 8192));
  EXPECT_TRUE(takes(1, 4352, 4096));
  set_dense_resident_a(kDenseResidentAElems);
  EXPECT_TRUE(takes(1, 4096, 8192));
  EXPECT_FALSE(takes(17, 16, 64));  // past the Thin tile
  EXPECT_FALSE(dense_gemm_f32_supported(1, 2560, 4096, 1, 4096, 4096, x + 1, w));  // unaligned
  EXPECT_FALSE(dense_gemm_f32_supported(2, 2560, 4096, 1, 4098, 4096, x, w));      // ldx % 4
  EXPECT_FALSE(takes(1, 64, 100));                                                 // K % 8
  set_dense_gemm_f32(false);
  EXPECT_FALSE(takes(1, 2560, 4096));
  set_dense_gemm_f32(true);
  EXPECT_TRUE(takes(1, 2560, 4096));
}

TEST(LaunchPlans, DecodeAttentionAndExpertShapes) {
  // Batch-1 decode at 4k context on 132 SMs: an HCA row sees 128 window rows + 32 entries (3
  // units of 64 keys), a CSA row 128 + 512 (10 units).
  EXPECT_EQ(attention_split_keys(), 64);
  EXPECT_EQ(attention_splits(1, 64, 160, 132), 3);
  EXPECT_EQ(attention_splits(1, 64, 640, 132), 10);
  EXPECT_EQ(attention_splits(1, 64, 64, 132), 1);     // one unit
  EXPECT_EQ(attention_splits(256, 64, 640, 132), 1);  // the rows fill the device
  EXPECT_EQ(attention_splits(1, 16, int64_t{1} << 40, 132), kMaxAttnUnits);
  EXPECT_EQ(attention_splits(1, 64, std::numeric_limits<int64_t>::max(), 132), kMaxAttnUnits);
  set_attention_split_keys(128);  // DEEPINFER_ATTENTION_SPLIT_KEYS=128
  EXPECT_EQ(attention_splits(1, 64, 160, 132), 2);
  EXPECT_EQ(attention_splits(1, 64, 640, 132), 5);
  set_attention_split_keys(40);  // rounded up to whole chunks: 64
  EXPECT_EQ(attention_split_keys(), 64);
  EXPECT_EQ(attention_splits(1, 64, 640, 132), 10);
  set_attention_split_keys(32);
  EXPECT_EQ(attention_splits(1, 64, 640, 132), 20);
  set_attention_split_keys(0);  // at least one chunk
  EXPECT_EQ(attention_splits(1, 64, 160, 132), 5);
  set_attention_split_keys(kAttentionSplitKeys);
  // Scheduling the units: batch 1's 4 head groups x 10 units run a unit per block; batch 8's
  // 320 take 3 per block (about a block per SM); from 33 rows (a block per SM) each row's head
  // group folds all its units in one block; no split rows, no plan.
  EXPECT_FALSE(attention_unit_plan(1, 10, 64, 132).fold);
  EXPECT_EQ(attention_unit_plan(1, 10, 64, 132).units_per_block, 1);
  EXPECT_FALSE(attention_unit_plan(8, 80, 64, 132).fold);
  EXPECT_EQ(attention_unit_plan(8, 80, 64, 132).units_per_block, 3);
  EXPECT_FALSE(attention_unit_plan(32, 320, 64, 132).fold);
  EXPECT_TRUE(attention_unit_plan(33, 330, 64, 132).fold);
  EXPECT_FALSE(attention_unit_plan(0, 0, 64, 132).fold);
  EXPECT_EQ(attention_unit_plan(0, 0, 64, 132).units_per_block, 1);
  // Two warps per dim quarter: one-group blocks, head dims past 64, one wave at most.
  EXPECT_EQ(attention_quarter_warps(1, 512, 132, 132), 2);
  EXPECT_EQ(attention_quarter_warps(1, 512, 133, 132), 1);
  EXPECT_EQ(attention_quarter_warps(1, 128, 8, 132), 2);
  EXPECT_EQ(attention_quarter_warps(1, 64, 8, 132), 1);
  EXPECT_EQ(attention_quarter_warps(2, 512, 8, 132), 1);
  EXPECT_EQ(attention_groups_per_block(1, 64, 132), 1);     // decode: one group per block
  EXPECT_EQ(attention_groups_per_block(32, 64, 132), 1);    // ... below one block per SM
  EXPECT_EQ(attention_groups_per_block(33, 64, 132), 2);    // pairs from one block per SM
  EXPECT_EQ(attention_groups_per_block(4096, 64, 132), 2);  // prefill: pairs
  EXPECT_EQ(attention_groups_per_block(4096, 16, 132), 1);  // one group only
  set_attention_pair_blocks(32);  // DEEPINFER_ATTENTION_PAIR_BLOCKS=32: prefill-sized calls only
  EXPECT_EQ(attention_groups_per_block(1055, 64, 132), 1);
  EXPECT_EQ(attention_groups_per_block(1056, 64, 132), 2);
  set_attention_pair_blocks(0);  // always
  EXPECT_EQ(attention_groups_per_block(1, 64, 132), 2);
  EXPECT_EQ(attention_groups_per_block(1, 16, 132), 1);
  set_attention_pair_blocks(kAttentionPairBlocksPerSm);
  // A decode row's 6 experts: 16-row tiles, 7 tile slots (the 448-block up GEMM of a step).
  EXPECT_EQ(moe_tile_rows(6, 256, true), 16);
  EXPECT_EQ(moe_max_tiles(6, 256, 16), 7);
  EXPECT_EQ(moe_tile_rows(8 * 256, 256, true), 16);
  EXPECT_EQ(moe_tile_rows(8 * 256 + 1, 256, true), kMoeWgmmaTileRows);
  EXPECT_EQ(moe_tile_rows(8 * 256 + 1, 256, false), 64);
}

}  // namespace
}  // namespace deepinfer::cudatest
