#include "io/weight_names.h"

#include <fmt/format.h>

#include <utility>

namespace deepinfer {

namespace {

using NamePair = std::pair<std::string_view, std::string_view>;  // {canonical, in-memory}

// Top-level parameters (in-memory names without the "model." prefix).
constexpr NamePair kTopNames[] = {
    {"embed.weight", "embed_tokens.weight"}, {"head.weight", "lm_head.weight"},
    {"norm.weight", "norm.weight"},          {"hc_head_fn", "hc_head.hc_fn"},
    {"hc_head_base", "hc_head.hc_base"},     {"hc_head_scale", "hc_head.hc_scale"},
};

// Per-layer parameters, after "layers.N.". transformers' rename rules applied to each official
// name (.attn.->.self_attn., .indexer.compressor.->.compressor.indexer., .norm.->.kv_norm., ...)
// spelled out, so a name either matches exactly or is not a V4 name.
constexpr NamePair kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"hc_attn_fn", "attn_hc.fn"},
    {"hc_attn_base", "attn_hc.base"},
    {"hc_attn_scale", "attn_hc.scale"},
    {"hc_ffn_fn", "ffn_hc.fn"},
    {"hc_ffn_base", "ffn_hc.base"},
    {"hc_ffn_scale", "ffn_hc.scale"},
    {"attn.wq_a.weight", "self_attn.q_a_proj.weight"},
    {"attn.q_norm.weight", "self_attn.q_a_norm.weight"},
    {"attn.wq_b.weight", "self_attn.q_b_proj.weight"},
    {"attn.wkv.weight", "self_attn.kv_proj.weight"},
    {"attn.norm.weight", "self_attn.kv_norm.weight"},
    {"attn.wo_a.weight", "self_attn.o_a_proj.weight"},
    {"attn.wo_b.weight", "self_attn.o_b_proj.weight"},
    {"attn.attn_sink", "self_attn.sinks"},
    {"attn.compressor.wkv.weight", "self_attn.compressor.kv_proj.weight"},
    {"attn.compressor.wgate.weight", "self_attn.compressor.gate_proj.weight"},
    {"attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"},
    {"attn.compressor.ape", "self_attn.compressor.position_bias"},
    {"attn.indexer.wq_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"},
    {"attn.indexer.weights_proj.weight", "self_attn.compressor.indexer.scorer.weights_proj.weight"},
    {"attn.indexer.compressor.wkv.weight", "self_attn.compressor.indexer.kv_proj.weight"},
    {"attn.indexer.compressor.wgate.weight", "self_attn.compressor.indexer.gate_proj.weight"},
    {"attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"},
    {"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"},
    {"ffn.gate.weight", "mlp.gate.weight"},
    {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn.gate.tid2eid", "mlp.gate.tid2eid"},
    {"ffn.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"},
    {"ffn.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"},
    {"ffn.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"},
};

constexpr std::string_view kFusedGateUp = "mlp.experts.gate_up_proj";
constexpr std::string_view kFusedDown = "mlp.experts.down_proj";

bool consume_prefix(std::string_view* s, std::string_view prefix) {
  if (!s->starts_with(prefix)) return false;
  s->remove_prefix(prefix.size());
  return true;
}

// Parses "<digits>." at the front of *s; leaves *s after the dot.
bool consume_index(std::string_view* s, int64_t* out) {
  size_t i = 0;
  int64_t v = 0;
  while (i < s->size() && i < 9 && (*s)[i] >= '0' && (*s)[i] <= '9') v = v * 10 + ((*s)[i++] - '0');
  if (i == 0 || i >= s->size() || (*s)[i] != '.') return false;
  *out = v;
  s->remove_prefix(i + 1);
  return true;
}

// "ffn.experts.E.wK.weight" -> (E, K).
bool parse_expert_suffix(std::string_view rest, int64_t* expert, int* w) {
  if (!consume_prefix(&rest, "ffn.experts.") || !consume_index(&rest, expert)) return false;
  if (rest.size() != 9 || rest[0] != 'w' || rest[1] < '1' || rest[1] > '3' ||
      rest.substr(2) != ".weight")
    return false;
  *w = rest[1] - '0';
  return true;
}

// Canonicalises a name that is not a scale companion.
CanonicalWeightName canonicalize_core(std::string_view s) {
  CanonicalWeightName r;
  for (const auto& [canon, hf] : kTopNames) {
    if (s == canon || s == hf) {
      r.name = canon;
      r.known = true;
      return r;
    }
  }
  std::string_view rest = s;
  int64_t layer = 0;
  if (consume_prefix(&rest, "layers.") && consume_index(&rest, &layer)) {
    const std::string prefix = fmt::format("layers.{}.", layer);
    for (const auto& [canon, hf] : kLayerNames) {
      if (rest == canon || rest == hf) {
        r.name = prefix + std::string(canon);
        r.layer = static_cast<int>(layer);
        r.known = true;
        return r;
      }
    }
    int64_t expert = 0;
    int w = 0;
    if (parse_expert_suffix(rest, &expert, &w)) {
      r.name = expert_weight_name(static_cast<int>(layer), expert, w);
      r.layer = static_cast<int>(layer);
      r.known = true;
      return r;
    }
    if (rest == kFusedGateUp || rest == kFusedDown) {
      r.kind = rest == kFusedGateUp ? WeightNameKind::kFusedGateUp : WeightNameKind::kFusedDown;
      r.name = prefix + "ffn.experts";
      r.layer = static_cast<int>(layer);
      r.known = true;
      return r;
    }
  }
  r.name = std::string(s);  // not a V4 name: pass through
  return r;
}

}  // namespace

