// config.json -> ModelConfig, following transformers 5.17's DeepseekV4Config: the same defaults,
// the same legacy keys (compress_ratios, compress_rate_csa/hca, num_hash_layers,
// qk_rope_head_dim, rope_scaling), the same default schedules and the same main / compress
// rope resolution (convert_rope_params_to_dict + standardize_rope_params + V4's __post_init__).
#include "io/model_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/status.h"

namespace deepinfer {

using json = nlohmann::json;

namespace {

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";
constexpr int kMaxLayers = 1 << 16;  // sanity bound before sizing per-layer vectors

// Typed access to one JSON object, with errors that name the config and the field path.
class Fields {
 public:
  Fields(const json& obj, const std::string& source, std::string prefix = "")
      : obj_(obj), source_(source), prefix_(std::move(prefix)) {}

  // Present and not null (transformers treats a null optional like an absent one).
  bool has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  bool contains(const char* key) const { return obj_.contains(key); }
  const json& at(const char* key) const { return obj_[key]; }
  std::string path(const std::string& key) const { return prefix_ + key; }

  [[noreturn]] void type_error(const std::string& key, const char* want, const json& v) const {
    std::string got = v.is_null() ? "null" : fmt::format("{} {}", v.type_name(), v.dump());
    if (got.size() > 80) got = got.substr(0, 77) + "...";
    fail(ErrorCode::kCorrupt, "config '{}': field '{}' must be {}, got {}", source_, path(key),
         want, got);
  }
  [[noreturn]] void value_error(const std::string& key, const std::string& why) const {
    fail(ErrorCode::kCorrupt, "config '{}': field '{}' {}", source_, path(key), why);
  }

  void require(const char* key) const {
    DI_CHECK(obj_.contains(key), ErrorCode::kNotFound,
             "config '{}': required field '{}' is missing", source_, path(key));
  }

  int64_t to_int(const std::string& key, const json& v) const {
    if (!v.is_number_integer()) type_error(key, "an integer", v);
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{std::numeric_limits<int>::max()})
      value_error(key, fmt::format("= {} is out of range", v.dump()));
    const int64_t x = v.get<int64_t>();
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
      value_error(key, fmt::format("= {} is out of range", x));
    return x;
  }

  int get_int(const char* key, int fallback, bool required = false) const {
    if (required) require(key);
    if (!obj_.contains(key)) return fallback;
    return static_cast<int>(to_int(key, obj_[key]));
  }

  double to_double(const std::string& key, const json& v) const {
    if (!v.is_number()) type_error(key, "a number", v);
    const double x = v.get<double>();
    if (!std::isfinite(x)) value_error(key, "is not finite");
    return x;
  }

  double get_double(const char* key, double fallback) const {
    if (!obj_.contains(key)) return fallback;
    return to_double(key, obj_[key]);
  }

  bool get_bool(const char* key, bool fallback) const {
    if (!obj_.contains(key)) return fallback;
    if (!obj_[key].is_boolean()) type_error(key, "a boolean", obj_[key]);
    return obj_[key].get<bool>();
  }

  std::string get_string(const char* key, const std::string& fallback,
                         bool required = false) const {
    if (required) require(key);
    if (!obj_.contains(key)) return fallback;
    if (!obj_[key].is_string()) type_error(key, "a string", obj_[key]);
    return obj_[key].get<std::string>();
  }

  const json& get_object(const char* key) const {
    if (!obj_[key].is_object()) type_error(key, "an object", obj_[key]);
    return obj_[key];
  }

  const json& get_array(const char* key) const {
    if (!obj_[key].is_array()) type_error(key, "a list", obj_[key]);
    return obj_[key];
  }

  const std::string& source() const { return source_; }

