// Golden tests: our CPU logits against transformers' deepseek_v4 on tiny random checkpoints
// (tests/data/golden, made by tools/golden/make_fixtures.py), whole prompt, token by token and
// in odd chunks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/golden.h"

using namespace deepinfer;

namespace {

using golden::argmax_mismatches;
using golden::Fixture;
using golden::load_fixture;
using golden::rel_l2;
using golden::run;
const std::string kGolden = golden::dir();

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, MatchesTransformersInEverySplit) {
  const std::string name = GetParam();
  const Fixture f = load_fixture(name);
  auto backend = make_cpu_backend();
  auto model = deepseek_v4::Model::load(kGolden + name, *backend);
  const int64_t V = model->config().vocab_size;
  ASSERT_EQ(f.prefill.shape, (std::vector<int64_t>{int64_t(f.ids.size()), V}));

  struct Case {
    const char* what;
    int64_t chunk;
    const std::vector<float>* ref;
  };
  for (const Case& c : {Case{"prefill", 0, &f.prefill.data}, Case{"chunk 1", 1, &f.decode.data},
                        Case{"chunk 7", 7, &f.prefill.data}}) {
    const std::vector<float> got = run(*model, f.ids, c.chunk);
    const double err = rel_l2(got, *c.ref);
    std::printf("[golden] %s %-8s rel L2 %.3e\n", name.c_str(), c.what, err);
    EXPECT_LE(err, 1e-3) << name << " " << c.what;
    EXPECT_EQ(argmax_mismatches(got, *c.ref, V, 1e-2), 0) << name << " " << c.what;
  }
}

TEST_P(Golden, GreedyContinuationMatchesTransformers) {
  const std::string name = GetParam();
  const Fixture f = load_fixture(name);
  auto backend = make_cpu_backend();
  auto model = deepseek_v4::Model::load(kGolden + name, *backend);
  const int64_t V = model->config().vocab_size;
  auto state = model->new_state();
  Tensor l = model->forward(f.greedy_prompt, state);
  std::vector<int32_t> got;
  auto argmax = [&](const float* row) {
    return static_cast<int32_t>(std::max_element(row, row + V) - row);
  };
  int32_t next = argmax(l.data_as<float>() + (l.dim(0) - 1) * V);
  for (size_t i = 0; i < f.greedy_continuation.size(); ++i) {
    got.push_back(next);
    Tensor step = model->forward(std::span<const int32_t>(&next, 1), state);
    next = argmax(step.data_as<float>());
  }
  EXPECT_EQ(got, f.greedy_continuation);
}

// Sequences of different lengths fed together, each in its own chunk size, as the engine batches
// them: every sequence must see exactly what it would see alone (prefixes of the fixture prompt
// have the reference's prefix logits, since attention is causal).
TEST_P(Golden, BatchedSequencesMatchTheReference) {
  const std::string name = GetParam();
  const Fixture f = load_fixture(name);
  auto backend = make_cpu_backend();
  auto model = deepseek_v4::Model::load(kGolden + name, *backend);
  const int64_t V = model->config().vocab_size, S = f.ids.size();
  std::vector<golden::BatchedSeq> seqs;
  for (auto [len, chunk] : {std::pair<int64_t, int64_t>{S, 5}, {37, 3}, {S * 3 / 4, 11}, {9, 1}})
    seqs.push_back({len, chunk, {}});
  golden::run_batched(*model, f.ids, seqs);
  for (auto& q : seqs) {
    const std::vector<float> ref(f.prefill.data.begin(), f.prefill.data.begin() + q.len * V);
    EXPECT_LE(rel_l2(q.logits, ref), 1e-3) << name << " length " << q.len;
  }
}

