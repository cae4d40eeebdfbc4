#include "io/weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/weight_names.h"
#include "test_util.h"

namespace deepinfer {
namespace {

using testing::expect_error;
using testing::f32_tensor;
using testing::golden_dir;
using testing::i64_tensor;
using testing::pattern_bf16;
using testing::raw_tensor;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::TestTensor;
using testing::write_file;

std::vector<float> to_vec(const Tensor& t) {
  return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
}

// The fixture's tensors, as written by transformers, in their own bytes.
std::vector<TestTensor> fixture_tensors(const std::string& name) {
  auto f = SafetensorsFile::open(golden_dir(name) + "/model.safetensors");
  std::vector<TestTensor> out;
  for (const auto& [n, t] : f->tensors())
    out.push_back(
        raw_tensor(n, t.dtype_name, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes())));
  return out;
}

void write_checkpoint(const TempDir& dir, const std::vector<TestTensor>& tensors) {
  write_file(dir / "model.safetensors", safetensors_bytes(tensors));
}

class GoldenFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenFixture, EveryTensorReadableByCanonicalName) {
  const std::string dir = golden_dir(GetParam());
  const ModelConfig cfg = load_model_config(dir + "/config.json");
  auto store = WeightStore::open(dir);
  auto raw = SafetensorsFile::open(dir + "/model.safetensors");

  const std::vector<WeightSpec> specs = expected_weights(cfg);
  std::set<std::string> want, have;
  for (const auto& s : specs) want.insert(s.name);
  for (const auto& n : store->canonical_names()) have.insert(n);
  EXPECT_EQ(have, want);
  EXPECT_EQ(have.size(), raw->tensors().size());

  for (const WeightSpec& spec : specs) {
    SCOPED_TRACE(spec.name);
    ASSERT_TRUE(store->has(spec.name));
    EXPECT_EQ(store->shape(spec.name), spec.shape);
    const SafetensorsTensor& disk = raw->get(transformers_saved_name(spec.name));
    if (spec.is_int) {
      const Tensor t = store->get_i32(spec.name, spec.shape);
      ASSERT_EQ(disk.dtype, DType::kI64);
      for (int64_t i = 0; i < t.numel(); ++i) {
        int64_t v;
        std::memcpy(&v, disk.data + 8 * i, 8);
        ASSERT_EQ(t.data_as<int32_t>()[i], v);
        ASSERT_TRUE(v >= 0 && v < cfg.n_routed_experts);
      }
      continue;
    }
    const Tensor t = store->get_f32(spec.name, spec.shape);
    ASSERT_EQ(disk.dtype, DType::kBF16);
    bool any_nonzero = false;
    for (int64_t i = 0; i < t.numel(); ++i) {
      uint16_t b;
      std::memcpy(&b, disk.data + 2 * i, 2);
      ASSERT_EQ(t.data_as<float>()[i], bf16_to_f32(b)) << i;
      any_nonzero |= b != 0;
    }
    EXPECT_TRUE(any_nonzero || spec.name.ends_with("bias"));
  }
}

INSTANTIATE_TEST_SUITE_P(Io, GoldenFixture, ::testing::Values("tiny-a", "tiny-b", "tiny-c"));

// Rewrites tiny-a under another spelling and checks every canonical tensor reads back the same.
void expect_same_as_fixture(const std::string& dir) {
  auto want = WeightStore::open(golden_dir("tiny-a"));
  auto got = WeightStore::open(dir);
  ASSERT_EQ(got->canonical_names(), want->canonical_names());
  for (const std::string& name : want->canonical_names()) {
    SCOPED_TRACE(name);
    const std::vector<int64_t> shape = want->shape(name);
    ASSERT_EQ(got->shape(name), shape);
    if (name.ends_with("tid2eid")) {
      const Tensor a = want->get_i32(name, shape), b = got->get_i32(name, shape);
      ASSERT_EQ(std::memcmp(a.data_as<int32_t>(), b.data_as<int32_t>(), 4 * a.numel()), 0);
    } else {
      ASSERT_EQ(to_vec(got->get_f32(name, shape)), to_vec(want->get_f32(name, shape)));
    }
  }
}

