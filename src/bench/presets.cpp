// Preset configs for `deepinfer make-random`.
//
// tiny:     the shapes of the bundled models/deepseek-v4-tiny-en (vocab 8192, so its tokenizer
//           fits). Its layer schedule repeats sliding, CSA, HCA, CSA, HCA, sliding; two hash
//           layers.
// v4-flash: transformers' DeepseekV4Config defaults (the V4-Flash shapes): hidden 4096, 43
//           layers, 64 heads x 512, q_lora 1024, o_groups 8 x o_lora 1024, 256 experts top-6 of
//           width 2048, indexer 64 heads x 128 keeping 512, window 128, CSA 4 / HCA 128, mHC 4,
//           vocab 129280; schedule HCA, HCA, then HCA / CSA alternating; 3 hash layers; compress
//           rope YaRN factor 16 over 65536 positions (1M context).
// v4-pro:   not in transformers; chosen so the totals match the published 1.6T parameters / 49B
//           active: hidden 7168, 61 layers, 128 heads x 512, q_lora 1536, o_groups 16 x o_lora
//           1024, 384 experts top-6 of width 3072, indexer 64 x 128 keeping 1024, the rest as
//           v4-flash. (Not checked against an official config.json.)
// MTP layers are not written (num_nextn_predict_layers 0).
#include <string>

#include "bench/random_checkpoint.h"
#include "core/status.h"
#include "io/model_config.h"

namespace deepinfer::bench {

using json = nlohmann::json;

namespace {

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";

std::string layer_type_name(const std::string& s) {
  if (s == "sliding" || s == kSliding) return kSliding;
  if (s == "csa" || s == kCsa) return kCsa;
  if (s == "hca" || s == kHca) return kHca;
  fail(ErrorCode::kInvalidArgument, "--layer-types: '{}' is not one of sliding, csa, hca", s);
}

json base_config() {
  return json{
      {"architectures", {"DeepseekV4ForCausalLM"}},
      {"model_type", "deepseek_v4"},
      {"num_key_value_heads", 1},
      {"n_shared_experts", 1},
      {"scoring_func", "sqrtsoftplus"},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 1.5},
      {"swiglu_limit", 10.0},
      {"hc_mult", 4},
      {"hc_sinkhorn_iters", 20},
      {"hc_eps", 1e-6},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 10000.0},
      {"compress_rope_theta", 160000.0},
      {"num_nextn_predict_layers", 0},
      {"tie_word_embeddings", false},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"dtype", "bfloat16"},
  };
}

json tiny() {
  json c = base_config();
  c.update(json{
      {"vocab_size", 8192},
      {"hidden_size", 256},
      {"num_hidden_layers", 6},
      {"num_attention_heads", 8},
      {"head_dim", 64},
      {"q_lora_rank", 128},
      {"o_groups", 4},
      {"o_lora_rank", 64},
      {"moe_intermediate_size", 192},
      {"n_routed_experts", 16},
      {"num_experts_per_tok", 4},
      {"sliding_window", 64},
      {"compress_rates", {{kCsa, 4}, {kHca, 16}}},
      {"index_n_heads", 4},
      {"index_head_dim", 32},
      {"index_topk", 32},
      {"partial_rotary_factor", 0.5},
      {"max_position_embeddings", 4096},
      {"pad_token_id", 2},
      {"rope_parameters",
       {{"main",
         {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}}},
        {"compress",
         {{"rope_type", "default"}, {"rope_theta", 160000.0}, {"partial_rotary_factor", 0.5}}}}},
  });
  return c;
}

json v4_rope() {
  return json{
      {"main",
       {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.125}}},
      {"compress",
       {{"rope_type", "yarn"},
        {"rope_theta", 160000.0},
        {"partial_rotary_factor", 0.125},
        {"factor", 16.0},
        {"original_max_position_embeddings", 65536},
        {"beta_fast", 32.0},
        {"beta_slow", 1.0},
        {"attention_factor", 1.0}}}};
}

