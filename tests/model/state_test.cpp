// Synthetic context (SequenceState::fill_synthetic): after n tokens it has exactly the layout a
// real prefill of n tokens leaves (ring rows, compressed entries and indexer keys, pending
// windows, the CSA overlap carry, the token count), and the model decodes on it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/bundled_model.h"
#include "model/deepseek_v4/model.h"

using namespace deepinfer;
using deepseek_v4::CompressorState;
using deepseek_v4::SequenceState;

namespace {

std::vector<int64_t> shape(const Tensor& t) {
  std::vector<int64_t> s;
  if (!t.defined()) return s;
  for (int i = 0; i < t.ndim(); ++i) s.push_back(t.dim(i));
  return s;
}

void expect_same_compressor(const CompressorState& got, const CompressorState& want,
                            const std::string& where) {
  EXPECT_EQ(got.pending, want.pending) << where;
  EXPECT_EQ(got.has_prev, want.has_prev) << where;
  EXPECT_EQ(got.entries.rows(), want.entries.rows()) << where;
  EXPECT_EQ(got.entries.width(), want.entries.width()) << where;
  EXPECT_EQ(shape(got.pend_kv_a), shape(want.pend_kv_a)) << where;
  EXPECT_EQ(shape(got.pend_gate_a), shape(want.pend_gate_a)) << where;
  EXPECT_EQ(shape(got.pend_kv_b), shape(want.pend_kv_b)) << where;
  EXPECT_EQ(shape(got.pend_gate_b), shape(want.pend_gate_b)) << where;
  EXPECT_EQ(shape(got.prev_kv_a), shape(want.prev_kv_a)) << where;
  EXPECT_EQ(shape(got.prev_gate_a), shape(want.prev_gate_a)) << where;
}

void expect_same_layout(const SequenceState& got, const SequenceState& want, int64_t n) {
  const std::string at = "after " + std::to_string(n) + " tokens";
  EXPECT_EQ(got.num_tokens, want.num_tokens) << at;
  ASSERT_EQ(got.layers.size(), want.layers.size()) << at;
  for (size_t l = 0; l < got.layers.size(); ++l) {
    const std::string where = at + ", layer " + std::to_string(l);
    EXPECT_EQ(got.layers[l].ring_rows, want.layers[l].ring_rows) << where;
    EXPECT_EQ(shape(got.layers[l].ring), shape(want.layers[l].ring)) << where;
    expect_same_compressor(got.layers[l].comp, want.layers[l].comp, where + " compressor");
    expect_same_compressor(got.layers[l].indexer, want.layers[l].indexer, where + " indexer");
  }
  EXPECT_EQ(got.device_bytes(), want.device_bytes()) << at;
}

double rms(const TensorView& v) {
  if (v.numel() == 0) return 0;
  double s = 0;
  for (int64_t i = 0; i < v.numel(); ++i)
    s += double(v.data_as<float>()[i]) * v.data_as<float>()[i];
  return std::sqrt(s / v.numel());
}

std::vector<int32_t> random_ids(std::mt19937& rng, int64_t n, int vocab) {
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
  return ids;
}

bool all_finite(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.data_as<float>()[i])) return false;
  return true;
}

class SyntheticState : public testing_model::BundledModelTest {};

TEST_F(SyntheticState, HasTheLayoutOfARealPrefill) {
  const ModelConfig& c = model_->config();
  ASSERT_EQ(c.compress_rate_csa, 4);
  ASSERT_EQ(c.compress_rate_hca, 16);
  ASSERT_EQ(c.sliding_window, 64);
  std::mt19937 rng(11);
  // 0, 1, m - 1, m, 5m + 3 for both rates (CSA 4, HCA 16), past the window, and a long one.
  for (const int64_t n : {0, 1, 3, 4, 15, 16, 23, 83, 100, 300}) {
    SequenceState real = model_->new_state();
    if (n > 0) model_->forward(random_ids(rng, n, c.vocab_size), real);
    SequenceState synth = model_->new_state();
    synth.fill_synthetic(c, *backend_, n, 1000 + n);
    expect_same_layout(synth, real, n);

    // One decode step on each: still the same layout, and finite logits.
    const std::vector<int32_t> next = random_ids(rng, 1, c.vocab_size);
    const Tensor lr = model_->forward(next, real);
    const Tensor ls = model_->forward(next, synth);
    expect_same_layout(synth, real, n + 1);
    EXPECT_TRUE(all_finite(ls)) << n;
    EXPECT_TRUE(all_finite(lr)) << n;
  }
}