CanonicalWeightName canonicalize_weight_name(std::string_view disk_name) {
  std::string_view s = disk_name;
  consume_prefix(&s, "model.");
  // transformers-style scales: "X.weight_scale_inv", or "gate_up_proj_scale_inv" for fused.
  if (s.ends_with("_scale_inv")) {
    CanonicalWeightName r = canonicalize_core(s.substr(0, s.size() - 10));
    r.is_scale = true;
    return r;
  }
  CanonicalWeightName r = canonicalize_core(s);
  if (r.known) return r;  // e.g. attn_hc.scale is a parameter, not a companion
  // Official scales: "X.scale" next to "X.weight".
  if (s.ends_with(".scale")) {
    const std::string weight = std::string(s.substr(0, s.size() - 6)) + ".weight";
    CanonicalWeightName w = canonicalize_core(weight);
    w.is_scale = true;
    return w;
  }
  return r;
}

std::string expert_weight_name(int layer, int64_t expert, int w) {
  return fmt::format("layers.{}.ffn.experts.{}.w{}.weight", layer, expert, w);
}

std::string transformers_in_memory_name(std::string_view canonical) {
  for (const auto& [canon, hf] : kTopNames) {
    if (canonical == canon)
      return canon == "head.weight" ? std::string(hf) : "model." + std::string(hf);
  }
  std::string_view rest = canonical;
  int64_t layer = 0;
  if (!consume_prefix(&rest, "layers.") || !consume_index(&rest, &layer)) return "";
  for (const auto& [canon, hf] : kLayerNames) {
    if (rest == canon) return fmt::format("model.layers.{}.{}", layer, hf);
  }
  int64_t expert = 0;
  int w = 0;
  if (parse_expert_suffix(rest, &expert, &w))
    return fmt::format("model.layers.{}.{}", layer, w == 2 ? kFusedDown : kFusedGateUp);
  return "";
}

std::string transformers_saved_name(std::string_view canonical) {
  const CanonicalWeightName c = canonicalize_core(canonical);
  if (!c.known || c.name != canonical || c.kind != WeightNameKind::kPlain) return "";
  if (canonical == "head.weight") return "head.weight";
  if (canonical == "embed.weight") return "model.embed_tokens.weight";
  if (canonical.starts_with("hc_head_"))
    return "model.hc_head.hc_" + std::string(canonical.substr(8));
  return "model." + std::string(canonical);
}

