#include "io/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace deepinfer {
namespace {

using json = nlohmann::json;
using testing::expect_error;
using testing::golden_dir;

constexpr const char* kSrc = "test/config.json";

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// The fixture's own record of what transformers resolved.
void expect_schedules_match_fixture(const ModelConfig& c, const std::string& name) {
  const json fx = read_json(golden_dir(name) + "/fixture.json");
  ASSERT_EQ(c.layer_types.size(), fx["layer_types"].size());
  for (size_t i = 0; i < c.layer_types.size(); ++i)
    EXPECT_EQ(attn_type_name(c.layer_types[i]), fx["layer_types"][i].get<std::string>()) << i;
  ASSERT_EQ(c.mlp_layer_types.size(), fx["mlp_layer_types"].size());
  for (size_t i = 0; i < c.mlp_layer_types.size(); ++i)
    EXPECT_EQ(mlp_type_name(c.mlp_layer_types[i]), fx["mlp_layer_types"][i].get<std::string>())
        << i;
}

ModelConfig load_fixture(const std::string& name) {
  return load_model_config(golden_dir(name) + "/config.json");
}

TEST(ModelConfig, TinyAExplicitSchedules) {
  const ModelConfig c = load_fixture("tiny-a");
  expect_schedules_match_fixture(c, "tiny-a");
  EXPECT_EQ(c.model_type, "deepseek_v4");
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.q_lora_rank, 32);
  EXPECT_EQ(c.o_groups, 2);
  EXPECT_EQ(c.o_lora_rank, 16);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_EQ(c.n_routed_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.scoring_func, RouterScoring::kSqrtSoftplus);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_DOUBLE_EQ(c.swiglu_limit, 4.0);
  EXPECT_EQ(c.sliding_window, 16);
  EXPECT_EQ(c.compress_rate_csa, 4);
  EXPECT_EQ(c.compress_rate_hca, 16);
  EXPECT_EQ(c.compress_rate(0), 0);
  EXPECT_EQ(c.compress_rate(1), 4);
  EXPECT_EQ(c.compress_rate(2), 16);
  EXPECT_EQ(c.index_n_heads, 8);
  EXPECT_EQ(c.index_head_dim, 16);
  EXPECT_EQ(c.index_topk, 6);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_DOUBLE_EQ(c.hc_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.qk_rope_head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.num_nextn_predict_layers, 0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{1});
  EXPECT_EQ(c.rope_main.type, "default");
  EXPECT_DOUBLE_EQ(c.rope_main.theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rope_main.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.rope_compress.type, "default");
  EXPECT_DOUBLE_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_DOUBLE_EQ(c.rope_compress.partial_rotary_factor, 0.5);
}

TEST(ModelConfig, TinyBLegacyKeys) {
  const ModelConfig c = load_fixture("tiny-b");
  expect_schedules_match_fixture(c, "tiny-b");
  EXPECT_EQ(c.layer_types, (std::vector<AttnType>{AttnType::kCSA, AttnType::kHCA,
                                                  AttnType::kSliding, AttnType::kCSA}));
  EXPECT_EQ(c.mlp_layer_types,
            (std::vector<MlpType>{MlpType::kHashMoe, MlpType::kMoe, MlpType::kMoe, MlpType::kMoe}));
  EXPECT_EQ(c.compress_rate_csa, 4);
  EXPECT_EQ(c.compress_rate_hca, 8);  // compress_ratios says 128: the legacy override wins
  EXPECT_EQ(c.compress_rate(1), 8);
  EXPECT_EQ(c.qk_rope_head_dim, 8);
  EXPECT_DOUBLE_EQ(c.rope_main.partial_rotary_factor, 0.25);
  EXPECT_DOUBLE_EQ(c.rope_compress.partial_rotary_factor, 0.25);
  EXPECT_DOUBLE_EQ(c.rope_main.theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rope_compress.theta, 40000.0);
  EXPECT_EQ(c.rope_compress.type, "default");
  EXPECT_EQ(c.scoring_func, RouterScoring::kSigmoid);
  EXPECT_EQ(c.hc_mult, 2);
  EXPECT_EQ(c.hc_sinkhorn_iters, 3);
  EXPECT_EQ(c.sliding_window, 12);
}

