// Random weights generated on the backend (bench --random-weights): the source hands
// load_weights exactly the shapes and dtypes a checkpoint of the same preset gives, small
// parameters equal make-random's values, matrices follow its distributions, the model runs, and
// the roofline is the checkpoint's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bench/random_weights.h"
#include "bench/roofline.h"
#include "io/model_config.h"
#include "io/weights.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/weights.h"
#include "test_util.h"

namespace deepinfer::bench {
namespace {

using deepseek_v4::ModelWeights;

constexpr uint64_t kSeed = 7;  // the seed of testing::tiny_checkpoint
constexpr int kLayers = 6;     // every layer kind of the tiny schedule, both hash layers

PresetOptions tiny(int layers = kLayers) {
  PresetOptions o;
  o.preset = "tiny";
  o.num_layers = layers;
  return o;
}

std::vector<int64_t> shape(const Tensor& t) {
  std::vector<int64_t> s;
  for (int i = 0; i < t.ndim(); ++i) s.push_back(t.dim(i));
  return s;
}

// Calls fn(name, got, want) for every tensor of the two weight sets, in the same order.
template <typename Fn>
void for_each_pair(const ModelWeights& a, const ModelWeights& b, Fn&& fn) {
  fn("embed", a.embed, b.embed);
  fn("head", a.head, b.head);
  fn("norm", a.norm, b.norm);
  fn("hc_head_fn", a.hc_head_fn, b.hc_head_fn);
  fn("hc_head_base", a.hc_head_base, b.hc_head_base);
  fn("hc_head_scale", a.hc_head_scale, b.hc_head_scale);
  fn("inv_freq_main", a.inv_freq_main, b.inv_freq_main);
  fn("inv_freq_compress", a.inv_freq_compress, b.inv_freq_compress);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const auto& x = a.layers[l];
    const auto& y = b.layers[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    fn(p + "attn_norm", x.attn_norm, y.attn_norm);
    fn(p + "ffn_norm", x.ffn_norm, y.ffn_norm);
    for (const auto& [s, hx, hy] : {std::tuple{"hc_attn", &x.hc_attn, &y.hc_attn},
                                    std::tuple{"hc_ffn", &x.hc_ffn, &y.hc_ffn}}) {
      fn(p + s + ".fn", hx->fn, hy->fn);
      fn(p + s + ".base", hx->base, hy->base);
      fn(p + s + ".scale", hx->scale, hy->scale);
    }
    const auto& ax = x.attn;
    const auto& ay = y.attn;
    fn(p + "wq_a", ax.wq_a, ay.wq_a);
    fn(p + "q_norm", ax.q_norm, ay.q_norm);
    fn(p + "wq_b", ax.wq_b, ay.wq_b);
    fn(p + "wkv", ax.wkv, ay.wkv);
    fn(p + "kv_norm", ax.kv_norm, ay.kv_norm);
    fn(p + "wo_a", ax.wo_a, ay.wo_a);
    fn(p + "wo_b", ax.wo_b, ay.wo_b);
    fn(p + "sinks", ax.sinks, ay.sinks);
    EXPECT_EQ(ax.has_compressor, ay.has_compressor) << p;
    EXPECT_EQ(ax.has_indexer, ay.has_indexer) << p;
    for (const auto& [s, cx, cy] :
         {std::tuple{"compressor", &ax.compressor, &ay.compressor},
          std::tuple{"indexer.compressor", &ax.indexer.compressor, &ay.indexer.compressor}}) {
      const std::string q = p + s + ".";
      fn(q + "wkv_a", cx->wkv_a, cy->wkv_a);
      fn(q + "wkv_b", cx->wkv_b, cy->wkv_b);
      fn(q + "wgate_a", cx->wgate_a, cy->wgate_a);
      fn(q + "wgate_b", cx->wgate_b, cy->wgate_b);
      fn(q + "slot_bias", cx->slot_bias, cy->slot_bias);
      fn(q + "norm", cx->norm, cy->norm);
    }
    fn(p + "indexer.wq_b", ax.indexer.wq_b, ay.indexer.wq_b);
    fn(p + "indexer.weights_proj", ax.indexer.weights_proj, ay.indexer.weights_proj);
    const auto& mx = x.moe;
    const auto& my = y.moe;
    fn(p + "gate", mx.gate, my.gate);
    fn(p + "bias", mx.bias, my.bias);
    fn(p + "tid2eid", mx.tid2eid, my.tid2eid);
    fn(p + "w1", mx.w1, my.w1);
    fn(p + "w3", mx.w3, my.w3);
    fn(p + "w2", mx.w2, my.w2);
    fn(p + "shared_w1", mx.shared_w1, my.shared_w1);
    fn(p + "shared_w3", mx.shared_w3, my.shared_w3);
    fn(p + "shared_w2", mx.shared_w2, my.shared_w2);
  }
}

bool is_matrix(const std::string& name) {
  for (const char* m : {"embed", "head", "wq_a", "wq_b", "wkv", "wo_a", "wo_b", "wkv_a", "wkv_b",
                        "wgate_a", "wgate_b", "weights_proj", ".gate", "w1", "w2", "w3"})
    if (name.ends_with(m)) return true;
  return false;
}

struct Moments {
  double mean = 0, sd = 0;
};

Moments moments(const Tensor& t) {
  double s = 0, q = 0;
  const float* v = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    s += v[i];
    q += double(v[i]) * v[i];
  }
  const double n = static_cast<double>(t.numel());
  return {s / n, std::sqrt(std::max(0.0, q / n - (s / n) * (s / n)))};
}

class RandomWeights : public ::testing::Test {
 protected:
  void SetUp() override { backend = make_cpu_backend(); }
  std::unique_ptr<Backend> backend;
};

TEST_F(RandomWeights, MatchACheckpointOfThePresetInShapeDtypeAndParameters) {
  const std::string dir = testing::tiny_checkpoint(CheckpointDtype::kBf16, kLayers);
  const ModelConfig config = preset_model_config(tiny());
  auto store = WeightStore::open(dir);
  const ModelWeights want = deepseek_v4::load_weights(config, *store, *backend);
  const ModelWeights got =
      deepseek_v4::load_weights(config, RandomWeightSource(config, kSeed), *backend);
  int matrices = 0, params = 0;
  for_each_pair(got, want, [&](const std::string& name, const Tensor& g, const Tensor& w) {
    ASSERT_EQ(g.defined(), w.defined()) << name;
    if (!g.defined()) return;
    ASSERT_EQ(shape(g), shape(w)) << name;
    ASSERT_EQ(g.dtype(), w.dtype()) << name;
    if (g.dtype() == DType::kI32 || !is_matrix(name)) {
      // tid2eid, norms, mHC, sinks, ape, bias, rope frequencies: make-random's exact values.
      EXPECT_EQ(std::memcmp(g.view().data(), w.view().data(), g.view().nbytes()), 0) << name;
      ++params;
      return;
    }
    // Matrices: uniform with the checkpoint's normal mean and deviation (within 5 sigma of the
    // sampling error: the sd of a sample sd is ~0.45 sd / sqrt(n) for uniform values, ~0.71
    // sd / sqrt(n) for normal ones).
    const Moments mg = moments(g), mw = moments(w);
    const double n = static_cast<double>(g.numel());
    EXPECT_NEAR(mg.sd, mw.sd, 5 * 0.85 * mw.sd / std::sqrt(n)) << name;
    EXPECT_NEAR(mg.mean, 0.0, 5 * mw.sd / std::sqrt(n)) << name;
    EXPECT_NE(std::memcmp(g.view().data(), w.view().data(), g.view().nbytes()), 0) << name;
    ++matrices;
  });
  EXPECT_GT(matrices, 50);
  EXPECT_GT(params, 50);
  // Hash layers: every row holds k distinct valid experts.
  const Tensor& t = got.layers[0].moe.tid2eid;
  ASSERT_TRUE(t.defined());
  const int64_t k = t.dim(1);
  for (int64_t r = 0; r < t.dim(0); ++r)
    for (int64_t i = 0; i < k; ++i) {
      const int32_t e = t.data_as<int32_t>()[r * k + i];
      ASSERT_TRUE(e >= 0 && e < config.n_routed_experts) << r;
      for (int64_t j = 0; j < i; ++j) ASSERT_NE(e, t.data_as<int32_t>()[r * k + j]) << r;
    }
}

TEST_F(RandomWeights, CompressorSeriesAndExpertsAreDistinctStreams) {
  const ModelConfig config = preset_model_config(tiny());
  const ModelWeights a = deepseek_v4::load_weights(config, RandomWeightSource(config, 1), *backend);
  const ModelWeights b = deepseek_v4::load_weights(config, RandomWeightSource(config, 1), *backend);
  const ModelWeights c = deepseek_v4::load_weights(config, RandomWeightSource(config, 2), *backend);
  const auto& ca = a.layers[1].attn.compressor;  // CSA
  ASSERT_TRUE(ca.wkv_b.defined());
  EXPECT_NE(ca.wkv_a.data_as<float>()[0], ca.wkv_b.data_as<float>()[0]);
  const Tensor& w1 = a.layers[1].moe.w1;
  const int64_t per = w1.dim(1) * w1.dim(2);
  EXPECT_NE(std::memcmp(w1.data_as<float>(), w1.data_as<float>() + per, per * 4), 0);
  EXPECT_EQ(
      std::memcmp(w1.data_as<float>(), b.layers[1].moe.w1.data_as<float>(), w1.view().nbytes()), 0);
  EXPECT_NE(
      std::memcmp(w1.data_as<float>(), c.layers[1].moe.w1.data_as<float>(), w1.view().nbytes()), 0);
}

TEST_F(RandomWeights, ModelRunsWithFiniteLogitsOfUnitSpread) {
  auto model = make_random_model(tiny(), 3, *backend);
  const ModelConfig& c = model->config();
  std::vector<int32_t> ids;
  for (int i = 0; i < 90; ++i) ids.push_back((i * 7919) % c.vocab_size);
  auto state = model->new_state();
  const Tensor logits = model->forward(ids, state);
  ASSERT_EQ(shape(logits), (std::vector<int64_t>{90, c.vocab_size}));
  for (int64_t i = 0; i < logits.numel(); ++i)
    ASSERT_TRUE(std::isfinite(logits.data_as<float>()[i])) << i;
  const Moments m = moments(logits);
  EXPECT_GT(m.sd, 0.1);
  EXPECT_LT(m.sd, 10.0);
  // A decode step after the prompt.
  const int32_t next = 5;
  const Tensor l2 = model->forward(std::vector<int32_t>{next}, state);
  EXPECT_TRUE(std::isfinite(l2.data_as<float>()[0]));
}

TEST_F(RandomWeights, Mxfp4ExpertsAreRandomCodesWithOneScaleAndRun) {
  auto model = make_random_model(tiny(), 3, *backend, /*mxfp4_experts=*/true);
  const ModelConfig& c = model->config();
  const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size, D = c.hidden_size;
  const auto& moe = model->weights().layers.at(2).moe;
  ASSERT_EQ(moe.w1.dtype(), DType::kFP4E2M1);
  EXPECT_EQ(shape(moe.w1), (std::vector<int64_t>{E, I, D}));
  EXPECT_EQ(shape(moe.s2), (std::vector<int64_t>{E, I / 32, D}));
  // The codes: fill_random's stream of the layer's stacked experts; the scale: the power of two
  // nearest make-random's spread (U(-sqrt(3 / D), sqrt(3 / D)), standard deviation 1 / sqrt(D)).
  const RandomWeightSource src(c, 3);
  Tensor codes = backend->empty({E, I, D}, DType::kFP4E2M1);
  backend->fill_random(codes, src.tensor_seed("layers.2.ffn.experts.w1", 0), -6.f, 6.f);
  EXPECT_EQ(
      0, std::memcmp(codes.data_as<uint8_t>(), moe.w1.data_as<uint8_t>(), codes.view().nbytes()));
  const uint8_t want =
      static_cast<uint8_t>(127 + std::lround(std::log2(1 / std::sqrt(double(D)) / 2.926174)));
  for (int64_t i = 0; i < moe.s1.numel(); ++i) ASSERT_EQ(moe.s1.data_as<uint8_t>()[i], want) << i;
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 7919) % c.vocab_size);
  auto state = model->new_state();
  const Tensor logits = model->forward(ids, state);
  for (int64_t i = 0; i < logits.numel(); ++i)
    ASSERT_TRUE(std::isfinite(logits.data_as<float>()[i])) << i;
  const Moments m = moments(logits);
  EXPECT_GT(m.sd, 0.1);
  EXPECT_LT(m.sd, 10.0);
  // Their roofline counts 4.25 bits a routed expert weight.
  RooflineDtypes dt{4, 4, 4};
  const StepCost wide = step_cost(c, 1, 1, 100, dt);
  dt.expert = 4.25 / 8;
  const StepCost packed = step_cost(c, 1, 1, 100, dt);
  EXPECT_DOUBLE_EQ(packed.routed_expert_bytes, wide.routed_expert_bytes * 4.25 / 32);
  EXPECT_EQ(packed.attention_bytes, wide.attention_bytes);
}

