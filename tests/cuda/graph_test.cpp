// Decode steps run as CUDA graphs (Backend::begin_graph, one per batch size and layout, updated
// and replayed) give bitwise the logits of the same steps launched one op at a time, through
// window closes, compressed-entry growth and batch-size changes; kept graphs are reused and
// stay within their bound; programmatic launches and side branches give the plain one-stream
// launches' bits. Random weights
// (tiny preset: CSA, HCA and sliding layers). Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/kernels.h"
#include "bench/random_weights.h"
#include "cuda_test_util.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::cudatest {
namespace {

using deepseek_v4::Model;
using deepseek_v4::SequenceState;

// Contexts past the window, one HCA window close (every 128 tokens) within 24 steps and CSA
// closes every 4: the op list changes between steps.
const std::vector<int64_t> kContexts = {250, 131, 300, 77};

std::vector<SequenceState> make_states(const Model& model, Backend& gpu) {
  std::vector<SequenceState> st;
  for (size_t i = 0; i < kContexts.size(); ++i) {
    st.push_back(model.new_state());
    st.back().fill_synthetic(model.config(), gpu, kContexts[i], 40 + i, 64);
  }
  return st;
}

std::unique_ptr<Model> csa_hca_sliding_model(Backend& gpu) {
  bench::PresetOptions preset;
  preset.layer_types = {"csa", "hca", "sliding"};
  return bench::make_random_model(preset, 11, gpu);
}

// Decode step `step` over the first B of `states` (by default 4, then 3 every third step: the
// last sequence sits out).
Tensor decode_step(Model& model, std::vector<SequenceState>& states, int step, size_t B = 0) {
  if (B == 0) B = step % 3 == 2 ? 3 : 4;
  std::vector<int32_t> tokens(B);
  for (size_t i = 0; i < B; ++i) tokens[i] = static_cast<int32_t>((97 * step + 31 * i) % 500);
  std::vector<Model::BatchItem> items;
  for (size_t i = 0; i < B; ++i)
    items.push_back({std::span<const int32_t>(&tokens[i], 1), &states[i]});
  return model.forward_batch(items);
}

int64_t count_differing(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.numel(), b.numel());
  int64_t differ = 0;
  for (int64_t k = 0; k < a.numel() && k < b.numel(); ++k)
    differ += std::memcmp(a.data_as<float>() + k, b.data_as<float>() + k, 4) != 0;
  return differ;
}

TEST(CudaGraphs, ReplayedDecodeStepsGiveTheEagerLogits) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  const std::unique_ptr<Model> model = csa_hca_sliding_model(*gpu);
  std::vector<SequenceState> eager_states = make_states(*model, *gpu),
                             graph_states = make_states(*model, *gpu);
  const cuda::GraphStats before = *cuda_graph_stats(*gpu);
  constexpr int kSteps = 24;
  int64_t graph_steps = 0;
  for (int step = 0; step < kSteps; ++step) {
    set_cuda_graphs(*gpu, false);
    const Tensor eager = decode_step(*model, eager_states, step);
    set_cuda_graphs(*gpu, true);
    const Tensor graphed = decode_step(*model, graph_states, step);
    ++graph_steps;
    const int64_t differ = count_differing(eager, graphed);
    ASSERT_EQ(differ, 0) << "step " << step << ": " << differ << " of " << eager.numel()
                         << " logits differ";
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
  EXPECT_EQ(after.upload_copies, 1) << "a step's uploads arrive as one copy";
  EXPECT_GT(after.packed_bytes, 0);
}