TEST(ModelConfig, TinyCDefaultSchedulesAndYarn) {
  const ModelConfig c = load_fixture("tiny-c");
  expect_schedules_match_fixture(c, "tiny-c");
  EXPECT_EQ(c.layer_types, (std::vector<AttnType>{AttnType::kHCA, AttnType::kHCA, AttnType::kHCA,
                                                  AttnType::kCSA}));
  EXPECT_EQ(c.mlp_layer_types, (std::vector<MlpType>{MlpType::kHashMoe, MlpType::kHashMoe,
                                                     MlpType::kHashMoe, MlpType::kMoe}));
  EXPECT_EQ(c.qk_rope_head_dim, 16);
  EXPECT_EQ(c.rope_main.type, "default");
  EXPECT_DOUBLE_EQ(c.rope_main.theta, 10000.0);
  const RopeConfig& r = c.rope_compress;
  EXPECT_EQ(r.type, "yarn");
  EXPECT_DOUBLE_EQ(r.theta, 160000.0);
  EXPECT_DOUBLE_EQ(r.factor, 16.0);
  EXPECT_DOUBLE_EQ(r.original_max_position_embeddings, 256.0);
  EXPECT_DOUBLE_EQ(r.attention_factor, 1.0);
  EXPECT_DOUBLE_EQ(r.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(r.beta_slow, 1.0);
  EXPECT_DOUBLE_EQ(r.partial_rotary_factor, 0.25);
}

json tiny_a() {
  return read_json(golden_dir("tiny-a") + "/config.json");
}
ModelConfig parse(const json& j) {
  return parse_model_config(j.dump(), kSrc);
}

// A config with only the required fields: everything else takes DeepseekV4Config's defaults.
json minimal() {
  return json{{"model_type", "deepseek_v4"}, {"vocab_size", 1000},
              {"hidden_size", 128},          {"num_hidden_layers", 5},
              {"num_attention_heads", 8},    {"head_dim", 64},
              {"q_lora_rank", 32},           {"o_groups", 4},
              {"o_lora_rank", 16},           {"moe_intermediate_size", 64},
              {"n_routed_experts", 16},      {"num_experts_per_tok", 6}};
}

TEST(ModelConfig, TransformersDefaults) {
  const ModelConfig c = parse(minimal());
  EXPECT_EQ(c.layer_types, (std::vector<AttnType>{AttnType::kHCA, AttnType::kHCA, AttnType::kHCA,
                                                  AttnType::kCSA, AttnType::kHCA}));
  EXPECT_EQ(c.mlp_layer_types,
            (std::vector<MlpType>{MlpType::kHashMoe, MlpType::kHashMoe, MlpType::kHashMoe,
                                  MlpType::kMoe, MlpType::kMoe}));
  EXPECT_EQ(c.qk_rope_head_dim, 8);  // 64 * 64/512
  EXPECT_EQ(c.compress_rate_csa, 4);
  EXPECT_EQ(c.compress_rate_hca, 128);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.index_n_heads, 64);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_DOUBLE_EQ(c.swiglu_limit, 10.0);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.scoring_func, RouterScoring::kSqrtSoftplus);
  EXPECT_EQ(c.max_position_embeddings, 1048576);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{1});
  EXPECT_DOUBLE_EQ(c.rope_main.theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_EQ(c.rope_compress.type, "default");
  EXPECT_DOUBLE_EQ(c.rope_compress.partial_rotary_factor, 0.125);
}

TEST(ModelConfig, SmallLayerCountsAndHashLayers) {
  json j = minimal();
  j["num_hidden_layers"] = 1;
  j["num_hash_layers"] = 5;
  ModelConfig c = parse(j);
  EXPECT_EQ(c.layer_types, std::vector<AttnType>{AttnType::kHCA});
  EXPECT_EQ(c.mlp_layer_types, std::vector<MlpType>{MlpType::kHashMoe});
  j["num_hidden_layers"] = 3;
  j["num_hash_layers"] = 0;
  c = parse(j);
  EXPECT_EQ(c.mlp_layer_types, std::vector<MlpType>(3, MlpType::kMoe));
}

