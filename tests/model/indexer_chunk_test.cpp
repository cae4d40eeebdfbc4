// DEEPINFER_INDEXER_CHUNK_ROWS only regroups a long CSA segment's lightning-indexer calls (and
// its attention parts): every row scores the entries it may see and takes their top-k alone, so
// a prompt's logits agree at any chunk size (to fp32 rounding on the CPU, whose attention splits
// heads over threads for parts of a few rows: BLAS calls of other shapes; a picked entry the row
// may not see, a row scored against the wrong entries, would be off by far more); a size below 1
// is an error that names the variable; a call takes fewer rows where its fp32 scores would pass
// 256 MiB.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/bundled_model.h"
#include "core/status.h"
#include "model/deepseek_v4/blocks.h"
#include "model/deepseek_v4/model.h"

using namespace deepinfer;

namespace {

class IndexerChunks : public testing_model::BundledModelTest {
 protected:
  void TearDown() override { unsetenv("DEEPINFER_INDEXER_CHUNK_ROWS"); }

  // Logits of every row of one prompt fed in one call, with the chunk size set (or the default).
  static Tensor logits(const std::vector<int32_t>& ids, const char* chunk_rows) {
    if (chunk_rows)
      setenv("DEEPINFER_INDEXER_CHUNK_ROWS", chunk_rows, 1);
    else
      unsetenv("DEEPINFER_INDEXER_CHUNK_ROWS");
    deepseek_v4::SequenceState state = model_->new_state();
    return model_->forward(ids, state);
  }
};

TEST_F(IndexerChunks, LogitsAgreeAtEveryChunkSize) {
  const ModelConfig& c = model_->config();
  // 600 rows: 150 CSA entries against index_topk 32, so the indexer chooses; the default 1024
  // rows a call makes one call, 256 three, 1 makes 600 (the first rows' calls see no entries at
  // all), 599 leaves the last row a call of its own.
  ASSERT_EQ(c.compress_rate_csa, 4);
  ASSERT_LT(c.index_topk, 600 / 4);
  std::mt19937 rng(5);
  std::vector<int32_t> ids(600);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % c.vocab_size);
  const Tensor want = logits(ids, nullptr);
  ASSERT_EQ(want.dim(0), 600);
  const int64_t V = want.dim(1);
  for (const char* rows : {"1", "37", "256", "599", "100000"}) {
    const Tensor got = logits(ids, rows);
    ASSERT_EQ(got.numel(), want.numel()) << rows;
    for (int64_t r = 0; r < 600; ++r) {
      const float* g = got.data_as<float>() + r * V;
      const float* w = want.data_as<float>() + r * V;
      double d2 = 0, n2 = 0;
      for (int64_t v = 0; v < V; ++v) {
        d2 += (double(g[v]) - w[v]) * (double(g[v]) - w[v]);
        n2 += double(w[v]) * w[v];
      }
      ASSERT_LE(std::sqrt(d2 / n2), 1e-5)
          << "row " << r << ", DEEPINFER_INDEXER_CHUNK_ROWS=" << rows;
    }
  }
}

TEST_F(IndexerChunks, ASizeBelowOneIsAnErrorNamingTheVariable) {
  std::vector<int32_t> ids(40, 3);
  for (const char* rows : {"0", "-5"}) {
    try {
      logits(ids, rows);
      ADD_FAILURE() << "no error for DEEPINFER_INDEXER_CHUNK_ROWS=" << rows;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("DEEPINFER_INDEXER_CHUNK_ROWS"), std::string::npos)
          << e.what();
    }
  }
}

// The rows a call takes: the variable's, fewer where the call's fp32 scores would pass 256 MiB.
TEST_F(IndexerChunks, ScoreMemoryCapsTheRowsACallTakes) {
  using deepseek_v4::indexer_chunk_rows;
  unsetenv("DEEPINFER_INDEXER_CHUNK_ROWS");
  EXPECT_EQ(indexer_chunk_rows(0), 1024);
  EXPECT_EQ(indexer_chunk_rows(150), 1024);
  EXPECT_EQ(indexer_chunk_rows(16384), 1024);  // 64k tokens of context: 64 MiB
  EXPECT_EQ(indexer_chunk_rows(65536), 1024);  // 256k: exactly 256 MiB
  EXPECT_EQ(indexer_chunk_rows(65537), 1023);
  EXPECT_EQ(indexer_chunk_rows(262144), 256);          // 1M
  EXPECT_EQ(indexer_chunk_rows(int64_t{1} << 27), 1);  // never below one row
  setenv("DEEPINFER_INDEXER_CHUNK_ROWS", "7", 1);
  EXPECT_EQ(indexer_chunk_rows(262144), 7);
  setenv("DEEPINFER_INDEXER_CHUNK_ROWS", "100000", 1);
  EXPECT_EQ(indexer_chunk_rows(16384), 4096);
  EXPECT_LE(indexer_chunk_rows(16384) * 16384 * int64_t{sizeof(float)},
            deepseek_v4::kIndexerScoreBytes);
}

}  // namespace