// The host bytes a recording uploads (from_host, and the ops' own tables: copy_batch's here)
// reach the device as one copy at the graph's start, each replay with its own recording's
// bytes; a from_host tensor kept past later recordings keeps its bytes; one that does not fit
// the packet (over 4 MiB) is uploaded on its own, in order.
TEST(CudaGraphs, ARecordingsUploadsArriveAsOneCopy) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  set_cuda_graphs(*gpu, true);
  constexpr int64_t kRows = 16, kCols = 8;
  std::vector<float> rows(kRows * kCols);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i);
  const Tensor table = gpu->from_host(rows.data(), {kRows, kCols}, DType::kF32);
  const std::vector<float> big(size_t{5} << 20 >> 2, 3.5f);  // 5 MiB: past the packet
  Tensor kept_ids;
  for (int round = 0; round < 4; ++round) {
    std::vector<int32_t> ids = {round, 2 * round + 1, 15 - round};
    Tensor gathered = gpu->empty({3, kCols}), copied = gpu->empty({3, kCols}),
           big_copy = gpu->empty({static_cast<int64_t>(big.size())});
    Tensor ids_dev, big_dev;
    {
      SyncFreeRegion sync_free(*gpu, "the test recording");
      GraphRegion graph(*gpu, 7);
      ids_dev = gpu->from_host(ids.data(), {3}, DType::kI32);
      gpu->embedding(ids_dev, table, gathered);
      const std::vector<TensorView> src = {gathered.view()}, dst = {copied.view()};
      gpu->copy_batch(src, dst);
      if (round == 2) {
        big_dev = gpu->from_host(big.data(), {static_cast<int64_t>(big.size())}, DType::kF32);
        gpu->copy(big_dev, big_copy);
      }
      graph.finish();
    }
    const cuda::GraphStats& stats = *cuda_graph_stats(*gpu);
    EXPECT_EQ(stats.upload_copies, round == 2 ? 2 : 1) << "round " << round;
    EXPECT_GT(stats.packed_bytes, 0) << "round " << round;
    const std::vector<float> got = floats(to_host(*gpu, copied));
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < kCols; ++c)
        ASSERT_EQ(got[r * kCols + c], static_cast<float>(ids[r] * kCols + c))
            << "round " << round << " row " << r << " col " << c;
    if (round == 2) {
      EXPECT_EQ(floats(to_host(*gpu, big_copy)), big);
    }
    if (round == 0) kept_ids = ids_dev;
  }
  EXPECT_EQ(ints(to_host(*gpu, kept_ids)), (std::vector<int32_t>{0, 1, 15}))
      << "a kept tensor keeps its recording's bytes";
}

// Kernels launched as programmatic dependents of the kernel before them (launch.cuh: launched
// while that kernel drains, waiting for its writes) give bitwise the logits of plain launches,
// eagerly and in graphs, and the recorded graphs keep the programmatic edges (plain launches
// record none).
TEST(CudaGraphs, ProgrammaticLaunchesGiveThePlainLogits) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  const std::unique_ptr<Model> model = csa_hca_sliding_model(*gpu);
  std::vector<SequenceState> plain = make_states(*model, *gpu), eager = make_states(*model, *gpu),
                             graphed = make_states(*model, *gpu);
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  for (int step = 0; step < 12; ++step) {
    cuda::set_programmatic_launch(false);
    set_cuda_graphs(*gpu, true);
    const Tensor want = decode_step(*model, plain, step);
    EXPECT_EQ(cuda_graph_stats(*gpu)->programmatic_edges, 0) << "step " << step;
    cuda::set_programmatic_launch(true);
    const Tensor got_graph = decode_step(*model, graphed, step);
    if (major >= 9) {
      EXPECT_GT(cuda_graph_stats(*gpu)->programmatic_edges, 50) << "step " << step;
    }
    set_cuda_graphs(*gpu, false);
    const Tensor got_eager = decode_step(*model, eager, step);
    set_cuda_graphs(*gpu, true);
    EXPECT_EQ(count_differing(want, got_graph), 0) << "graph, step " << step;
    ASSERT_EQ(count_differing(want, got_eager), 0) << "eager, step " << step;
  }
}