TEST_F(RandomWeights, RooflineIsTheCheckpointsOne) {
  for (const auto& [preset, layers, experts] :
       {std::tuple{"tiny", kLayers, 0}, std::tuple{"v4-flash", 9, 0}, std::tuple{"v4-flash", 4, 16},
        std::tuple{"v4-pro", 3, 0}}) {
    PresetOptions o;
    o.preset = preset;
    o.num_layers = layers;
    o.num_experts = experts;
    // What make-random writes and a checkpoint load reads back.
    const ModelConfig from_file = parse_model_config(preset_config(o).dump(2), "config.json");
    const ModelConfig random = preset_model_config(o);
    for (const RooflineDtypes dt : {RooflineDtypes{4, 4, 4}, RooflineDtypes{2, 4, 4}}) {
      for (const auto& [seqs, tokens, context] :
           {std::tuple{1, 1, 65536}, std::tuple{64, 1, 4096}, std::tuple{1, 2048, 0}}) {
        const StepCost a = step_cost(random, seqs, tokens, context, dt);
        const StepCost b = step_cost(from_file, seqs, tokens, context, dt);
        EXPECT_EQ(a.bytes(), b.bytes()) << preset;
        EXPECT_EQ(a.flops(), b.flops()) << preset;
      }
    }
    EXPECT_EQ(param_counts(random).total, param_counts(from_file).total) << preset;
  }
  // And the tiny checkpoint on disk.
  const ModelConfig disk =
      load_model_config(testing::tiny_checkpoint(CheckpointDtype::kBf16, kLayers) + "/config.json");
  const StepCost a = step_cost(preset_model_config(tiny()), 8, 1, 1000, RooflineDtypes{});
  const StepCost b = step_cost(disk, 8, 1, 1000, RooflineDtypes{});
  EXPECT_EQ(a.bytes(), b.bytes());
  EXPECT_EQ(a.flops(), b.flops());
}

TEST_F(RandomWeights, RejectsShapesTheConfigDoesNotHave) {
  const ModelConfig config = preset_model_config(tiny(3));
  const RandomWeightSource src(config, 0);
  EXPECT_TRUE(src.has("head.weight"));
  EXPECT_TRUE(src.has("layers.2.ffn.gate.bias"));
  EXPECT_FALSE(src.has("layers.1.ffn.gate.bias"));  // a hash layer
  EXPECT_THROW(src.param("norm.weight", {config.hidden_size + 1}), Error);
  EXPECT_THROW(src.param("layers.9.attn_norm.weight", {config.hidden_size}), Error);
  EXPECT_THROW(src.matrix_blocks(*backend, "embed.weight", 3, 4, 1), Error);
  EXPECT_THROW(src.experts(*backend, 0, "w1", config.n_routed_experts + 1,
                           config.moe_intermediate_size, config.hidden_size),
               Error);
}

}  // namespace
}  // namespace deepinfer::bench
