// DeepSeek-V4 weights, resident on the backend's device, grouped the way the forward uses them.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"

namespace deepinfer {
class WeightStore;
}

namespace deepinfer::deepseek_v4 {

// Window compressor (CSA: two series a/b of width d each; HCA: one series, b empty).
struct CompressorWeights {
  Tensor wkv_a, wkv_b;      // [d, D]: series a (CSA's Ca, HCA's only series), series b (CSA's Cb)
  Tensor wgate_a, wgate_b;  // [d, D]
  Tensor ape_a, ape_b;      // [m, d] position bias per slot
  Tensor norm;              // [d]
};

struct IndexerWeights {
  CompressorWeights compressor;  // at index_head_dim
  Tensor wq_b;                   // [index_n_heads * index_head_dim, q_lora_rank]
  Tensor weights_proj;           // [index_n_heads, D]
};

struct AttentionWeights {
  Tensor wq_a, q_norm, wq_b;  // [q_lora, D], [q_lora], [H*hd, q_lora]
  Tensor wkv, kv_norm;        // [hd, D], [hd]
  Tensor wo_a, wo_b;          // [G*o_lora, H*hd/G], [D, G*o_lora]
  Tensor sinks;               // [H]
  bool has_compressor = false;
  bool has_indexer = false;
  CompressorWeights compressor;
  IndexerWeights indexer;
};

struct MoeWeights {
  Tensor gate;                             // [E, D]
  Tensor bias;                             // [E] (moe layers) or undefined
  Tensor tid2eid;                          // [V, k] I32 (hash_moe layers) or undefined
  Tensor w1, w3;                           // [E, I, D]
  Tensor w2;                               // [E, D, I]
  Tensor shared_w1, shared_w3, shared_w2;  // [I, D], [I, D], [D, I]
};

struct HcWeights {
  Tensor fn, base, scale;  // [(2+hc)*hc, hc*D], [(2+hc)*hc], [3]
};

struct LayerWeights {
  Tensor attn_norm, ffn_norm;
  HcWeights hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights moe;
};

struct ModelWeights {
  Tensor embed;  // [V, D]
  Tensor head;   // [V, D]
  Tensor norm;   // [D]
  Tensor hc_head_fn, hc_head_base, hc_head_scale;
  std::vector<LayerWeights> layers;
  Tensor inv_freq_main, inv_freq_compress;  // [rope_dims / 2]
};

// Reads every tensor the config needs (shapes checked), converts to fp32 and places it on the
// backend's device. `on_tensor` (optional) is called after each tensor for progress reporting.
ModelWeights load_weights(const ModelConfig& config, const WeightStore& store, Backend& backend);

}  // namespace deepinfer::deepseek_v4