// A layer's side branches (Backend::begin_side: the attention's key chain, in two branches in a
// CSA layer, and the router) give bitwise the logits of one stream, eagerly and in graphs. Each
// branch shows in the graph as one edge more than a chain has (the fork's second successor; the
// join's second predecessor closes it), each after the first one more (its first node also
// follows the last branch's tail: the side branches form one chain); none with side branches off.
TEST(CudaGraphs, SideBranchesGiveTheOneStreamLogits) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  const std::unique_ptr<Model> model = csa_hca_sliding_model(*gpu);
  const std::vector<AttnType>& types = model->config().layer_types;
  const int64_t layers = static_cast<int64_t>(types.size());
  const int64_t csa_layers = std::count(types.begin(), types.end(), AttnType::kCSA);
  ASSERT_GT(csa_layers, 0);
  std::vector<SequenceState> one = make_states(*model, *gpu), eager = make_states(*model, *gpu),
                             graphed = make_states(*model, *gpu);
  for (int step = 0; step < 12; ++step) {
    set_cuda_side_stream(*gpu, false);
    set_cuda_graphs(*gpu, true);
    const Tensor want = decode_step(*model, one, step);
    const cuda::GraphStats chain = *cuda_graph_stats(*gpu);
    EXPECT_EQ(chain.edges, chain.nodes - 1) << "one stream records a chain, step " << step;
    set_cuda_side_stream(*gpu, true);
    const Tensor got_graph = decode_step(*model, graphed, step);
    const cuda::GraphStats& forked = *cuda_graph_stats(*gpu);
    const int64_t branches = 2 * layers + csa_layers;
    EXPECT_EQ(forked.edges - (forked.nodes - 1), 2 * branches - 1)
        << "two branches per layer and one more per CSA layer, step " << step;
    set_cuda_graphs(*gpu, false);
    const Tensor got_eager = decode_step(*model, eager, step);
    set_cuda_graphs(*gpu, true);
    EXPECT_EQ(count_differing(want, got_graph), 0) << "graph, step " << step;
    ASSERT_EQ(count_differing(want, got_eager), 0) << "eager, step " << step;
  }
}

// A block freed while a side branch is open (either stream may still be using it) goes back to
// the cache only at the join; nested branches are an error; a join without a branch does
// nothing.
TEST(CudaSideBranch, BlocksFreedInABranchWaitForItsJoin) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  set_cuda_side_stream(*gpu, true);
  void* block = nullptr;
  {
    const Tensor t = gpu->empty({1000});
    block = t.view().data();
  }
  Tensor a = gpu->empty({1000});
  ASSERT_EQ(a.view().data(), block) << "the cache hands a freed block out again";
  gpu->begin_side();
  EXPECT_THROW(gpu->begin_side(), Error);
  a = Tensor();  // freed on the side branch
  const Tensor on_side = gpu->empty({1000});
  EXPECT_NE(on_side.view().data(), block);
  gpu->end_side();
  const Tensor on_main = gpu->empty({1000});
  EXPECT_NE(on_main.view().data(), block);
  gpu->join_side();
  const Tensor after = gpu->empty({1000});
  EXPECT_EQ(after.view().data(), block) << "back in the cache after the join";
  gpu->join_side();
  gpu->end_side();
}

// The kept executable graphs stay within their bound over all batch sizes (least recently run
// first out), and a step whose graph went is recorded again with the same logits.
TEST(CudaGraphs, KeptGraphsStayWithinTheBoundOverAllBatchSizes) {
  REQUIRE_GPU();
  std::unique_ptr<Backend> gpu = make_cuda_backend();
  const std::unique_ptr<Model> model = csa_hca_sliding_model(*gpu);
  std::vector<SequenceState> eager_states = make_states(*model, *gpu),
                             graph_states = make_states(*model, *gpu);
  set_cuda_graph_capacity(*gpu, 2);
  const cuda::GraphStats before = *cuda_graph_stats(*gpu);
  constexpr int kSteps = 9;
  for (int step = 0; step < kSteps; ++step) {
    const size_t B = 1 + step % 3;  // three keys, two kept graphs
    set_cuda_graphs(*gpu, false);
    const Tensor eager = decode_step(*model, eager_states, step, B);
    set_cuda_graphs(*gpu, true);
    const Tensor graphed = decode_step(*model, graph_states, step, B);
    ASSERT_EQ(count_differing(eager, graphed), 0) << "step " << step;
    EXPECT_LE(cuda_graph_stats(*gpu)->kept, 2) << "step " << step;
  }
  const cuda::GraphStats& after = *cuda_graph_stats(*gpu);
  EXPECT_EQ(after.launched - before.launched, kSteps);
  EXPECT_GE(after.evicted - before.evicted, kSteps - 2) << "each step's graph went two steps ago";
  set_cuda_graph_capacity(*gpu, 64);
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
