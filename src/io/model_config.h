// ModelConfig: the parsed, validated config.json of a deepseek_v4 checkpoint. Lives in io/ because
// io parses it and model/ (above io) consumes it.
#pragma once

#include <string>
#include <vector>

namespace deepinfer {

enum class AttnType { kSliding, kCSA, kHCA };
enum class MlpType { kHashMoe, kMoe };
enum class RouterScoring { kSoftmax, kSigmoid, kSqrtSoftplus };

struct RopeConfig {
  std::string type = "default";  // "default" or "yarn"
  double theta = 10000.0;
  double partial_rotary_factor = 0.125;
  // yarn
  double factor = 1.0;
  double original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  // cos/sin scale. The flat (legacy) rope config gets 1.0 for yarn; a nested one without the key
  // gets YaRN's 0.1 * ln(factor) + 1, exactly as transformers resolves them.
  double attention_factor = 1.0;
};

struct ModelConfig {
  std::string model_type;  // "deepseek_v4"
  int vocab_size = 0;
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 1;
  int head_dim = 0;
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int moe_intermediate_size = 0;
  int n_routed_experts = 0;
  int num_experts_per_tok = 0;
  int n_shared_experts = 1;
  RouterScoring scoring_func = RouterScoring::kSqrtSoftplus;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;  // clamp of SwiGLU gate/up pre-activations (> 0; validated)
  int sliding_window = 0;
  int compress_rate_csa = 4;
  int compress_rate_hca = 128;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int hc_mult = 1;
  int hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;
  int qk_rope_head_dim = 0;  // head_dim * partial_rotary_factor
  RopeConfig rope_main;      // sliding layers
  RopeConfig rope_compress;  // CSA / HCA layers, their compressors and indexers
  int max_position_embeddings = 0;
  int num_nextn_predict_layers = 0;
  bool tie_word_embeddings = false;
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  std::vector<AttnType> layer_types;
  std::vector<MlpType> mlp_layer_types;

  int compress_rate(int layer) const {
    return layer_types[layer] == AttnType::kCSA   ? compress_rate_csa
           : layer_types[layer] == AttnType::kHCA ? compress_rate_hca
                                                  : 0;
  }
};

// Parses and validates config.json (modern and legacy keys, default layer schedules). Errors
// name the file and the field.
ModelConfig load_model_config(const std::string& config_json_path);
ModelConfig parse_model_config(const std::string& json_text, const std::string& source_name);

// transformers' spellings: "sliding_attention", "compressed_sparse_attention",
// "heavily_compressed_attention"; "hash_moe", "moe".
const char* attn_type_name(AttnType t);
const char* mlp_type_name(MlpType t);

}  // namespace deepinfer