// A batch asking for some rows' logits (a prompt's last, none, every one) gets those rows of the
// same batch asking for all of them: the last mHC expansion and the head run on the requested
// rows alone (the CPU's mixing GEMM rounds by its row count, hence a tolerance; the CUDA kernels
// give the same bits: tests/cuda/batch_invariance_test.cpp).
TEST_P(Golden, RequestedRowsAreTheRowsOfAnAllRowsForward) {
  const std::string name = GetParam();
  const Fixture f = load_fixture(name);
  auto backend = make_cpu_backend();
  auto model = deepseek_v4::Model::load(kGolden + name, *backend);
  const int64_t V = model->config().vocab_size, S = f.ids.size();
  using Logits = deepseek_v4::Model::BatchItem::Logits;
  const int64_t lens[3] = {S, 37, 20};
  auto forward = [&](const Logits(&want)[3]) {
    std::vector<deepseek_v4::SequenceState> states;
    for (int i = 0; i < 3; ++i) states.push_back(model->new_state());
    std::vector<deepseek_v4::Model::BatchItem> items;
    for (int i = 0; i < 3; ++i)
      items.push_back({std::span<const int32_t>(f.ids.data(), lens[i]), &states[i], want[i]});
    const Tensor l = model->forward_batch(items);
    return std::vector<float>(l.data_as<float>(), l.data_as<float>() + l.numel());
  };
  const std::vector<float> all = forward({Logits::kAll, Logits::kAll, Logits::kAll});
  ASSERT_EQ(static_cast<int64_t>(all.size()), (S + 37 + 20) * V);
  const std::vector<float> some = forward({Logits::kLast, Logits::kNone, Logits::kAll});
  ASSERT_EQ(static_cast<int64_t>(some.size()), (1 + 20) * V);
  std::vector<float> want(all.begin() + (S - 1) * V, all.begin() + S * V);  // the first's last
  want.insert(want.end(), all.begin() + (S + 37) * V, all.end());           // the third's rows
  EXPECT_LE(rel_l2(some, want), 1e-6) << name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::Values("tiny-a", "tiny-b", "tiny-c"));

TEST(GoldenCli, LogitsSubcommandWritesTheSameLogits) {
  const Fixture f = load_fixture("tiny-a");
  std::string ids;
  for (size_t i = 0; i < f.ids.size(); ++i) ids += (i ? "," : "") + std::to_string(f.ids[i]);
  const std::string out = ::testing::TempDir() + "/cli_logits.npy";
  const std::string cmd = std::string(DEEPINFER_BINARY_DIR) + "/src/api/deepinfer logits --model " +
                          kGolden + "tiny-a --input-ids " + ids + " --chunk 7 --out " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const NpyArray got = read_npy(out);
  ASSERT_EQ(got.shape, f.prefill.shape);
  EXPECT_LE(rel_l2(got.data, f.prefill.data), 1e-3);
}

TEST(GoldenCli, BadInputsFailWithAClearMessage) {
  const std::string bin = std::string(DEEPINFER_BINARY_DIR) + "/src/api/deepinfer logits ";
  const std::string out = ::testing::TempDir() + "/bad.npy";
  auto run_cmd = [&](const std::string& args) {
    const std::string cmd = bin + args + " --out " + out + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string text;
    char buf[512];
    while (fgets(buf, sizeof buf, p)) text += buf;
    const int rc = pclose(p);
    return std::make_pair(rc, text);
  };
  auto [rc1, msg1] = run_cmd("--model " + kGolden + "tiny-a --input-ids 1,2,99999");
  EXPECT_NE(rc1, 0);
  EXPECT_NE(msg1.find("99999"), std::string::npos) << msg1;
  auto [rc2, msg2] = run_cmd("--model " + kGolden + "tiny-a --input-ids 1,x,3");
  EXPECT_NE(rc2, 0);
  EXPECT_NE(msg2.find("--input-ids"), std::string::npos) << msg2;
  auto [rc3, msg3] = run_cmd("--model /nonexistent/dir --input-ids 1,2");
  EXPECT_NE(rc3, 0);
  EXPECT_NE(msg3.find("/nonexistent/dir"), std::string::npos) << msg3;
}

}  // namespace
