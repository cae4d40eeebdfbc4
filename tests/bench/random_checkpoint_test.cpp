// make-random output: loads through the ordinary checkpoint path and runs; quantised variants
// stay close to bf16; bytes do not depend on the thread count; presets have the real shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "bench/fast_convert.h"
#include "bench/random_checkpoint.h"
#include "bench/roofline.h"
#include "core/dtype.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "model/deepseek_v4/model.h"
#include "test_util.h"

namespace deepinfer::bench {
namespace {

namespace fs = std::filesystem;
using testing::tiny_checkpoint;

std::vector<float> run_logits(const std::string& dir, const std::vector<int32_t>& ids) {
  auto backend = make_cpu_backend();
  auto model = deepseek_v4::Model::load(dir, *backend);
  auto state = model->new_state();
  Tensor t = model->forward(ids, state);
  return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

const std::vector<int32_t> kIds = {5, 17, 42, 7, 1000, 8191, 3, 99, 256, 4000, 12, 13};

TEST(RandomCheckpoint, TinyBf16LoadsAndRunsWithSpreadOne) {
  const std::string& dir = tiny_checkpoint(CheckpointDtype::kBf16, 0);
  EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / "model-00001-of-00001.safetensors"));
  EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / "tokenizer.json"));  // vocab 8192 matches
  const ModelConfig cfg = load_model_config(dir + "/config.json");
  EXPECT_EQ(cfg.vocab_size, 8192);
  EXPECT_EQ(cfg.num_hidden_layers, 6);
  const std::vector<float> logits = run_logits(dir, kIds);
  ASSERT_EQ(logits.size(), kIds.size() * 8192);
  double sum = 0, sq = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += double(v) * v;
  }
  const double n = static_cast<double>(logits.size()), mean = sum / n;
  const double sd = std::sqrt(sq / n - mean * mean);
  EXPECT_GT(sd, 0.3);
  EXPECT_LT(sd, 3.0);
}

TEST(RandomCheckpoint, Fp8IsCloseToBf16) {
  const std::string& bf = tiny_checkpoint(CheckpointDtype::kBf16, 2);
  const std::string& f8 = tiny_checkpoint(CheckpointDtype::kFp8, 2);
  auto ckpt = SafetensorsCheckpoint::open(f8);
  const auto* w = ckpt->find("layers.0.attn.wq_b.weight");
  const auto* s = ckpt->find("layers.0.attn.wq_b.scale");
  ASSERT_TRUE(w && s);
  EXPECT_EQ(w->tensor->dtype_name, "F8_E4M3");
  EXPECT_EQ(s->tensor->dtype_name, "F32");
  EXPECT_EQ(s->tensor->shape, (std::vector<int64_t>{4, 1}));  // [512, 128] in 128x128 blocks
  EXPECT_EQ(ckpt->find("embed.weight")->tensor->dtype_name, "BF16");
  EXPECT_EQ(ckpt->find("layers.0.hc_attn_fn")->tensor->dtype_name, "F32");
  const double err = rel_l2(run_logits(f8, kIds), run_logits(bf, kIds));
  EXPECT_LT(err, 0.1) << "fp8 vs bf16 logits relative L2 error";
  EXPECT_GT(err, 0.0);
}

TEST(RandomCheckpoint, Mxfp4ExpertsLoadAndRun) {
  const std::string& bf = tiny_checkpoint(CheckpointDtype::kBf16, 2);
  const std::string& mx = tiny_checkpoint(CheckpointDtype::kMxfp4Experts, 2);
  auto ckpt = SafetensorsCheckpoint::open(mx);
  const auto* w = ckpt->find("layers.1.ffn.experts.3.w2.weight");
  const auto* s = ckpt->find("layers.1.ffn.experts.3.w2.scale");
  ASSERT_TRUE(w && s);
  EXPECT_EQ(w->tensor->dtype_name, "I8");
  EXPECT_EQ(w->tensor->shape, (std::vector<int64_t>{256, 96}));  // [D, I/2]
  EXPECT_EQ(s->tensor->dtype_name, "F8_E8M0");
  EXPECT_EQ(s->tensor->shape, (std::vector<int64_t>{256, 6}));  // [D, I/32]
  EXPECT_EQ(ckpt->find("layers.1.ffn.shared_experts.w2.weight")->tensor->dtype_name, "F8_E4M3");
  const std::vector<float> logits = run_logits(mx, kIds);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_LT(rel_l2(logits, run_logits(bf, kIds)), 0.5);
}

// DEEPINFER_MXFP4_EXPERTS for one scope (the loader reads it per load).
class ScopedMxfp4Experts {
 public:
  explicit ScopedMxfp4Experts(bool on) { setenv("DEEPINFER_MXFP4_EXPERTS", on ? "1" : "0", 1); }
  ~ScopedMxfp4Experts() { unsetenv("DEEPINFER_MXFP4_EXPERTS"); }
};

