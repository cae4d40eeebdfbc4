#include <gtest/gtest.h>

#include "core/status.h"
#include "kv/state_memory.h"

using namespace deepinfer;

TEST(StateMemory, LayoutFromConfigCountsEveryLayer) {
  ModelConfig c;
  c.num_hidden_layers = 3;
  c.head_dim = 8;
  c.index_head_dim = 4;
  c.sliding_window = 5;
  c.compress_rate_csa = 4;
  c.compress_rate_hca = 16;
  c.layer_types = {AttnType::kSliding, AttnType::kCSA, AttnType::kHCA};
  const StateLayout l = StateLayout::for_model(c, 4, 32);
  EXPECT_EQ(l.page_tokens, 32);
  // Rings: 3 layers x 2 * 4 rows (ring_capacity) x 8 x 4 B; CSA pending 2 series x (kv+gate) +
  // carry (kv+gate); indexer 3 x (kv+gate) at width 4; HCA pending kv+gate.
  const int64_t rings = 3 * 8 * 8 * 4;
  const int64_t csa = 4 * 8 * 4 * 2 * 2 + 4 * 8 * 4 * 2 + 4 * 4 * 4 * 2 * 3;
  const int64_t hca = 16 * 8 * 4 * 2;
  EXPECT_EQ(l.slot_bytes, rings + csa + hca);
  // Pages: CSA 32/4 entries of (8 + 4) floats, HCA 32/16 entries of 8 floats.
  EXPECT_EQ(l.page_bytes, 8 * 12 * 4 + 2 * 8 * 4);
  EXPECT_THROW(StateLayout::for_model(c, 4, 24), Error);  // not a multiple of 16
}

TEST(StateMemory, AllocatesGrowsAndFreesWithinBudget) {
  StateLayout l{1000, 100, 4};
  StateMemory m(l, 1000 * 2 + 100 * 3);
  EXPECT_EQ(m.pages_for(0), 0);
  EXPECT_EQ(m.pages_for(4), 1);
  EXPECT_EQ(m.pages_for(5), 2);
  EXPECT_TRUE(m.allocate(1, 4));
  EXPECT_TRUE(m.allocate(2, 8));
  EXPECT_EQ(m.used_bytes(), 2000 + 300);
  EXPECT_FALSE(m.grow(1, 5));  // would need a fourth page
  EXPECT_EQ(m.used_pages(), 3);
  EXPECT_FALSE(m.allocate(3, 1));
  m.free(2);
  EXPECT_TRUE(m.grow(1, 12));
  EXPECT_EQ(m.used_pages(), 3);
  EXPECT_NE(m.summary().find("1 sequences"), std::string::npos);
  EXPECT_EQ(m.max_tokens_per_sequence(), (2300 - 1000) / 100 * 4);
  EXPECT_THROW(StateMemory(l, 1000), Error);
}
