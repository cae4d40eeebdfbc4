// Decode steps run as CUDA graphs (Backend::begin_graph, one per batch size and layout, updated
// and replayed) give bitwise the logits of the same steps launched one op at a time, through
// window closes, compressed-entry growth and batch-size changes; and kept graphs are reused.
// Random weights (tiny preset: CSA, HCA and sliding layers). Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bench/random_weights.h"
#include "cuda_test_util.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::cudatest {
namespace {

using deepseek_v4::Model;
using deepseek_v4::SequenceState;

TEST(CudaGraphs, ReplayedDecodeStepsGiveTheEagerLogits) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  bench::PresetOptions preset;
  preset.layer_types = {"csa", "hca", "sliding"};
  const std::unique_ptr<Model> model = bench::make_random_model(preset, 11, *gpu);
  const ModelConfig& c = model->config();
  // Contexts past the window, one HCA window close (every 128 tokens) within the steps and CSA
  // closes every 4: the op list changes between steps.
  const std::vector<int64_t> contexts = {250, 131, 300, 77};
  auto make_states = [&] {
    std::vector<SequenceState> st;
    for (size_t i = 0; i < contexts.size(); ++i) {
      st.push_back(model->new_state());
      st.back().fill_synthetic(c, *gpu, contexts[i], 40 + i, 64);
    }
    return st;
  };
  std::vector<SequenceState> eager_states = make_states(), graph_states = make_states();
  const cuda::GraphStats before = *cuda_graph_stats(*gpu);
  constexpr int kSteps = 24;
  int64_t graph_steps = 0;
  for (int step = 0; step < kSteps; ++step) {
    // Batch sizes 4, then 3 (the last sequence sits out every third step), then 4 again.
    const size_t B = step % 3 == 2 ? 3 : 4;
    std::vector<int32_t> tokens(B);
    for (size_t i = 0; i < B; ++i) tokens[i] = static_cast<int32_t>((97 * step + 31 * i) % 500);
    auto run = [&](std::vector<SequenceState>& states, bool graphs) {
      std::vector<Model::BatchItem> items;
      for (size_t i = 0; i < B; ++i)
        items.push_back({std::span<const int32_t>(&tokens[i], 1), &states[i]});
      set_cuda_graphs(*gpu, graphs);
      return model->forward_batch(items);
    };
    const Tensor eager = run(eager_states, false);
    const Tensor graphed = run(graph_states, true);
    ++graph_steps;
    ASSERT_EQ(eager.numel(), graphed.numel());
    int64_t differ = 0;
    for (int64_t k = 0; k < eager.numel(); ++k)
      differ += std::memcmp(eager.data_as<float>() + k, graphed.data_as<float>() + k, 4) != 0;
    ASSERT_EQ(differ, 0) << "step " << step << " (batch " << B << "): " << differ << " of "
                         << eager.numel() << " logits differ";
  }
  set_cuda_graphs(*gpu, true);
  const cuda::GraphStats& after = *cuda_graph_stats(*gpu);
  EXPECT_EQ(after.launched - before.launched, graph_steps) << "every graph step ran as a graph";
  EXPECT_EQ(after.update_failures - before.update_failures, 0)
      << "cudaGraphExecUpdateResult " << after.last_update_result << " at "
      << after.last_refused_node;
  EXPECT_GT(after.updated - before.updated, kSteps / 2) << "kept graphs are replayed";
  EXPECT_LT(after.instantiated - before.instantiated, kSteps / 2);
  EXPECT_GT(after.nodes, 50) << "the whole forward is one graph";
}

// A prefill (several tokens of one sequence) is not recorded: graphs are for decode steps.
TEST(CudaGraphs, PrefillStepsRunWithoutAGraph) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  bench::PresetOptions preset;
  preset.layer_types = {"csa"};
  const std::unique_ptr<Model> model = bench::make_random_model(preset, 12, *gpu);
  set_cuda_graphs(*gpu, true);
  SequenceState st = model->new_state();
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9};
  const int64_t launched = cuda_graph_stats(*gpu)->launched;
  model->forward(prompt, st);
  EXPECT_EQ(cuda_graph_stats(*gpu)->launched, launched);
  const int32_t next = 10;
  model->forward(std::span<const int32_t>(&next, 1), st);
  EXPECT_EQ(cuda_graph_stats(*gpu)->launched, launched + 1);
}

}  // namespace
}  // namespace deepinfer::cudatest