json v4_flash() {
  json c = base_config();
  c.update(json{
      {"vocab_size", 129280},
      {"hidden_size", 4096},
      {"num_hidden_layers", 43},
      {"num_attention_heads", 64},
      {"head_dim", 512},
      {"q_lora_rank", 1024},
      {"o_groups", 8},
      {"o_lora_rank", 1024},
      {"moe_intermediate_size", 2048},
      {"n_routed_experts", 256},
      {"num_experts_per_tok", 6},
      {"sliding_window", 128},
      {"compress_rates", {{kCsa, 4}, {kHca, 128}}},
      {"index_n_heads", 64},
      {"index_head_dim", 128},
      {"index_topk", 512},
      {"partial_rotary_factor", 0.125},
      {"max_position_embeddings", 1048576},
      {"rope_parameters", v4_rope()},
  });
  return c;
}

json v4_pro() {
  json c = v4_flash();
  c.update(json{
      {"hidden_size", 7168},
      {"num_hidden_layers", 61},
      {"num_attention_heads", 128},
      {"q_lora_rank", 1536},
      {"o_groups", 16},
      {"o_lora_rank", 1024},
      {"moe_intermediate_size", 3072},
      {"n_routed_experts", 384},
      {"index_topk", 1024},
  });
  return c;
}

}  // namespace

json preset_config(const PresetOptions& o) {
  json c;
  bool tiny_schedule = false;
  if (o.preset == "tiny") {
    c = tiny();
    tiny_schedule = true;
  } else if (o.preset == "v4-flash") {
    c = v4_flash();
  } else if (o.preset == "v4-pro") {
    c = v4_pro();
  } else {
    fail(ErrorCode::kInvalidArgument, "--preset: '{}' is not one of tiny, v4-flash, v4-pro",
         o.preset);
  }
  DI_CHECK(o.num_layers >= 0, ErrorCode::kInvalidArgument, "--num-layers must be positive (got {})",
           o.num_layers);
  int n = o.num_layers > 0 ? o.num_layers : c["num_hidden_layers"].get<int>();
  if (!o.layer_types.empty() && o.num_layers == 0) n = static_cast<int>(o.layer_types.size());
  DI_CHECK(o.layer_types.empty() || static_cast<int>(o.layer_types.size()) == n,
           ErrorCode::kInvalidArgument, "--layer-types names {} layers, but --num-layers is {}",
           o.layer_types.size(), n);
  c["num_hidden_layers"] = n;

  json types = json::array(), mlp = json::array();
  const int n_hash = tiny_schedule ? 2 : 3;
  for (int i = 0; i < n; ++i) {
    if (!o.layer_types.empty()) {
      types.push_back(layer_type_name(o.layer_types[i]));
    } else if (tiny_schedule) {
      static const char* const kPattern[] = {kSliding, kCsa, kHca, kCsa, kHca, kSliding};
      types.push_back(kPattern[i % 6]);
    } else {
      // transformers' default: two HCA layers, then HCA at even i, CSA at odd i of the rest.
      types.push_back(i < 2 ? kHca : ((i - 2) % 2 ? kCsa : kHca));
    }
    mlp.push_back(i < n_hash ? "hash_moe" : "moe");
  }
  c["layer_types"] = types;
  c["mlp_layer_types"] = mlp;

  if (o.num_experts != 0) {
    DI_CHECK(o.num_experts > 0, ErrorCode::kInvalidArgument,
             "--num-experts must be positive (got {})", o.num_experts);
    c["n_routed_experts"] = o.num_experts;
    c["num_experts_per_tok"] = std::min(c["num_experts_per_tok"].get<int>(), o.num_experts);
  }
  return c;
}

ModelConfig preset_model_config(const PresetOptions& options) {
  return parse_model_config(preset_config(options).dump(), "preset " + options.preset);
}

}  // namespace deepinfer::bench
