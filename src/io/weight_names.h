// Checkpoint tensor names -> canonical names. Canonical names are the official DeepSeek-V4 names
// without a "model." prefix: embed.weight, head.weight, norm.weight, hc_head_{fn,base,scale},
// layers.N.{attn_norm,ffn_norm}.weight, layers.N.hc_{attn,ffn}_{fn,base,scale},
// layers.N.attn.{wq_a,q_norm,wq_b,wkv,norm,wo_a,wo_b}.weight, layers.N.attn.attn_sink,
// layers.N.attn.compressor.{wkv,wgate,norm}.weight, layers.N.attn.compressor.ape,
// layers.N.attn.indexer.{wq_b,weights_proj}.weight, layers.N.attn.indexer.compressor.*,
// layers.N.ffn.gate.{weight,bias,tid2eid}, layers.N.ffn.experts.E.{w1,w2,w3}.weight,
// layers.N.ffn.shared_experts.{w1,w2,w3}.weight.
//
// Three spellings map onto them: official names, the names transformers saves (a "model."
// prefix, model.embed_tokens.weight, model.hc_head.hc_fn), and transformers' in-memory names
// (self_attn.q_a_proj, mlp.experts.gate_up_proj [E, 2I, D], ...). Names outside the V4 set
// (MTP layers, future additions) stay as they are, minus a leading "model.".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/model_config.h"

namespace deepinfer {

enum class WeightNameKind {
  kPlain,        // one tensor, one canonical name
  kFusedGateUp,  // transformers' mlp.experts.gate_up_proj [E, 2I, D]: w1 rows [0, I), w3 [I, 2I)
  kFusedDown,    // transformers' mlp.experts.down_proj [E, D, I]: w2 of every expert
};

struct CanonicalWeightName {
  WeightNameKind kind = WeightNameKind::kPlain;
  // kPlain: the canonical name. Fused kinds: "layers.N.ffn.experts" (the per-expert names are
  // made from it with expert_weight_name).
  std::string name;
  int layer = -1;      // N for layers.N.*, else -1
  bool known = false;  // a V4 parameter name (any spelling), not a pass-through
  // A quantisation scale (official "X.scale", transformers "X.weight_scale_inv" or fused
  // "gate_up_proj_scale_inv"): `name`/`kind` then describe the weight it scales.
  bool is_scale = false;
};

CanonicalWeightName canonicalize_weight_name(std::string_view disk_name);

// "layers.N.ffn.experts.E.wK.weight".
std::string expert_weight_name(int layer, int64_t expert, int w);

// The name transformers uses in memory for a canonical name (with the "model." prefix, or
// "lm_head.weight"); per-expert names give the fused tensor that holds them. Empty for names
// outside the V4 set.
std::string transformers_in_memory_name(std::string_view canonical);
// The name transformers writes when saving (official names, "model." prefix, embed_tokens,
// hc_head.hc_*); head.weight stays unprefixed.
std::string transformers_saved_name(std::string_view canonical);

// Every canonical weight a checkpoint for `config` holds (MTP layers aside), with the shape
// WeightStore::get_f32 returns. Integer tensors (tid2eid: [vocab, top-k]) have is_int set.
struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool is_int = false;
};
std::vector<WeightSpec> expected_weights(const ModelConfig& config);

}  // namespace deepinfer
