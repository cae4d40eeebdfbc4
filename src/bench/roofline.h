// Roofline arithmetic for one DeepSeek-V4 forward step, from the config alone: the bytes a step
// must move (weights read, per-sequence state read and written) and the FLOPs it must do, so a
// measured step time can be set against max(bytes / peak bandwidth, FLOPs / peak compute).
//
// What is counted (T = new tokens of the step over all sequences, p = a token's absolute
// position, c = a sequence's tokens of state before the step, S = its new tokens):
//  * Weights, each read once per step: embedding rows of the T tokens; every layer's mHC, norm,
//    attention, compressor, indexer, router and shared-expert parameters; the routed experts
//    touched, E * (1 - (1 - k/E)^T) in expectation for T tokens routed uniformly (hash layers
//    too: their tid2eid rows, T * k int32, count as router bytes); the final norm, hc head and
//    LM head.
//  * State read per sequence and layer: the sliding-window ring (min(W - 1, c) K=V rows); HCA:
//    every compressed entry visible at the end of the step; CSA: the entries the indexer keeps
//    (sum over queries of min(topk, visible), at most all entries) and every indexer key scored;
//    the compressor rows (K and gate) of the S new tokens, each read once when its window closes.
//  * State written: the S new K=V rows, the compressor rows of the S tokens, the new compressed
//    entries (CSA: also their indexer keys).
//  * FLOPs: 2 * M * N * K per GEMM (projections, compressor / indexer projections, router,
//    shared expert, k routed experts per token, LM head on one row per sequence, mHC mixing),
//    attention 4 * H * hd per (query, key) pair (QK and PV), indexer scoring 2 * nh * di per
//    (query, visible entry). Elementwise work (norms, RoPE, softmax, SwiGLU, Sinkhorn) is not
//    counted. Activations are not counted as memory traffic.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "io/model_config.h"

namespace deepinfer::bench {

// Bytes per element of what the step moves, on the backend that runs it.
struct RooflineDtypes {
  double weight = 4;  // large matrices (embedding, head, projections, experts): 4 fp32, 2 bf16
  double param = 4;   // small parameters (norms, mHC, sinks, ape, biases): fp32 everywhere
  double state = 4;   // per-sequence state (K=V rows, entries, compressor rows)
  double expert = 0;  // the routed experts' matrices: 0 for `weight`, 4.25 / 8 kept in MXFP4
};

// One sequence's part of a step.
struct SeqStep {
  int64_t context = 0;  // tokens already in its state
  int64_t tokens = 0;   // new tokens fed this step
};

struct StepCost {
  // Weights read.
  double embed_bytes = 0;       // gathered embedding rows
  double head_bytes = 0;        // LM head + final norm + hc head
  double hc_bytes = 0;          // per-layer mHC parameters
  double norm_bytes = 0;        // per-layer norm weights (attn, ffn, q, kv)
  double attention_bytes = 0;   // wq_a, wq_b, wkv, wo_a, wo_b, sinks
  double compressor_bytes = 0;  // CSA / HCA compressors (wkv, wgate, ape, norm)
  double indexer_bytes = 0;     // wq_b, weights_proj and the indexer's compressor
  double router_bytes = 0;      // gate (+ bias or gathered tid2eid rows)
  double shared_expert_bytes = 0;
  double routed_expert_bytes = 0;
  double experts_touched = 0;  // expected distinct routed experts per layer, averaged over layers
  // State.
  double state_read_bytes = 0;
  double state_write_bytes = 0;
  // FLOPs.
  double dense_flops = 0;      // attention projections, compressors, indexer projections, router
  double attention_flops = 0;  // QK and PV
  double indexer_flops = 0;    // indexer scoring
  double shared_expert_flops = 0;
  double routed_expert_flops = 0;
  double hc_flops = 0;  // mHC projections and mixing, per layer and the hc head
  double head_flops = 0;
  int64_t tokens = 0;  // T

  double weight_bytes() const;
  double state_bytes() const { return state_read_bytes + state_write_bytes; }
  double bytes() const { return weight_bytes() + state_bytes(); }
  double flops() const;
};

// The expected number of distinct experts that T tokens touch when each picks k of E uniformly:
// E * (1 - (1 - k/E)^T).
double expected_distinct_experts(int num_experts, int top_k, int64_t tokens);

// The cost of one forward step over `seqs` (logits for the last token of each).
StepCost step_cost(const ModelConfig& config, std::span<const SeqStep> seqs,
                   const RooflineDtypes& dtypes);
// Uniform batch: num_seqs sequences, each feeding `tokens` new tokens after `context`.
StepCost step_cost(const ModelConfig& config, int64_t num_seqs, int64_t tokens, int64_t context,
                   const RooflineDtypes& dtypes);

struct MachinePeaks {
  double bytes_per_s = 0;
  double flops_per_s = 0;
};

// max(bytes / bandwidth, flops / compute), and which side binds.
double roofline_seconds(const StepCost& cost, const MachinePeaks& peaks);
const char* roofline_bound(const StepCost& cost, const MachinePeaks& peaks);  // "memory"/"compute"

// Parameter counts of the config (whole model, and what one token activates), for summaries.
struct ParamCounts {
  double total = 0;
  double active_per_token = 0;  // dense + shared + top-k routed experts, embedding row excluded
};
ParamCounts param_counts(const ModelConfig& config);

}  // namespace deepinfer::bench
