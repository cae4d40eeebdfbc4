#include "io/weight_names.h"

#include <gtest/gtest.h>

#include <set>

#include "io/model_config.h"
#include "test_util.h"

namespace deepinfer {
namespace {

void expect_canonical(const std::string& disk, const std::string& canonical) {
  const CanonicalWeightName c = canonicalize_weight_name(disk);
  EXPECT_EQ(c.name, canonical) << disk;
  EXPECT_EQ(c.kind, WeightNameKind::kPlain) << disk;
  EXPECT_TRUE(c.known) << disk;
  EXPECT_FALSE(c.is_scale) << disk;
}

TEST(WeightNames, TransformersSavedNames) {
  // Spellings found in the golden fixtures' model.safetensors.
  expect_canonical("model.layers.0.attn.wq_a.weight", "layers.0.attn.wq_a.weight");
  expect_canonical("model.hc_head.hc_fn", "hc_head_fn");
  expect_canonical("model.hc_head.hc_base", "hc_head_base");
  expect_canonical("model.hc_head.hc_scale", "hc_head_scale");
  expect_canonical("model.embed_tokens.weight", "embed.weight");
  expect_canonical("head.weight", "head.weight");
  expect_canonical("model.norm.weight", "norm.weight");
  expect_canonical("model.layers.1.attn.indexer.compressor.ape",
                   "layers.1.attn.indexer.compressor.ape");
  expect_canonical("model.layers.2.ffn.gate.bias", "layers.2.ffn.gate.bias");
  expect_canonical("model.layers.0.ffn.gate.tid2eid", "layers.0.ffn.gate.tid2eid");
  expect_canonical("model.layers.0.ffn.experts.3.w1.weight", "layers.0.ffn.experts.3.w1.weight");
  expect_canonical("model.layers.0.hc_attn_fn", "layers.0.hc_attn_fn");
  expect_canonical("model.layers.12.hc_ffn_scale", "layers.12.hc_ffn_scale");
}

TEST(WeightNames, OfficialNames) {
  expect_canonical("embed.weight", "embed.weight");
  expect_canonical("embed_tokens.weight", "embed.weight");
  expect_canonical("lm_head.weight", "head.weight");
  expect_canonical("hc_head_fn", "hc_head_fn");
  expect_canonical("layers.7.attn.attn_sink", "layers.7.attn.attn_sink");
  expect_canonical("layers.7.ffn.experts.255.w2.weight", "layers.7.ffn.experts.255.w2.weight");
  expect_canonical("layers.3.attn.indexer.weights_proj.weight",
                   "layers.3.attn.indexer.weights_proj.weight");
}

TEST(WeightNames, TransformersInMemoryNames) {
  const std::pair<const char*, const char*> cases[] = {
      {"model.layers.0.self_attn.q_a_proj.weight", "layers.0.attn.wq_a.weight"},
      {"model.layers.0.self_attn.q_a_norm.weight", "layers.0.attn.q_norm.weight"},
      {"model.layers.0.self_attn.q_b_proj.weight", "layers.0.attn.wq_b.weight"},
      {"model.layers.0.self_attn.kv_proj.weight", "layers.0.attn.wkv.weight"},
      {"model.layers.0.self_attn.kv_norm.weight", "layers.0.attn.norm.weight"},
      {"model.layers.0.self_attn.o_a_proj.weight", "layers.0.attn.wo_a.weight"},
      {"model.layers.0.self_attn.o_b_proj.weight", "layers.0.attn.wo_b.weight"},
      {"model.layers.0.self_attn.sinks", "layers.0.attn.attn_sink"},
      {"model.layers.1.self_attn.compressor.kv_proj.weight", "layers.1.attn.compressor.wkv.weight"},
      {"model.layers.1.self_attn.compressor.gate_proj.weight",
       "layers.1.attn.compressor.wgate.weight"},
      {"model.layers.1.self_attn.compressor.kv_norm.weight",
       "layers.1.attn.compressor.norm.weight"},
      {"model.layers.1.self_attn.compressor.position_bias", "layers.1.attn.compressor.ape"},
      {"model.layers.1.self_attn.compressor.indexer.q_b_proj.weight",
       "layers.1.attn.indexer.wq_b.weight"},
      {"model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight",
       "layers.1.attn.indexer.weights_proj.weight"},
      {"model.layers.1.self_attn.compressor.indexer.kv_proj.weight",
       "layers.1.attn.indexer.compressor.wkv.weight"},
      {"model.layers.1.self_attn.compressor.indexer.gate_proj.weight",
       "layers.1.attn.indexer.compressor.wgate.weight"},
      {"model.layers.1.self_attn.compressor.indexer.kv_norm.weight",
       "layers.1.attn.indexer.compressor.norm.weight"},
      {"model.layers.1.self_attn.compressor.indexer.position_bias",
       "layers.1.attn.indexer.compressor.ape"},
      {"model.layers.2.input_layernorm.weight", "layers.2.attn_norm.weight"},
      {"model.layers.2.post_attention_layernorm.weight", "layers.2.ffn_norm.weight"},
      {"model.layers.2.attn_hc.fn", "layers.2.hc_attn_fn"},
      {"model.layers.2.attn_hc.base", "layers.2.hc_attn_base"},
      {"model.layers.2.attn_hc.scale", "layers.2.hc_attn_scale"},
      {"model.layers.2.ffn_hc.fn", "layers.2.hc_ffn_fn"},
      {"model.layers.2.ffn_hc.base", "layers.2.hc_ffn_base"},
      {"model.layers.2.ffn_hc.scale", "layers.2.hc_ffn_scale"},
      {"model.layers.2.mlp.gate.weight", "layers.2.ffn.gate.weight"},
      {"model.layers.2.mlp.gate.e_score_correction_bias", "layers.2.ffn.gate.bias"},
      {"model.layers.0.mlp.gate.tid2eid", "layers.0.ffn.gate.tid2eid"},
      {"model.layers.2.mlp.shared_experts.gate_proj.weight",
       "layers.2.ffn.shared_experts.w1.weight"},
      {"model.layers.2.mlp.shared_experts.down_proj.weight",
       "layers.2.ffn.shared_experts.w2.weight"},
      {"model.layers.2.mlp.shared_experts.up_proj.weight", "layers.2.ffn.shared_experts.w3.weight"},
      {"model.embed_tokens.weight", "embed.weight"},
      {"lm_head.weight", "head.weight"},
  };
  for (const auto& [disk, canonical] : cases) {
    expect_canonical(disk, canonical);
    EXPECT_EQ(transformers_in_memory_name(canonical), disk);
  }
}

TEST(WeightNames, FusedExperts) {
  CanonicalWeightName c = canonicalize_weight_name("model.layers.2.mlp.experts.gate_up_proj");
  EXPECT_EQ(c.kind, WeightNameKind::kFusedGateUp);
  EXPECT_EQ(c.name, "layers.2.ffn.experts");
  EXPECT_EQ(c.layer, 2);
  c = canonicalize_weight_name("model.layers.2.mlp.experts.down_proj");
  EXPECT_EQ(c.kind, WeightNameKind::kFusedDown);
  EXPECT_EQ(c.name, "layers.2.ffn.experts");
  EXPECT_EQ(expert_weight_name(2, 5, 3), "layers.2.ffn.experts.5.w3.weight");
  EXPECT_EQ(transformers_in_memory_name("layers.2.ffn.experts.5.w3.weight"),
            "model.layers.2.mlp.experts.gate_up_proj");
  EXPECT_EQ(transformers_in_memory_name("layers.2.ffn.experts.5.w2.weight"),
            "model.layers.2.mlp.experts.down_proj");
}

TEST(WeightNames, ScaleCompanions) {
  CanonicalWeightName c = canonicalize_weight_name("model.layers.0.attn.wq_a.scale");
  EXPECT_TRUE(c.is_scale);
  EXPECT_EQ(c.name, "layers.0.attn.wq_a.weight");
  c = canonicalize_weight_name("model.layers.0.self_attn.q_a_proj.weight_scale_inv");
  EXPECT_TRUE(c.is_scale);
  EXPECT_EQ(c.name, "layers.0.attn.wq_a.weight");
  c = canonicalize_weight_name("layers.4.ffn.experts.9.w2.scale");
  EXPECT_TRUE(c.is_scale);
  EXPECT_EQ(c.name, "layers.4.ffn.experts.9.w2.weight");
  c = canonicalize_weight_name("model.layers.1.mlp.experts.gate_up_proj_scale_inv");
  EXPECT_TRUE(c.is_scale);
  EXPECT_EQ(c.kind, WeightNameKind::kFusedGateUp);
  // Parameters that merely end in "scale" are not companions.
  expect_canonical("model.layers.0.attn_hc.scale", "layers.0.hc_attn_scale");
  expect_canonical("model.hc_head.hc_scale", "hc_head_scale");
  expect_canonical("layers.0.hc_ffn_scale", "layers.0.hc_ffn_scale");
}

TEST(WeightNames, UnknownNamesPassThrough) {
  CanonicalWeightName c = canonicalize_weight_name("mtp.0.enorm.weight");
  EXPECT_FALSE(c.known);
  EXPECT_EQ(c.name, "mtp.0.enorm.weight");
  c = canonicalize_weight_name("model.layers.0.attn.q_a_proj.weight");  // mixed spelling
  EXPECT_FALSE(c.known);
  EXPECT_EQ(c.name, "layers.0.attn.q_a_proj.weight");
  c = canonicalize_weight_name("model.layers.x.attn.wq_a.weight");
  EXPECT_FALSE(c.known);
  c = canonicalize_weight_name("layers.0.ffn.experts.1.w4.weight");
  EXPECT_FALSE(c.known);
  EXPECT_EQ(transformers_in_memory_name("mtp.0.enorm.weight"), "");
  EXPECT_EQ(transformers_saved_name("mtp.0.enorm.weight"), "");
}

TEST(WeightNames, EveryExpectedNameRoundTripsThroughAllSpellings) {
  for (const char* fixture : {"tiny-a", "tiny-b", "tiny-c"}) {
    const ModelConfig cfg = load_model_config(testing::golden_dir(fixture) + "/config.json");
    std::set<std::string> seen;
    for (const WeightSpec& spec : expected_weights(cfg)) {
      EXPECT_TRUE(seen.insert(spec.name).second) << spec.name;
      expect_canonical(spec.name, spec.name);
      expect_canonical("model." + spec.name, spec.name);
      const std::string saved = transformers_saved_name(spec.name);
      ASSERT_FALSE(saved.empty()) << spec.name;
      expect_canonical(saved, spec.name);
      const std::string mem = transformers_in_memory_name(spec.name);
      ASSERT_FALSE(mem.empty()) << spec.name;
      if (spec.name.find(".experts.") == std::string::npos) expect_canonical(mem, spec.name);
    }
  }
}

}  // namespace
}  // namespace deepinfer
