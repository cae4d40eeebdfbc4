// A decode row's logits at V4-Flash layer shapes (hidden 4096, 64 heads of 512, a CSA and an HCA
// layer, 16 routed experts) are bitwise the same alone and inside batches of companions with
// other contexts: what the engine's determinism per seq_seed rests on, checked where the kernels
// change shape with the batch (dense products 1 / 16 / 64 rows, the experts' narrow and wide
// tiles, the decode indexer's top-k width, attention splits); and a prefill's requested rows are
// those of a forward returning every row. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda_test_util.h"
#include "model/deepseek_v4/model.h"
#include "random_model.h"

namespace deepinfer::cudatest {
namespace {

using deepseek_v4::Model;
using deepseek_v4::SequenceState;

TEST(BatchInvarianceCuda, DecodeRowsDoNotDependOnTheirBatchAtModelShapes) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  const std::unique_ptr<Model> model = random_v4_flash(*gpu, {"csa", "hca"}, 7);
  const ModelConfig& c = model->config();
  auto state_of = [&](int64_t tokens, uint64_t seed) {
    SequenceState st = model->new_state();
    st.fill_synthetic(c, *gpu, tokens, seed, 8);
    return st;
  };
  const int64_t kContext = 700;  // past the window, 175 CSA entries: a top-k narrower than 512
  const int32_t kToken = 1234;

  SequenceState alone_state = state_of(kContext, 1);
  const Model::BatchItem alone_item{std::span<const int32_t>(&kToken, 1), &alone_state};
  const Tensor alone = model->forward_batch(std::span<const Model::BatchItem>(&alone_item, 1));
  const int64_t V = c.vocab_size;
  ASSERT_EQ(alone.dim(0), 1);

  for (const int64_t batch : {2, 9, 64}) {
    std::vector<SequenceState> states;
    std::vector<int32_t> tokens(static_cast<size_t>(batch));
    states.push_back(state_of(kContext, 1));
    tokens[0] = kToken;
    for (int64_t i = 1; i < batch; ++i) {
      // Longer and shorter companions: the batch's widest indexer row has 512 picks.
      states.push_back(state_of(300 + 37 * i, 100 + static_cast<uint64_t>(i)));
      tokens[i] = static_cast<int32_t>((7919 * i) % V);
    }
    std::vector<Model::BatchItem> items;
    for (int64_t i = 0; i < batch; ++i)
      items.push_back({std::span<const int32_t>(&tokens[i], 1), &states[i]});
    const Tensor logits = model->forward_batch(items);
    ASSERT_EQ(logits.dim(0), batch);
    int64_t differ = 0;
    for (int64_t v = 0; v < V; ++v)
      differ +=
          std::memcmp(logits.data_as<float>() + v, alone.data_as<float>() + v, sizeof(float)) != 0;
    EXPECT_EQ(differ, 0) << "batch " << batch << ": " << differ << " of " << V
                         << " logits of the row differ from the row alone";
  }
}

// A prefill batch asking for some rows' logits gets exactly those rows of the same batch asking
// for all of them: the last mHC expansion and the head then run on the requested rows alone, with
// the kernels of fewer rows.
TEST(BatchInvarianceCuda, RequestedRowsAreTheRowsOfAnAllRowsForward) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  const std::unique_ptr<Model> model = random_v4_flash(*gpu, {"hca"}, 9);
  const int64_t V = model->config().vocab_size, lens[2] = {300, 40};
  std::vector<int32_t> ids(300);
  for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<int32_t>((7919 * t + 3) % V);
  using Logits = Model::BatchItem::Logits;
  auto forward = [&](Logits first, Logits second) {
    std::vector<SequenceState> states;
    for (int i = 0; i < 2; ++i) states.push_back(model->new_state());
    const Model::BatchItem items[2] = {
        {std::span<const int32_t>(ids.data(), lens[0]), &states[0], first},
        {std::span<const int32_t>(ids.data(), lens[1]), &states[1], second}};
    const Tensor l = model->forward_batch(items);
    return std::vector<float>(l.data_as<float>(), l.data_as<float>() + l.numel());
  };
  const std::vector<float> all = forward(Logits::kAll, Logits::kAll);
  ASSERT_EQ(static_cast<int64_t>(all.size()), 340 * V);
  const std::vector<float> some = forward(Logits::kLast, Logits::kAll);
  std::vector<float> want(all.begin() + 299 * V, all.begin() + 300 * V);
  want.insert(want.end(), all.begin() + 300 * V, all.end());
  EXPECT_TRUE(some == want);
}

}  // namespace
}  // namespace deepinfer::cudatest