 private:
  const json& obj_;
  const std::string& source_;
  std::string prefix_;
};

AttnType parse_attn_type(const Fields& f, const std::string& key, const json& v) {
  if (!v.is_string()) f.type_error(key, "a layer type string", v);
  const std::string s = v.get<std::string>();
  if (s == kSliding) return AttnType::kSliding;
  if (s == kCsa) return AttnType::kCSA;
  if (s == kHca) return AttnType::kHCA;
  f.value_error(key, fmt::format("= '{}' is not one of {}, {}, {}", s, kSliding, kCsa, kHca));
}

MlpType parse_mlp_type(const Fields& f, const std::string& key, const json& v) {
  if (!v.is_string()) f.type_error(key, "an MLP layer type string", v);
  const std::string s = v.get<std::string>();
  if (s == "hash_moe") return MlpType::kHashMoe;
  if (s == "moe") return MlpType::kMoe;
  f.value_error(key, fmt::format("= '{}' is not one of hash_moe, moe", s));
}

// layer_types: explicit > legacy compress_ratios (per-layer 0/4/128) > the V4-Pro default
// (two HCA layers, then CSA at odd i and HCA at even i of the rest). Lists longer than
// num_hidden_layers are cut, as transformers does (compress_ratios may cover MTP layers too).
std::vector<AttnType> resolve_layer_types(const Fields& f, int n) {
  std::vector<AttnType> types;
  if (f.has("layer_types")) {
    const json& a = f.get_array("layer_types");
    for (size_t i = 0; i < a.size() && static_cast<int>(i) < n; ++i)
      types.push_back(parse_attn_type(f, fmt::format("layer_types[{}]", i), a[i]));
    if (static_cast<int>(a.size()) < n)
      f.value_error("layer_types",
                    fmt::format("has {} entries, but num_hidden_layers is {}", a.size(), n));
  } else if (f.has("compress_ratios")) {
    const json& a = f.get_array("compress_ratios");
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string key = fmt::format("compress_ratios[{}]", i);
      const int64_t r = f.to_int(key, a[i]);
      AttnType t = r == 0 ? AttnType::kSliding : r == 4 ? AttnType::kCSA : AttnType::kHCA;
      if (r != 0 && r != 4 && r != 128)
        f.value_error(key, fmt::format("= {} is not one of 0 (sliding), 4 (CSA), 128 (HCA)", r));
      if (static_cast<int>(i) < n) types.push_back(t);
    }
    if (static_cast<int>(a.size()) < n)
      f.value_error("compress_ratios",
                    fmt::format("has {} entries, but num_hidden_layers is {}", a.size(), n));
  } else {
    for (int i = 0; i < std::min(n, 2); ++i) types.push_back(AttnType::kHCA);
    for (int i = 0; i < n - 2; ++i) types.push_back(i % 2 ? AttnType::kCSA : AttnType::kHCA);
  }
  return types;
}

// mlp_layer_types: explicit > the first num_hash_layers (default 3) hash_moe, then moe.
std::vector<MlpType> resolve_mlp_layer_types(const Fields& f, int n) {
  std::vector<MlpType> types;
  if (f.has("mlp_layer_types")) {
    const json& a = f.get_array("mlp_layer_types");
    for (size_t i = 0; i < a.size() && static_cast<int>(i) < n; ++i)
      types.push_back(parse_mlp_type(f, fmt::format("mlp_layer_types[{}]", i), a[i]));
    if (static_cast<int>(a.size()) < n)
      f.value_error("mlp_layer_types",
                    fmt::format("has {} entries, but num_hidden_layers is {}", a.size(), n));
    return types;
  }
  const int n_hash = f.has("num_hash_layers") ? f.get_int("num_hash_layers", 3) : 3;
  if (n_hash < 0) f.value_error("num_hash_layers", fmt::format("= {} is negative", n_hash));
  for (int i = 0; i < n; ++i) types.push_back(i < n_hash ? MlpType::kHashMoe : MlpType::kMoe);
  return types;
}

