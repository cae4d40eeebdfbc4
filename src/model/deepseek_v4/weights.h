// DeepSeek-V4 weights, resident on the backend's device, grouped the way the forward uses them.
#pragma once

#include <string>
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
  // Position bias per slot of a pooled window, [S, d]: HCA's m slots; CSA's 2m (series a's m
  // slots of the previous window, then series b's of this one: the checkpoint's [m, 2d] as rows).
  Tensor slot_bias;
  Tensor norm;  // [d]
};

struct IndexerWeights {
  CompressorWeights compressor;  // at index_head_dim
  Tensor wq_b;                   // [index_n_heads * index_head_dim, q_lora_rank]
  Tensor weights_proj;           // [index_n_heads, D]
};

struct AttentionWeights {
  // wq_a, wkv and the compressors' and indexer's projections of the layer input, stored as one
  // matrix (rows in attention_x_members order) so that a forward runs one GEMM for them; the
  // members are row-slice views of it.
  Tensor x_proj;
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
  Tensor x_proj;      // gate, shared_w1, shared_w3 as one matrix (views)
  Tensor gate;        // [E, D]
  Tensor bias;        // [E] (moe layers) or undefined
  Tensor tid2eid;     // [V, k] I32 (hash_moe layers) or undefined
  Tensor w1, w3;      // [E, I, D]
  Tensor w2;          // [E, D, I]
  Tensor s1, s3, s2;  // MXFP4-resident experts only: their scales (backend.h, ExpertWeights)
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

// The matrices that multiply an attention layer's input, in x_proj's row order: wq_a, wkv, then
// (CSA / HCA) the compressor's wkv_a, wgate_a, (CSA) wkv_b, wgate_b, then (CSA) the indexer's
// compressor wkv_a, wgate_a, wkv_b, wgate_b and weights_proj. W is AttentionWeights, const or not.
template <typename W>
auto attention_x_members(W& a) {
  std::vector<decltype(&a.wq_a)> m{&a.wq_a, &a.wkv};
  if (!a.has_compressor) return m;
  auto& c = a.compressor;
  m.insert(m.end(), {&c.wkv_a, &c.wgate_a});
  if (c.wkv_b.defined()) m.insert(m.end(), {&c.wkv_b, &c.wgate_b});
  if (!a.has_indexer) return m;
  auto& ic = a.indexer.compressor;
  m.insert(m.end(), {&ic.wkv_a, &ic.wgate_a, &ic.wkv_b, &ic.wgate_b, &a.indexer.weights_proj});
  return m;
}
// The MoE block's: gate, shared_w1, shared_w3.
template <typename W>
auto moe_x_members(W& m) {
  return std::vector<decltype(&m.gate)>{&m.gate, &m.shared_w1, &m.shared_w3};
}
// Rows of each member (the column widths of the fused product).
template <typename Members>
std::vector<int64_t> member_rows(const Members& members) {
  std::vector<int64_t> rows;
  for (const auto* t : members) rows.push_back(t->dim(0));
  return rows;
}

// Where load_weights takes the tensors from: a checkpoint (the WeightStore overload below) or a
// generator (the benchmarks' random weights, src/bench/random_weights.h). Names are canonical
// (io/weight_names.h); a source checks the shapes asked for and names the tensor at fault.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // A small parameter (norm, bias, sink, ape, mHC) as fp32 on the host.
  virtual Tensor param(const std::string& name, const std::vector<int64_t>& shape) const = 0;
  // An integer tensor (tid2eid) as int32 on the host.
  virtual Tensor ints(const std::string& name, const std::vector<int64_t>& shape) const = 0;
  // Matrix `name` [rows, cols] cut into `parts` equal row blocks, each on the backend's device
  // in backend.weight_dtype().
  virtual std::vector<Tensor> matrix_blocks(Backend& backend, const std::string& name, int64_t rows,
                                            int64_t cols, int parts) const = 0;
  // The routed experts' matrices layers.<layer>.ffn.experts.<e>.<leaf>.weight ([rows, cols]
  // each) stacked into [E, rows, cols] on the device, in backend.weight_dtype().
  virtual Tensor experts(Backend& backend, int layer, const std::string& leaf, int64_t E,
                         int64_t rows, int64_t cols) const = 0;
  // The same kept in MXFP4 (backend.h, ExpertWeights): FP4E2M1 data [E, rows, cols] and E8M0
  // scales [E, cols / 32, rows] on the device. Returns false, placing nothing, where the source
  // does not hold every expert's matrix in MXFP4 with scales in the range ExpertWeights allows
  // (the loader then calls experts()).
  virtual bool mxfp4_experts(Backend& backend, int layer, const std::string& leaf, int64_t E,
                             int64_t rows, int64_t cols, Tensor* data, Tensor* scales) const {
    (void)backend, (void)layer, (void)leaf, (void)E, (void)rows, (void)cols, (void)data,
        (void)scales;
    return false;
  }
};

// Takes every tensor the config needs from `source` and places it on the backend's device:
// matrices in the backend's weight dtype (routed experts kept in MXFP4 where the source holds
// them so, the backend takes them and DEEPINFER_MXFP4_EXPERTS is on), parameters in fp32,
// tid2eid in int32.
ModelWeights load_weights(const ModelConfig& config, const WeightSource& source, Backend& backend);
// The same from a checkpoint: reads every tensor (shapes checked), converts it to fp32 on the
// host (then to the weight dtype for matrices) and uploads it.
ModelWeights load_weights(const ModelConfig& config, const WeightStore& store, Backend& backend);

}  // namespace deepinfer::deepseek_v4