TEST(ModelConfig, LegacyFlatRopeScaling) {
  // The shape of the official checkpoints' config: rope_scaling describes the compress rope.
  json j = minimal();
  j["head_dim"] = 512;
  j["qk_rope_head_dim"] = 64;
  j["compress_rope_theta"] = 160000;
  j["max_position_embeddings"] = 1048576;
  j["rope_scaling"] = {{"type", "yarn"},
                       {"factor", 16},
                       {"original_max_position_embeddings", 65536},
                       {"beta_fast", 32},
                       {"beta_slow", 1}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.rope_main.type, "default");
  EXPECT_DOUBLE_EQ(c.rope_main.theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rope_main.partial_rotary_factor, 0.125);
  EXPECT_EQ(c.rope_compress.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_compress.theta, 160000.0);
  EXPECT_DOUBLE_EQ(c.rope_compress.factor, 16.0);
  EXPECT_DOUBLE_EQ(c.rope_compress.original_max_position_embeddings, 65536.0);
  EXPECT_DOUBLE_EQ(c.rope_compress.attention_factor, 1.0);  // injected for flat yarn
  EXPECT_DOUBLE_EQ(c.rope_compress.partial_rotary_factor, 0.125);

  // Flat rope_parameters work the same; a missing original_max_position_embeddings defaults to
  // max_position_embeddings, zero betas fall back to 32 / 1.
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 0}};
  const ModelConfig d = parse(j);
  EXPECT_EQ(d.rope_compress.type, "yarn");
  EXPECT_DOUBLE_EQ(d.rope_compress.original_max_position_embeddings, 1048576.0);
  EXPECT_DOUBLE_EQ(d.rope_compress.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(d.rope_compress.beta_slow, 1.0);
}

TEST(ModelConfig, NestedRopeDefaults) {
  json j = tiny_a();
  // Nested yarn without attention_factor: transformers derives 0.1 ln(factor) + 1. Without
  // rope_theta the sub-dict takes the top-level rope_theta; a null factor is the context ratio.
  j["rope_parameters"]["compress"] = {
      {"rope_type", "yarn"}, {"factor", nullptr}, {"original_max_position_embeddings", 1024}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_compress.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_compress.factor, 4.0);  // 4096 / 1024
  EXPECT_NEAR(c.rope_compress.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(c.rope_compress.theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rope_compress.partial_rotary_factor, 0.5);

  j["rope_parameters"]["compress"] = {{"type", "yarn"},
                                      {"factor", 8},
                                      {"mscale", 1.0},
                                      {"mscale_all_dim", 0.5},
                                      {"rope_theta", 5e4}};
  const ModelConfig d = parse(j);
  const double m1 = 0.1 * std::log(8.0) + 1, m2 = 0.05 * std::log(8.0) + 1;
  EXPECT_NEAR(d.rope_compress.attention_factor, m1 / m2, 1e-12);
  EXPECT_DOUBLE_EQ(d.rope_compress.original_max_position_embeddings, 4096.0);
}

TEST(ModelConfig, CompressRatesAndTokenIds) {
  json j = tiny_a();
  j["compress_rate_csa"] = 8;  // legacy scalar beats the dict
  j["eos_token_id"] = {1, 2};
  j["bos_token_id"] = nullptr;
  ModelConfig c = parse(j);
  EXPECT_EQ(c.compress_rate_csa, 8);
  EXPECT_EQ(c.compress_rate_hca, 16);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{1, 2}));
  EXPECT_EQ(c.bos_token_id, -1);
  j["eos_token_id"] = nullptr;
  c = parse(j);
  EXPECT_TRUE(c.eos_token_ids.empty());
}