std::vector<WeightSpec> expected_weights(const ModelConfig& c) {
  const int64_t d = c.hidden_size, hc = c.hc_mult, q = c.q_lora_rank, hd = c.head_dim;
  const int64_t inter = c.moe_intermediate_size, ihd = c.index_head_dim;
  const int64_t mix = (2 + hc) * hc;  // mHC: pre (hc) + post (hc) + residual (hc * hc) weights
  std::vector<WeightSpec> w = {
      {"embed.weight", {c.vocab_size, d}},
      {"head.weight", {c.vocab_size, d}},
      {"norm.weight", {d}},
      {"hc_head_fn", {hc, hc * d}},
      {"hc_head_base", {hc}},
      {"hc_head_scale", {1}},
  };
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l);
    const auto add = [&](const std::string& name, std::vector<int64_t> shape) {
      w.push_back({p + name, std::move(shape)});
    };
    add("attn_norm.weight", {d});
    add("ffn_norm.weight", {d});
    for (const char* hc_name : {"hc_attn_", "hc_ffn_"}) {
      add(std::string(hc_name) + "fn", {mix, hc * d});
      add(std::string(hc_name) + "base", {mix});
      add(std::string(hc_name) + "scale", {3});
    }
    add("attn.wq_a.weight", {q, d});
    add("attn.q_norm.weight", {q});
    add("attn.wq_b.weight", {c.num_attention_heads * hd, q});
    add("attn.wkv.weight", {hd, d});
    add("attn.norm.weight", {hd});
    add("attn.wo_a.weight",
        {int64_t{c.o_groups} * c.o_lora_rank, c.num_attention_heads * hd / c.o_groups});
    add("attn.wo_b.weight", {d, int64_t{c.o_groups} * c.o_lora_rank});
    add("attn.attn_sink", {c.num_attention_heads});
    const AttnType t = c.layer_types[l];
    if (t != AttnType::kSliding) {
      // CSA compresses two overlapping series (2 * head_dim wide); HCA one.
      const int64_t width = t == AttnType::kCSA ? 2 * hd : hd;
      add("attn.compressor.wkv.weight", {width, d});
      add("attn.compressor.wgate.weight", {width, d});
      add("attn.compressor.norm.weight", {hd});
      add("attn.compressor.ape", {c.compress_rate(l), width});
    }
    if (t == AttnType::kCSA) {
      add("attn.indexer.wq_b.weight", {c.index_n_heads * ihd, q});
      add("attn.indexer.weights_proj.weight", {c.index_n_heads, d});
      add("attn.indexer.compressor.wkv.weight", {2 * ihd, d});
      add("attn.indexer.compressor.wgate.weight", {2 * ihd, d});
      add("attn.indexer.compressor.norm.weight", {ihd});
      add("attn.indexer.compressor.ape", {c.compress_rate(l), 2 * ihd});
    }
    add("ffn.gate.weight", {c.n_routed_experts, d});
    if (c.mlp_layer_types[l] == MlpType::kHashMoe) {
      w.push_back({p + "ffn.gate.tid2eid", {c.vocab_size, c.num_experts_per_tok}, true});
    } else {
      add("ffn.gate.bias", {c.n_routed_experts});
    }
    for (int e = 0; e < c.n_routed_experts; ++e) {
      w.push_back({expert_weight_name(l, e, 1), {inter, d}});
      w.push_back({expert_weight_name(l, e, 2), {d, inter}});
      w.push_back({expert_weight_name(l, e, 3), {inter, d}});
    }
    add("ffn.shared_experts.w1.weight", {inter, d});
    add("ffn.shared_experts.w2.weight", {d, inter});
    add("ffn.shared_experts.w3.weight", {inter, d});
  }
  return w;
}

}  // namespace deepinfer