void resolve_compress_rates(const Fields& f, ModelConfig& c) {
  if (f.has("compress_rates")) {
    const json& rates = f.get_object("compress_rates");
    for (const auto& [k, v] : rates.items()) {
      const std::string key = "compress_rates." + k;
      if (k == kCsa) {
        c.compress_rate_csa = static_cast<int>(f.to_int(key, v));
      } else if (k == kHca) {
        c.compress_rate_hca = static_cast<int>(f.to_int(key, v));
      } else {
        f.value_error(key, fmt::format("names no compressed layer type ({} or {})", kCsa, kHca));
      }
    }
  }
  // Legacy scalar overrides win over the dict, as in DeepseekV4Config.__post_init__.
  if (f.has("compress_rate_csa")) c.compress_rate_csa = f.get_int("compress_rate_csa", 4);
  if (f.has("compress_rate_hca")) c.compress_rate_hca = f.get_int("compress_rate_hca", 128);
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// One resolved rope sub-dict ("main" or "compress") -> RopeConfig, with
// _compute_yarn_parameters' defaults (factor from the context ratio, attention_factor from
// mscale, beta_fast 32 / beta_slow 1 when absent or zero).
RopeConfig read_rope(const json& d, const Fields& top, const std::string& label, double prf_unset,
                     const ModelConfig& c) {
  const Fields f(d, top.source(), "rope_parameters." + label + ".");
  RopeConfig r;
  r.type = f.get_string("rope_type", "default");
  if (r.type != "default" && r.type != "yarn")
    fail(ErrorCode::kUnsupported, "config '{}': field '{}' = '{}' is not supported (default, yarn)",
         top.source(), f.path("rope_type"), r.type);
  f.require("rope_theta");
  r.theta = f.get_double("rope_theta", r.theta);
  r.partial_rotary_factor =
      f.has("partial_rotary_factor") ? f.get_double("partial_rotary_factor", 1.0) : prf_unset;
  if (r.type == "yarn") {
    f.require("factor");
    r.original_max_position_embeddings = f.has("original_max_position_embeddings")
                                             ? f.get_double("original_max_position_embeddings", 0)
                                             : c.max_position_embeddings;
    if (r.original_max_position_embeddings <= 0)
      f.value_error("original_max_position_embeddings", "must be positive");
    r.factor = f.has("factor") ? f.get_double("factor", 1.0)
                               : c.max_position_embeddings / r.original_max_position_embeddings;
    if (r.factor <= 0) f.value_error("factor", "must be positive");
    const double mscale = f.has("mscale") ? f.get_double("mscale", 0) : 0;
    const double mscale_all_dim = f.has("mscale_all_dim") ? f.get_double("mscale_all_dim", 0) : 0;
    if (f.has("attention_factor")) {
      r.attention_factor = f.get_double("attention_factor", 1.0);
    } else if (mscale != 0 && mscale_all_dim != 0) {
      r.attention_factor = yarn_mscale(r.factor, mscale) / yarn_mscale(r.factor, mscale_all_dim);
    } else {
      r.attention_factor = yarn_mscale(r.factor, 1.0);
    }
    const double bf = f.has("beta_fast") ? f.get_double("beta_fast", 32) : 0;
    const double bs = f.has("beta_slow") ? f.get_double("beta_slow", 1) : 0;
    r.beta_fast = bf != 0 ? bf : 32.0;
    r.beta_slow = bs != 0 ? bs : 1.0;
  }
  if (r.theta <= 0) f.value_error("rope_theta", "must be positive");
  return r;
}

void resolve_rope(const Fields& f, ModelConfig& c, double rope_theta, double compress_theta,
                  bool prf_explicit, double prf) {
  // convert_rope_params_to_dict: a non-empty rope_scaling replaces rope_parameters.
  json rp = json::object();
  if (f.has("rope_scaling") && !f.get_object("rope_scaling").empty()) {
    rp = f.at("rope_scaling");
  } else if (f.has("rope_parameters")) {
    rp = f.get_object("rope_parameters");
  }
  const bool nested_keys = rp.contains("main") || rp.contains("compress");
  if (nested_keys) {
    if (!rp.contains("main") || !rp["main"].is_object() || !rp.contains("compress") ||
        !rp["compress"].is_object())
      fail(ErrorCode::kCorrupt,
           "config '{}': field 'rope_parameters' must hold both 'main' and 'compress' objects",
           f.source());
    // standardize_rope_params, per-type: defaults from the top-level fields. A sub-dict without
    // partial_rotary_factor gets the explicit top-level one; failing that, default rope reads
    // 1.0 while yarn re-standardises with the resolved factor.
    for (const char* label : {"main", "compress"}) {
      json& d = rp[label];
      if (!d.contains("rope_type")) d["rope_type"] = d.value("type", json("default"));
      if (!d.contains("rope_theta")) d["rope_theta"] = rope_theta;
      if (prf_explicit && !d.contains("partial_rotary_factor")) d["partial_rotary_factor"] = prf;
    }
    const auto unset = [&](const json& d) { return d["rope_type"] == "default" ? 1.0 : prf; };
    c.rope_main = read_rope(rp["main"], f, "main", unset(rp["main"]), c);
    c.rope_compress = read_rope(rp["compress"], f, "compress", unset(rp["compress"]), c);
    return;
  }
  // Flat: its keys describe the compress rope (yarn); main is plain rope at rope_theta.
  if (!rp.contains("rope_type")) rp["rope_type"] = rp.value("type", json("default"));
  json main = {
      {"rope_type", "default"}, {"rope_theta", rope_theta}, {"partial_rotary_factor", prf}};
  json compress = rp;
  compress["rope_theta"] = compress_theta;
  compress["partial_rotary_factor"] = prf;
  if (compress["rope_type"] == "yarn" && !compress.contains("attention_factor"))
    compress["attention_factor"] = 1.0;
  c.rope_main = read_rope(main, f, "main", prf, c);
  c.rope_compress = read_rope(compress, f, "compress", prf, c);
}

void check_positive(const Fields& f, const char* key, double v) {
  if (!(v > 0)) f.value_error(key, fmt::format("= {} must be positive", v));
}

void validate(const Fields& f, const ModelConfig& c) {
  const std::pair<const char*, int> positive[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"head_dim", c.head_dim},
      {"q_lora_rank", c.q_lora_rank},
      {"o_groups", c.o_groups},
      {"o_lora_rank", c.o_lora_rank},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"n_routed_experts", c.n_routed_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"sliding_window", c.sliding_window},
      {"index_n_heads", c.index_n_heads},
      {"index_head_dim", c.index_head_dim},
      {"index_topk", c.index_topk},
      {"hc_mult", c.hc_mult},
      {"max_position_embeddings", c.max_position_embeddings},
      {"compress_rates.compressed_sparse_attention", c.compress_rate_csa},
      {"compress_rates.heavily_compressed_attention", c.compress_rate_hca},
  };
  for (const auto& [key, v] : positive) check_positive(f, key, v);
  if (c.num_hidden_layers > kMaxLayers)
    f.value_error("num_hidden_layers",
                  fmt::format("= {} is implausibly large", c.num_hidden_layers));
  for (const auto& [key, v] : {std::pair{"n_shared_experts", c.n_shared_experts},
                               {"num_nextn_predict_layers", c.num_nextn_predict_layers},
                               {"hc_sinkhorn_iters", c.hc_sinkhorn_iters}}) {
    if (v < 0) f.value_error(key, fmt::format("= {} is negative", v));
  }
  if (c.num_key_value_heads != 1)
    fail(ErrorCode::kUnsupported,
         "config '{}': field 'num_key_value_heads' = {} is not supported; DeepSeek-V4 attention "
         "shares one KV head",
         f.source(), c.num_key_value_heads);
  if (c.head_dim % 2) f.value_error("head_dim", fmt::format("= {} must be even", c.head_dim));
  if (c.qk_rope_head_dim <= 0 || c.qk_rope_head_dim % 2 || c.qk_rope_head_dim > c.head_dim)
    f.value_error("partial_rotary_factor",
                  fmt::format("gives a rope dim of {} for head_dim {}; it must be even, positive "
                              "and at most head_dim",
                              c.qk_rope_head_dim, c.head_dim));
  for (const auto& [label, r] : {std::pair{"main", &c.rope_main}, {"compress", &c.rope_compress}}) {
    const int dim = static_cast<int>(c.head_dim * r->partial_rotary_factor);
    if (dim != c.qk_rope_head_dim)
      fail(ErrorCode::kUnsupported,
           "config '{}': field 'rope_parameters.{}.partial_rotary_factor' = {} gives a rope dim "
           "of {}, but qk_rope_head_dim is {}; one rope dim for all layers is supported",
           f.source(), label, r->partial_rotary_factor, dim, c.qk_rope_head_dim);
  }
  if (c.index_head_dim < c.qk_rope_head_dim)
    f.value_error("index_head_dim", fmt::format("= {} is smaller than the rope dim {}",
                                                c.index_head_dim, c.qk_rope_head_dim));
  if (c.num_experts_per_tok > c.n_routed_experts)
    f.value_error("num_experts_per_tok", fmt::format("= {} exceeds n_routed_experts = {}",
                                                     c.num_experts_per_tok, c.n_routed_experts));
  if (c.num_attention_heads % c.o_groups)
    f.value_error("o_groups", fmt::format("= {} does not divide num_attention_heads = {}",
                                          c.o_groups, c.num_attention_heads));
  check_positive(f, "rms_norm_eps", c.rms_norm_eps);
  if (c.hc_eps < 0) f.value_error("hc_eps", "must not be negative");
  // transformers clamps with swiglu_limit unconditionally: zero or less has no meaning.
  check_positive(f, "swiglu_limit", c.swiglu_limit);
  if (c.bos_token_id >= c.vocab_size)
    f.value_error("bos_token_id",
                  fmt::format("= {} is outside the vocabulary ({})", c.bos_token_id, c.vocab_size));
  for (int id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size)
      f.value_error("eos_token_id",
                    fmt::format("= {} is outside the vocabulary ({})", id, c.vocab_size));
  }
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& source_name) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    fail(ErrorCode::kCorrupt, "config '{}' is not valid JSON: {}", source_name, e.what());
  }
  DI_CHECK(j.is_object(), ErrorCode::kCorrupt, "config '{}' is a JSON {}, expected an object",
           source_name, j.type_name());
  const Fields f(j, source_name);

  ModelConfig c;
  c.model_type = f.get_string("model_type", "", /*required=*/true);
  DI_CHECK(c.model_type == "deepseek_v4", ErrorCode::kUnsupported,
           "config '{}': model_type '{}' is not supported (expected 'deepseek_v4')", source_name,
           c.model_type);

  // Fields that size tensors are required: a silent default (hidden 4096) would only surface
  // later as a confusing shape error. The rest default as in DeepseekV4Config.
  c.vocab_size = f.get_int("vocab_size", 0, true);
  c.hidden_size = f.get_int("hidden_size", 0, true);
  c.num_hidden_layers = f.get_int("num_hidden_layers", 0, true);
  c.num_attention_heads = f.get_int("num_attention_heads", 0, true);
  c.head_dim = f.get_int("head_dim", 0, true);
  c.q_lora_rank = f.get_int("q_lora_rank", 0, true);
  c.o_groups = f.get_int("o_groups", 0, true);
  c.o_lora_rank = f.get_int("o_lora_rank", 0, true);
  c.moe_intermediate_size = f.get_int("moe_intermediate_size", 0, true);
  c.n_routed_experts = f.get_int("n_routed_experts", 0, true);
  c.num_experts_per_tok = f.get_int("num_experts_per_tok", 0, true);
  c.num_key_value_heads = f.get_int("num_key_value_heads", 1);
  c.n_shared_experts = f.get_int("n_shared_experts", 1);
  c.norm_topk_prob = f.get_bool("norm_topk_prob", true);
  c.routed_scaling_factor = f.get_double("routed_scaling_factor", 1.5);
  c.swiglu_limit = f.get_double("swiglu_limit", 10.0);
  c.sliding_window = f.get_int("sliding_window", 128);
  c.index_n_heads = f.get_int("index_n_heads", 64);
  c.index_head_dim = f.get_int("index_head_dim", 128);
  c.index_topk = f.get_int("index_topk", 512);
  c.hc_mult = f.get_int("hc_mult", 4);
  c.hc_sinkhorn_iters = f.get_int("hc_sinkhorn_iters", 20);
  c.hc_eps = f.get_double("hc_eps", 1e-6);
  c.rms_norm_eps = f.get_double("rms_norm_eps", 1e-6);
  c.max_position_embeddings = f.get_int("max_position_embeddings", 1048576);
  c.num_nextn_predict_layers = f.get_int("num_nextn_predict_layers", 1);
  c.tie_word_embeddings = f.get_bool("tie_word_embeddings", false);

  const std::string scoring = f.get_string("scoring_func", "sqrtsoftplus");
  if (scoring == "sqrtsoftplus") {
    c.scoring_func = RouterScoring::kSqrtSoftplus;
  } else if (scoring == "sigmoid") {
    c.scoring_func = RouterScoring::kSigmoid;
  } else if (scoring == "softmax") {
    c.scoring_func = RouterScoring::kSoftmax;
  } else {
    fail(ErrorCode::kUnsupported,
         "config '{}': field 'scoring_func' = '{}' is not one of sqrtsoftplus, sigmoid, softmax",
         source_name, scoring);
  }

  c.bos_token_id = f.has("bos_token_id")        ? f.get_int("bos_token_id", 0)
                   : f.contains("bos_token_id") ? -1
                                                : 0;
  if (!f.contains("eos_token_id")) {
    c.eos_token_ids = {1};
  } else if (f.has("eos_token_id")) {
    const json& e = f.at("eos_token_id");
    if (e.is_array()) {
      for (size_t i = 0; i < e.size(); ++i)
        c.eos_token_ids.push_back(
            static_cast<int>(f.to_int(fmt::format("eos_token_id[{}]", i), e[i])));
    } else {
      c.eos_token_ids.push_back(static_cast<int>(f.to_int("eos_token_id", e)));
    }
  }

  // Positive first: the schedules size vectors by num_hidden_layers.
  check_positive(f, "num_hidden_layers", c.num_hidden_layers);
  if (c.num_hidden_layers > kMaxLayers)
    f.value_error("num_hidden_layers",
                  fmt::format("= {} is implausibly large", c.num_hidden_layers));
  resolve_compress_rates(f, c);
  c.layer_types = resolve_layer_types(f, c.num_hidden_layers);
  c.mlp_layer_types = resolve_mlp_layer_types(f, c.num_hidden_layers);

  // partial_rotary_factor: explicit > legacy qk_rope_head_dim / head_dim > 64 / 512.
  check_positive(f, "head_dim", c.head_dim);
  const bool prf_explicit = f.has("partial_rotary_factor");
  double prf = 64.0 / 512.0;
  if (prf_explicit) {
    prf = f.get_double("partial_rotary_factor", prf);
  } else if (f.has("qk_rope_head_dim")) {
    prf = static_cast<double>(f.get_int("qk_rope_head_dim", 0)) / c.head_dim;
  }
  c.qk_rope_head_dim = static_cast<int>(c.head_dim * prf);
  const double rope_theta = f.get_double("rope_theta", 10000.0);
  const double compress_theta = f.get_double("compress_rope_theta", 160000.0);
  resolve_rope(f, c, rope_theta, compress_theta, prf_explicit, prf);

  validate(f, c);
  return c;
}

ModelConfig load_model_config(const std::string& config_json_path) {
  std::ifstream in(config_json_path, std::ios::binary);
  DI_CHECK(in.good(), ErrorCode::kNotFound, "cannot read config '{}'", config_json_path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_model_config(ss.str(), config_json_path);
}

const char* attn_type_name(AttnType t) {
  switch (t) {
    case AttnType::kSliding:
      return kSliding;
    case AttnType::kCSA:
      return kCsa;
    case AttnType::kHCA:
      return kHca;
  }
  return "?";
}

const char* mlp_type_name(MlpType t) {
  switch (t) {
    case MlpType::kHashMoe:
      return "hash_moe";
    case MlpType::kMoe:
      return "moe";
  }
  return "?";
}

}  // namespace deepinfer
