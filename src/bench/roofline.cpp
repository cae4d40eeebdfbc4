#include "bench/roofline.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace deepinfer::bench {

double StepCost::weight_bytes() const {
  return embed_bytes + head_bytes + hc_bytes + norm_bytes + attention_bytes + compressor_bytes +
         indexer_bytes + router_bytes + shared_expert_bytes + routed_expert_bytes;
}

double StepCost::flops() const {
  return dense_flops + attention_flops + indexer_flops + shared_expert_flops + routed_expert_flops +
         hc_flops + head_flops;
}

double expected_distinct_experts(int num_experts, int top_k, int64_t tokens) {
  if (tokens <= 0 || num_experts <= 0) return 0;
  const double E = num_experts;
  return E * (1.0 - std::pow(1.0 - static_cast<double>(top_k) / E, static_cast<double>(tokens)));
}

namespace {

// Parameters of one layer's attention projections (the five matrices).
double attention_matrix_params(const ModelConfig& c) {
  const double D = c.hidden_size, H = c.num_attention_heads, hd = c.head_dim, q = c.q_lora_rank;
  const double G = c.o_groups, ol = c.o_lora_rank;
  return q * D + H * hd * q + hd * D + G * ol * (H * hd / G) + D * G * ol;
}

// Matrix parameters of the indexer's projections and its compressor (CSA layers).
double indexer_matrix_params(const ModelConfig& c) {
  const double D = c.hidden_size, q = c.q_lora_rank, nh = c.index_n_heads, di = c.index_head_dim;
  return nh * di * q + nh * D + 2 * (2 * di) * D;
}

double compressor_width(const ModelConfig& c, int layer) {
  return c.layer_types[layer] == AttnType::kCSA ? 2.0 * c.head_dim : 1.0 * c.head_dim;
}

}  // namespace

StepCost step_cost(const ModelConfig& c, std::span<const SeqStep> seqs, const RooflineDtypes& dt) {
  StepCost r;
  int64_t T = 0;
  for (const SeqStep& s : seqs) T += s.tokens;
  r.tokens = T;
  const double R = static_cast<double>(seqs.size());  // one logits row per sequence
  const double Tf = static_cast<double>(T);
  const double D = c.hidden_size, V = c.vocab_size, hd = c.head_dim, H = c.num_attention_heads;
  const double q = c.q_lora_rank, I = c.moe_intermediate_size, E = c.n_routed_experts;
  const double k = c.num_experts_per_tok, hc = c.hc_mult, mix = (2 + hc) * hc;
  const double nh = c.index_n_heads, di = c.index_head_dim;
  const int64_t W = c.sliding_window, topk = c.index_topk;

  r.embed_bytes = Tf * D * dt.weight;
  r.head_bytes = V * D * dt.weight + D * dt.param + (hc * hc * D + hc + 1) * dt.param;
  r.head_flops = 2 * R * V * D;
  r.hc_flops = 2 * Tf * hc * hc * D + 2 * Tf * hc * D;  // hc head: projection, collapse

  double touched_sum = 0, state_read = 0, state_write = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const AttnType type = c.layer_types[l];
    const bool csa = type == AttnType::kCSA, compressed = type != AttnType::kSliding;
    // mHC, two sites: fn projection, collapse with `pre`, mixing with `post` and `comb`.
    r.hc_bytes += 2 * (mix * hc * D + mix + 3) * dt.param;
    r.hc_flops += 2 * (2 * Tf * mix * hc * D + 2 * Tf * hc * D + 2 * Tf * hc * (hc + 1) * D);
    r.norm_bytes += (2 * D + q + hd) * dt.param;

    const double attn = attention_matrix_params(c);
    r.attention_bytes += attn * dt.weight + H * dt.param;
    r.dense_flops += 2 * Tf * attn;
    const int m = compressed ? c.compress_rate(l) : 0;
    const double width = compressed ? compressor_width(c, l) : 0;
    if (compressed) {
      r.compressor_bytes += 2 * width * D * dt.weight + (m * width + hd) * dt.param;
      r.dense_flops += 2 * Tf * 2 * width * D;
    }
    if (csa) {
      const double idx = indexer_matrix_params(c);
      r.indexer_bytes += idx * dt.weight + (m * 2 * di + di) * dt.param;
      r.dense_flops += 2 * Tf * idx;
    }

    r.router_bytes += E * D * dt.weight;
    r.router_bytes += c.mlp_layer_types[l] == MlpType::kHashMoe ? Tf * k * 4 : E * dt.param;
    r.dense_flops += 2 * Tf * E * D;
    r.shared_expert_bytes += 3 * I * D * dt.weight;
    r.shared_expert_flops += 2 * Tf * 3 * I * D;
    const double touched = expected_distinct_experts(c.n_routed_experts, c.num_experts_per_tok, T);
    touched_sum += touched;
    r.routed_expert_bytes += touched * 3 * I * D * (dt.expert > 0 ? dt.expert : dt.weight);
    r.routed_expert_flops += 2 * Tf * k * 3 * I * D;

    for (const SeqStep& s : seqs) {
      double selected = 0;  // CSA: sum over queries of the entries the indexer keeps
      for (int64_t j = 0; j < s.tokens; ++j) {
        const int64_t p = s.context + j;
        const int64_t window = std::min<int64_t>(W, p + 1);
        const int64_t visible = compressed ? (p + 1) / m : 0;
        const int64_t kept = csa ? std::min<int64_t>(topk, visible) : visible;
        r.attention_flops += 4 * H * hd * static_cast<double>(window + kept);
        if (csa) {
          r.indexer_flops += 2 * nh * di * static_cast<double>(visible);
          selected += static_cast<double>(kept);
        }
      }
      const double S = static_cast<double>(s.tokens);
      state_read += static_cast<double>(std::min<int64_t>(W - 1, s.context)) * hd;
      state_write += S * hd;
      if (!compressed) continue;
      const double e_start = static_cast<double>(s.context / m);
      const double e_end = static_cast<double>((s.context + s.tokens) / m);
      // Compressor rows (K and gate) of the new tokens: written now, read when the window closes.
      const double rows = S * width * 2 + (csa ? S * 2 * di * 2 : 0);
      state_write += rows + (e_end - e_start) * (hd + (csa ? di : 0));
      state_read += rows;
      state_read += csa ? std::min(e_end, selected) * hd + e_end * di : e_end * hd;
    }
  }
  r.state_read_bytes = state_read * dt.state;
  r.state_write_bytes = state_write * dt.state;
  r.experts_touched = c.num_hidden_layers > 0 ? touched_sum / c.num_hidden_layers : 0;
  return r;
}