TEST(RandomCheckpoint, Mxfp4ResidentExpertsGiveTheLogitsOfWidenedOnes) {
  const std::string& mx = tiny_checkpoint(CheckpointDtype::kMxfp4Experts, 2);
  auto backend = make_cpu_backend();
  std::vector<float> logits[2];
  for (int on = 0; on < 2; ++on) {
    ScopedMxfp4Experts env(on);
    auto model = deepseek_v4::Model::load(mx, *backend);
    const auto& moe = model->weights().layers.at(1).moe;
    EXPECT_EQ(moe.w2.dtype(), on ? DType::kFP4E2M1 : DType::kF32);
    EXPECT_EQ(moe.s2.defined(), on == 1);
    if (on) {
      EXPECT_EQ(moe.w2.dim(1), 256);       // [E, D, I]
      EXPECT_EQ(moe.s2.dim(1), 192 / 32);  // [E, I / 32, D]
      EXPECT_EQ(moe.s2.dim(2), 256);
    }
    auto state = model->new_state();
    Tensor t = model->forward(kIds, state);
    logits[on].assign(t.data_as<float>(), t.data_as<float>() + t.numel());
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(RandomCheckpoint, BytesDoNotDependOnThreadsAndShardsAreIndexed) {
  std::vector<std::string> dirs;
  for (int threads : {1, 3}) {
    RandomCheckpointOptions o;
    o.preset.preset = "tiny";
    o.preset.layer_types = {"csa"};
    o.dtype = CheckpointDtype::kFp8;
    o.seed = 11;
    o.num_threads = threads;
    o.shard_bytes = 3 << 20;  // several shards
    o.out_dir = testing::scratch_dir("threads-" + std::to_string(threads));
    const RandomCheckpointResult r = write_random_checkpoint(o);
    EXPECT_GE(r.shards.size(), 3u);
    EXPECT_FALSE(r.tokenizer_copied);  // no tokenizer source given
    dirs.push_back(o.out_dir);
  }
  size_t shards = 0;
  for (const auto& e : fs::directory_iterator(dirs[0])) {
    const std::string f = e.path().filename().string();
    if (f == "config.json" || f.ends_with(".safetensors")) {
      EXPECT_EQ(file_bytes(e.path()), file_bytes(fs::path(dirs[1]) / f)) << f;
      shards += f.ends_with(".safetensors");
    }
  }
  EXPECT_GE(shards, 3u);
  // The index maps every tensor to the shard that holds it.
  std::ifstream in(fs::path(dirs[0]) / "model.safetensors.index.json");
  const auto index = nlohmann::json::parse(in);
  auto ckpt = SafetensorsCheckpoint::open(dirs[0]);
  EXPECT_EQ(index["weight_map"].size(), ckpt->tensors().size());
  for (const auto& [name, ref] : ckpt->tensors())
    EXPECT_EQ(fs::path(ref.file->path()).filename().string(), index["weight_map"][name]) << name;
  auto store = WeightStore::open(dirs[0]);
  EXPECT_TRUE(store->has("layers.0.attn.indexer.wq_b.weight"));
}

TEST(RandomCheckpoint, Tid2eidRowsHoldDistinctExperts) {
  auto store = WeightStore::open(tiny_checkpoint(CheckpointDtype::kBf16, 2));
  const Tensor t = store->get_i32("layers.0.ffn.gate.tid2eid", {8192, 4});
  std::vector<int> hits(16, 0);
  for (int64_t r = 0; r < 8192; ++r) {
    std::set<int32_t> row;
    for (int j = 0; j < 4; ++j) {
      const int32_t e = t.data_as<int32_t>()[r * 4 + j];
      ASSERT_GE(e, 0);
      ASSERT_LT(e, 16);
      row.insert(e);
      ++hits[e];
    }
    ASSERT_EQ(row.size(), 4u) << "row " << r;
  }
  for (int h : hits) EXPECT_NEAR(h, 8192 * 4 / 16, 200);  // roughly uniform
}

TEST(RandomCheckpoint, ValueDistributions) {
  std::vector<float> v(1 << 20);
  random_tensor_values("layers.3.attn.wo_b.weight", {4096, 8192}, 1, 12345, v.size(), v.data());
  double sum = 0, sq = 0;
  for (float x : v) sum += x, sq += double(x) * x;
  const double n = static_cast<double>(v.size());
  EXPECT_NEAR(sum / n, 0.0, 1e-4);
  EXPECT_NEAR(std::sqrt(sq / n), 1.0 / std::sqrt(8192.0), 1e-4);  // N(0, 1/in)
  // Normal quantiles: P(|z| < 1.96) = 0.95, P(|z| < 1) = 0.6827, P(|z| > 3) = 0.0027.
  const double sd = 1.0 / std::sqrt(8192.0);
  double in196 = 0, in1 = 0, out3 = 0;
  for (float x : v) {
    in196 += std::fabs(x) < 1.959964 * sd;
    in1 += std::fabs(x) < sd;
    out3 += std::fabs(x) > 3 * sd;
  }
  EXPECT_NEAR(in196 / n, 0.95, 0.002);
  EXPECT_NEAR(in1 / n, 0.6827, 0.002);
  EXPECT_NEAR(out3 / n, 0.0027, 0.0003);
  random_tensor_values("layers.0.attn_norm.weight", {4096}, 1, 0, 4096, v.data());
  sum = 0;
  for (int i = 0; i < 4096; ++i) sum += v[i];
  EXPECT_NEAR(sum / 4096, 1.0, 0.01);
  // Any sub-range reproduces the same values (counter-based).
  std::vector<float> a(100), b(7);
  random_tensor_values("x.weight", {10, 10}, 3, 0, 100, a.data());
  random_tensor_values("x.weight", {10, 10}, 3, 41, 7, b.data());
  for (int i = 0; i < 7; ++i) EXPECT_EQ(a[41 + i], b[i]);
}

PresetOptions named(const std::string& preset) {
  PresetOptions o;
  o.preset = preset;
  return o;
}

// The writer's fast conversions round exactly like the reference ones in core/dtype.
TEST(RandomCheckpoint, FastConversionsMatchReference) {
  std::vector<float> probes = {0.0f,   -0.0f,     448.0f,        464.0f, 465.0f, -1e9f,
                               1e-12f, 0.015625f, 0.0146484375f, 0.25f,  0.75f,  1.25f,
                               1.75f,  2.5f,      3.5f,          5.0f,   6.5f,   std::nanf("")};
  std::vector<float> v(200000);
  random_tensor_values("probe.weight", {1, 200000}, 5, 0, v.size(), v.data());
  for (size_t i = 0; i < v.size(); ++i) probes.push_back(v[i] * std::ldexp(1.0f, int(i % 40) - 20));
  for (float x : probes) {
    EXPECT_EQ(fast_f32_to_bf16(x), f32_to_bf16(x)) << x;
    EXPECT_EQ(fast_f32_to_e4m3(x), f32_to_e4m3(x)) << x;
    EXPECT_EQ(fast_f32_to_e2m1(x), f32_to_e2m1(x)) << x;
  }
}

TEST(RandomCheckpoint, PresetsHaveTheRealShapes) {
  const ModelConfig flash = parse_model_config(preset_config(named("v4-flash")).dump(), "flash");
  EXPECT_EQ(flash.hidden_size, 4096);
  EXPECT_EQ(flash.num_hidden_layers, 43);
  EXPECT_EQ(flash.n_routed_experts, 256);
  EXPECT_EQ(flash.qk_rope_head_dim, 64);
  EXPECT_EQ(flash.rope_compress.type, "yarn");
  EXPECT_EQ(flash.layer_types[0], AttnType::kHCA);
  EXPECT_EQ(flash.layer_types[1], AttnType::kHCA);
  EXPECT_EQ(flash.layer_types[2], AttnType::kHCA);
  EXPECT_EQ(flash.layer_types[3], AttnType::kCSA);
  EXPECT_EQ(flash.mlp_layer_types[2], MlpType::kHashMoe);
  EXPECT_EQ(flash.mlp_layer_types[3], MlpType::kMoe);
  const ParamCounts fp = param_counts(flash);
  EXPECT_NEAR(fp.total / 1e9, 284, 8);            // published: 284B
  EXPECT_NEAR(fp.active_per_token / 1e9, 13, 1);  // published: 13B active
  const ModelConfig pro = parse_model_config(preset_config(named("v4-pro")).dump(), "pro");
  const ParamCounts pp = param_counts(pro);
  EXPECT_NEAR(pp.total / 1e12, 1.6, 0.1);         // published: 1.6T
  EXPECT_NEAR(pp.active_per_token / 1e9, 49, 4);  // published: 49B active

  PresetOptions small{"v4-flash", 0, 16, {"csa", "hca"}};
  const ModelConfig s = parse_model_config(preset_config(small).dump(), "small");
  EXPECT_EQ(s.num_hidden_layers, 2);
  EXPECT_EQ(s.n_routed_experts, 16);
  EXPECT_EQ(s.layer_types[0], AttnType::kCSA);
  EXPECT_THROW(preset_config(named("v5")), Error);
  EXPECT_THROW(preset_config({"tiny", 3, 0, {"csa"}}), Error);
}

}  // namespace
}  // namespace deepinfer::bench