TEST(ModelConfig, LongerSchedulesAreCut) {
  // transformers keeps the first num_hidden_layers entries (compress_ratios may list MTP layers).
  json j = minimal();
  j["num_hidden_layers"] = 2;
  j["compress_ratios"] = {128, 4, 0};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.layer_types, (std::vector<AttnType>{AttnType::kHCA, AttnType::kCSA}));
  j["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention"};
  c = parse(j);  // explicit layer_types beat compress_ratios
  EXPECT_EQ(c.layer_types, std::vector<AttnType>(2, AttnType::kSliding));
}

// ---- errors: each names the file and the field ----

void expect_config_error(const json& j, ErrorCode code, std::initializer_list<std::string> parts) {
  expect_error([&] { parse(j); }, code, parts);
  expect_error([&] { parse(j); }, code, {kSrc});
}

TEST(ModelConfigErrors, ModelType) {
  json j = tiny_a();
  j["model_type"] = "llama";
  expect_config_error(j, ErrorCode::kUnsupported, {"model_type", "'llama'"});
  j.erase("model_type");
  expect_config_error(j, ErrorCode::kNotFound, {"model_type"});
}

TEST(ModelConfigErrors, MissingAndMistypedFields) {
  for (const char* key : {"hidden_size", "vocab_size", "num_hidden_layers", "head_dim",
                          "n_routed_experts", "o_groups"}) {
    json j = tiny_a();
    j.erase(key);
    expect_config_error(j, ErrorCode::kNotFound, {std::string("'") + key + "'", "missing"});
  }
  json j = tiny_a();
  j["hidden_size"] = "64";
  expect_config_error(j, ErrorCode::kCorrupt, {"'hidden_size'", "integer", "\"64\""});
  j = tiny_a();
  j["hidden_size"] = 64.5;
  expect_config_error(j, ErrorCode::kCorrupt, {"'hidden_size'", "integer"});
  j = tiny_a();
  j["rms_norm_eps"] = "small";
  expect_config_error(j, ErrorCode::kCorrupt, {"'rms_norm_eps'", "number"});
  j = tiny_a();
  j["tie_word_embeddings"] = 1;
  expect_config_error(j, ErrorCode::kCorrupt, {"'tie_word_embeddings'", "boolean"});
  j = tiny_a();
  j["layer_types"] = "sliding_attention";
  expect_config_error(j, ErrorCode::kCorrupt, {"'layer_types'", "list"});
  j = tiny_a();
  j["eos_token_id"] = "eos";
  expect_config_error(j, ErrorCode::kCorrupt, {"'eos_token_id'"});
  j = tiny_a();
  j["rope_parameters"] = 3;
  expect_config_error(j, ErrorCode::kCorrupt, {"'rope_parameters'", "object"});
  expect_error([] { parse_model_config("{\"model_type\": ", kSrc); }, ErrorCode::kCorrupt,
               {kSrc, "not valid JSON"});
  expect_error([] { parse_model_config("[]", kSrc); }, ErrorCode::kCorrupt, {kSrc, "object"});
  expect_error([] { load_model_config("/nonexistent/config.json"); }, ErrorCode::kNotFound,
               {"/nonexistent/config.json"});
}