TEST(WeightStore, OfficialNames) {
  TempDir dir;
  std::vector<TestTensor> ts = fixture_tensors("tiny-a");
  for (auto& t : ts) t.name = canonicalize_weight_name(t.name).name;
  write_checkpoint(dir, ts);
  expect_same_as_fixture(dir.str());
}

TEST(WeightStore, TransformersInMemoryNamesWithFusedExperts) {
  TempDir dir;
  const ModelConfig cfg = load_model_config(golden_dir("tiny-a") + "/config.json");
  std::vector<TestTensor> ts;
  std::map<std::string, const TestTensor*> by_canonical;
  const std::vector<TestTensor> src = fixture_tensors("tiny-a");
  for (const auto& t : src) by_canonical[canonicalize_weight_name(t.name).name] = &t;
  for (const auto& [canonical, t] : by_canonical) {
    if (canonical.find(".experts.") != std::string::npos) continue;
    TestTensor copy = *t;
    copy.name = transformers_in_memory_name(canonical);
    ts.push_back(std::move(copy));
  }
  // gate_up_proj [E, 2I, D] = per expert w1 rows then w3 rows; down_proj [E, D, I] = w2.
  const int64_t E = cfg.n_routed_experts, I = cfg.moe_intermediate_size, D = cfg.hidden_size;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    std::vector<uint8_t> gate_up, down;
    for (int64_t e = 0; e < E; ++e) {
      for (int w : {1, 3}) {
        const auto& b = by_canonical.at(expert_weight_name(l, e, w))->bytes;
        gate_up.insert(gate_up.end(), b.begin(), b.end());
      }
      const auto& b = by_canonical.at(expert_weight_name(l, e, 2))->bytes;
      down.insert(down.end(), b.begin(), b.end());
    }
    ts.push_back(raw_tensor(fmt::format("model.layers.{}.mlp.experts.gate_up_proj", l), "BF16",
                            {E, 2 * I, D}, gate_up));
    ts.push_back(raw_tensor(fmt::format("model.layers.{}.mlp.experts.down_proj", l), "BF16",
                            {E, D, I}, down));
  }
  write_checkpoint(dir, ts);
  expect_same_as_fixture(dir.str());
  auto store = WeightStore::open(dir.str());
  EXPECT_NE(store->describe("layers.1.ffn.experts.3.w3.weight").find("gate_up_proj"),
            std::string::npos);
}

TEST(WeightStore, ShardedCheckpoint) {
  TempDir dir;
  const std::vector<TestTensor> ts = fixture_tensors("tiny-a");
  std::vector<TestTensor> shards[3];
  std::string weight_map;
  for (size_t i = 0; i < ts.size(); ++i) {
    shards[i % 3].push_back(ts[i]);
    weight_map += fmt::format("{}\"{}\": \"model-{:05d}-of-00003.safetensors\"", i ? ", " : "",
                              ts[i].name, i % 3 + 1);
  }
  for (int s = 0; s < 3; ++s)
    write_file(dir / fmt::format("model-{:05d}-of-00003.safetensors", s + 1),
               safetensors_bytes(shards[s]));
  write_file(dir / "model.safetensors.index.json",
             "{\"metadata\": {}, \"weight_map\": {" + weight_map + "}}");
  expect_same_as_fixture(dir.str());
}

TEST(WeightStore, UnalignedTensorData) {
  TempDir dir;
  // A 1-byte tensor first leaves the bf16 / f32 / i64 data at odd addresses.
  write_checkpoint(dir, {raw_tensor("pad", "U8", {1}, {7}),
                         testing::bf16_tensor("norm.weight", {3}, {1.5f, -2.0f, 0.25f}),
                         f32_tensor("hc_head_base", {2}, {3.0f, 4.0f}),
                         i64_tensor("layers.0.ffn.gate.tid2eid", {2, 1}, {5, 6})});
  auto store = WeightStore::open(dir.str());
  EXPECT_EQ(to_vec(store->get_f32("norm.weight", {3})), (std::vector<float>{1.5f, -2.0f, 0.25f}));
  EXPECT_EQ(to_vec(store->get_f32("hc_head_base", {2})), (std::vector<float>{3.0f, 4.0f}));
  const Tensor ids = store->get_i32("layers.0.ffn.gate.tid2eid", {2, 1});
  EXPECT_EQ(ids.data_as<int32_t>()[1], 6);
  EXPECT_TRUE(store->has("pad"));  // not a V4 name: kept as is
  // Runtime-built shapes take the vector overload.
  const std::vector<int64_t> shape = {3};
  EXPECT_EQ(store->get_f32("norm.weight", shape).numel(), 3);
}