StepCost step_cost(const ModelConfig& config, int64_t num_seqs, int64_t tokens, int64_t context,
                   const RooflineDtypes& dtypes) {
  std::vector<SeqStep> seqs(static_cast<size_t>(num_seqs), SeqStep{context, tokens});
  return step_cost(config, seqs, dtypes);
}

double roofline_seconds(const StepCost& cost, const MachinePeaks& peaks) {
  const double mem = peaks.bytes_per_s > 0 ? cost.bytes() / peaks.bytes_per_s : 0;
  const double comp = peaks.flops_per_s > 0 ? cost.flops() / peaks.flops_per_s : 0;
  return std::max(mem, comp);
}

const char* roofline_bound(const StepCost& cost, const MachinePeaks& peaks) {
  const double mem = peaks.bytes_per_s > 0 ? cost.bytes() / peaks.bytes_per_s : 0;
  const double comp = peaks.flops_per_s > 0 ? cost.flops() / peaks.flops_per_s : 0;
  return mem >= comp ? "memory" : "compute";
}

ParamCounts param_counts(const ModelConfig& c) {
  const double D = c.hidden_size, V = c.vocab_size, hd = c.head_dim, H = c.num_attention_heads;
  const double q = c.q_lora_rank, I = c.moe_intermediate_size, E = c.n_routed_experts;
  const double k = c.num_experts_per_tok, hc = c.hc_mult, mix = (2 + hc) * hc;
  const double di = c.index_head_dim;
  ParamCounts p;
  p.total = 2 * V * D + D + hc * hc * D + hc + 1;
  double inactive = V * D;  // the embedding table: one row per token is a gather, not a GEMM
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    double layer = 2 * (mix * hc * D + mix + 3) + 2 * D + q + hd;
    layer += attention_matrix_params(c) + H;
    if (c.layer_types[l] != AttnType::kSliding) {
      const double width = compressor_width(c, l);
      layer += 2 * width * D + c.compress_rate(l) * width + hd;
    }
    if (c.layer_types[l] == AttnType::kCSA)
      layer += indexer_matrix_params(c) + c.compress_rate(l) * 2 * di + di;
    layer += E * D + (c.mlp_layer_types[l] == MlpType::kHashMoe ? V * k : E);
    layer += 3 * I * D * (E + 1);
    p.total += layer;
    inactive += 3 * I * D * (E - k);
    if (c.mlp_layer_types[l] == MlpType::kHashMoe) inactive += V * k;  // tid2eid: a lookup
  }
  p.active_per_token = p.total - inactive;
  return p;
}

}  // namespace deepinfer::bench