TEST_F(SyntheticState, ValuesHaveUnitScaleAndDependOnlyOnTheSeed) {
  const ModelConfig& c = model_->config();
  SequenceState a = model_->new_state(), b = model_->new_state(), d = model_->new_state();
  a.fill_synthetic(c, *backend_, 203, 7);
  b.fill_synthetic(c, *backend_, 203, 7);
  d.fill_synthetic(c, *backend_, 203, 8);
  const int csa = 1;  // the bundled model: sliding, CSA, HCA, CSA, HCA, sliding
  ASSERT_EQ(c.layer_types[csa], AttnType::kCSA);
  const TensorView ea = a.layers[csa].comp.entries.view(), eb = b.layers[csa].comp.entries.view();
  const TensorView ed = d.layers[csa].comp.entries.view();
  ASSERT_EQ(ea.dim(0), 203 / 4);
  EXPECT_EQ(std::memcmp(ea.data(), eb.data(), ea.nbytes()), 0);
  EXPECT_NE(std::memcmp(ea.data(), ed.data(), ea.nbytes()), 0);
  // Different parts of one state are different streams.
  EXPECT_NE(a.layers[csa].indexer.entries.view().data_as<float>()[0],
            a.layers[csa].comp.entries.view().data_as<float>()[0]);
  EXPECT_NE(a.layers[0].ring.view().data_as<float>()[0],
            a.layers[5].ring.view().data_as<float>()[0]);
  for (const TensorView& v :
       {ea, a.layers[csa].indexer.entries.view(), a.layers[0].ring_view(),
        a.layers[csa].comp.pend_kv_a.view().slice_rows(0, a.layers[csa].comp.pending)}) {
    EXPECT_GT(rms(v), 0.8);
    EXPECT_LT(rms(v), 1.2);
  }
  // For reference: the scale of a real prefill's state on the trained model.
  SequenceState real = model_->new_state();
  std::mt19937 rng(3);
  model_->forward(random_ids(rng, 203, c.vocab_size), real);
  std::printf(
      "[state] real rms: ring %.3f, csa entries %.3f, indexer keys %.3f, pending kv %.3f\n",
      rms(real.layers[0].ring_view()), rms(real.layers[csa].comp.entries.view()),
      rms(real.layers[csa].indexer.entries.view()),
      rms(real.layers[csa].comp.pend_kv_a.view().slice_rows(0, real.layers[csa].comp.pending)));
}

TEST_F(SyntheticState, ReservesRoomAndRejectsAUsedState) {
  const ModelConfig& c = model_->config();
  SequenceState s = model_->new_state();
  s.fill_synthetic(c, *backend_, 4000, 1, 100);
  const int csa = 1, hca = 2;
  EXPECT_EQ(s.layers[csa].comp.entries.rows(), 1000);
  EXPECT_EQ(s.layers[csa].comp.entries.capacity(), 1025);  // (4000 + 100) / 4
  EXPECT_EQ(s.layers[hca].comp.entries.rows(), 250);
  EXPECT_EQ(s.layers[hca].comp.entries.capacity(), 256);  // (4000 + 100) / 16
  EXPECT_THROW(s.fill_synthetic(c, *backend_, 10, 1), Error);
  SequenceState fresh = model_->new_state();
  EXPECT_THROW(fresh.fill_synthetic(c, *backend_, -1, 1), Error);
}

}  // namespace