TEST(WeightStoreErrors, MissingAndMisshapedTensors) {
  TempDir dir;
  write_checkpoint(dir, {pattern_bf16("model.layers.0.attn.wq_a.weight", {4, 8}, 1)});
  auto store = WeightStore::open(dir.str());
  const std::string file = (dir / "model.safetensors").string();
  expect_error(
      [&] {
        store->get_f32("layers.0.attn.wq_b.weight", {4, 8});
      },
      ErrorCode::kNotFound, {"'layers.0.attn.wq_b.weight'", file});
  expect_error(
      [&] {
        store->get_f32("layers.0.attn.wq_a.weight", {8, 4});
      },
      ErrorCode::kCorrupt,
      {"'model.layers.0.attn.wq_a.weight'", file, "has shape [4, 8], expected [8, 4]"});
  expect_error([&] { store->get_f32("layers.0.attn.wq_a.weight", {32}); }, ErrorCode::kCorrupt,
               {"expected [32]"});
  expect_error(
      [&] {
        store->get_i32("layers.0.attn.wq_a.weight", {4, 8});
      },
      ErrorCode::kCorrupt, {"'model.layers.0.attn.wq_a.weight'", "BF16", "integer"});
  expect_error([&] { store->shape("nope"); }, ErrorCode::kNotFound, {"'nope'"});
}

TEST(WeightStoreErrors, DuplicateCanonicalNames) {
  TempDir dir;
  write_checkpoint(dir, {pattern_bf16("model.embed_tokens.weight", {4, 2}, 1),
                         pattern_bf16("embed.weight", {4, 2}, 2)});
  expect_error([&] { WeightStore::open(dir.str()); }, ErrorCode::kCorrupt,
               {"'model.embed_tokens.weight'", "'embed.weight'", "canonical name 'embed.weight'"});
  write_checkpoint(
      dir, {pattern_bf16("lm_head.weight", {4, 2}, 1), pattern_bf16("head.weight", {4, 2}, 2)});
  expect_error([&] { WeightStore::open(dir.str()); }, ErrorCode::kCorrupt,
               {"'lm_head.weight'", "'head.weight'"});
  // A fused tensor and a per-expert tensor for the same expert.
  write_checkpoint(dir, {pattern_bf16("model.layers.0.mlp.experts.gate_up_proj", {2, 4, 3}, 1),
                         pattern_bf16("model.layers.0.ffn.experts.1.w3.weight", {2, 3}, 2)});
  expect_error([&] { WeightStore::open(dir.str()); }, ErrorCode::kCorrupt,
               {"gate_up_proj", "'model.layers.0.ffn.experts.1.w3.weight'",
                "'layers.0.ffn.experts.1.w3.weight'"});
}

TEST(WeightStoreErrors, BadFusedShapeAndIntRange) {
  TempDir dir;
  write_checkpoint(dir, {pattern_bf16("model.layers.0.mlp.experts.gate_up_proj", {2, 3, 4}, 1)});
  expect_error([&] { WeightStore::open(dir.str()); }, ErrorCode::kCorrupt,
               {"gate_up_proj", "[2, 3, 4]"});
  write_checkpoint(dir, {pattern_bf16("model.layers.0.mlp.experts.down_proj", {4, 2}, 1)});
  expect_error([&] { WeightStore::open(dir.str()); }, ErrorCode::kCorrupt, {"down_proj"});
  write_checkpoint(dir, {i64_tensor("layers.0.ffn.gate.tid2eid", {2}, {1, int64_t{1} << 40})});
  auto store = WeightStore::open(dir.str());
  expect_error([&] { store->get_i32("layers.0.ffn.gate.tid2eid", {2}); }, ErrorCode::kCorrupt,
               {"tid2eid", "int32", "flat index 1"});
}

TEST(WeightStoreErrors, MissingCheckpoint) {
  TempDir dir;
  expect_error([&] { WeightStore::open(dir.str()); }, ErrorCode::kNotFound, {dir.str()});
}

}  // namespace
}  // namespace deepinfer