TEST(ModelConfigErrors, LayerSchedules) {
  json j = tiny_a();
  j["layer_types"].erase(3);
  expect_config_error(j, ErrorCode::kCorrupt, {"'layer_types'", "3 entries", "4"});
  j = tiny_a();
  j["layer_types"][2] = "full_attention";
  expect_config_error(j, ErrorCode::kCorrupt, {"'layer_types[2]'", "'full_attention'"});
  j = tiny_a();
  j["mlp_layer_types"][1] = "dense";
  expect_config_error(j, ErrorCode::kCorrupt, {"'mlp_layer_types[1]'", "'dense'"});
  j = tiny_a();
  j["mlp_layer_types"] = {"moe"};
  expect_config_error(j, ErrorCode::kCorrupt, {"'mlp_layer_types'", "1 entries"});
  j = read_json(golden_dir("tiny-b") + "/config.json");
  j["compress_ratios"][1] = 16;
  expect_config_error(j, ErrorCode::kCorrupt, {"'compress_ratios[1]'", "16"});
  j["compress_ratios"] = {4, 0};
  expect_config_error(j, ErrorCode::kCorrupt, {"'compress_ratios'", "2 entries"});
  j = read_json(golden_dir("tiny-b") + "/config.json");
  j["num_hash_layers"] = -1;
  expect_config_error(j, ErrorCode::kCorrupt, {"'num_hash_layers'"});
  j = tiny_a();
  j["compress_rates"] = {{"sliding_attention", 2}};
  expect_config_error(j, ErrorCode::kCorrupt, {"'compress_rates.sliding_attention'"});
  j = tiny_a();
  j["compress_rates"]["heavily_compressed_attention"] = 0;
  expect_config_error(j, ErrorCode::kCorrupt, {"heavily_compressed_attention", "positive"});
}

TEST(ModelConfigErrors, InconsistentSizes) {
  struct Case {
    const char* key;
    json value;
    ErrorCode code;
    const char* why;
  };
  const Case cases[] = {
      {"hidden_size", 0, ErrorCode::kCorrupt, "positive"},
      {"num_attention_heads", -4, ErrorCode::kCorrupt, "positive"},
      {"head_dim", 33, ErrorCode::kCorrupt, "even"},
      {"num_key_value_heads", 2, ErrorCode::kUnsupported, "one KV head"},
      {"num_experts_per_tok", 9, ErrorCode::kCorrupt, "n_routed_experts"},
      {"o_groups", 3, ErrorCode::kCorrupt, "num_attention_heads"},
      {"index_head_dim", 8, ErrorCode::kCorrupt, "rope dim"},
      {"scoring_func", "relu", ErrorCode::kUnsupported, "'relu'"},
      {"swiglu_limit", 0, ErrorCode::kCorrupt, "positive"},
      {"eos_token_id", 512, ErrorCode::kCorrupt, "vocabulary"},
      {"num_hidden_layers", 1 << 20, ErrorCode::kCorrupt, "implausibly"},
  };
  for (const Case& k : cases) {
    json j = tiny_a();
    j[k.key] = k.value;
    SCOPED_TRACE(k.key);
    expect_config_error(j, k.code, {std::string("'") + k.key, k.why});
  }
}

TEST(ModelConfigErrors, RopeDims) {
  json j = minimal();
  j["qk_rope_head_dim"] = 7;  // odd rope dim
  expect_config_error(j, ErrorCode::kCorrupt, {"'partial_rotary_factor'", "rope dim of 7"});
  j["qk_rope_head_dim"] = 128;  // larger than head_dim 64
  expect_config_error(j, ErrorCode::kCorrupt, {"'partial_rotary_factor'", "128"});
  j = tiny_a();
  j["rope_parameters"]["main"]["partial_rotary_factor"] = 0.25;
  expect_config_error(j, ErrorCode::kUnsupported,
                      {"'rope_parameters.main.partial_rotary_factor'", "qk_rope_head_dim"});
  j = tiny_a();
  j["rope_parameters"]["compress"]["rope_type"] = "llama3";
  expect_config_error(j, ErrorCode::kUnsupported,
                      {"'rope_parameters.compress.rope_type'", "'llama3'"});
  j = tiny_a();
  j["rope_parameters"].erase("compress");
  expect_config_error(j, ErrorCode::kCorrupt, {"'rope_parameters'", "'main' and 'compress'"});
  j = tiny_a();
  j["rope_parameters"]["compress"] = {{"rope_type", "yarn"}};
  expect_config_error(j, ErrorCode::kNotFound, {"'rope_parameters.compress.factor'"});
  j = tiny_a();
  j["rope_parameters"]["main"]["rope_theta"] = -1;
  expect_config_error(j, ErrorCode::kCorrupt, {"'rope_parameters.main.rope_theta'"});
}

}  // namespace
}  // namespace deepinfer
