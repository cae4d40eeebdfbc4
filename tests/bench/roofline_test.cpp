// Roofline arithmetic checked against numbers worked out by hand for a small config.
//
// Config: vocab V=100, hidden D=8, 3 layers [sliding, CSA, HCA], mlp [hash_moe, moe, moe],
// H=2 heads x hd=8, q_lora q=4, o_groups G=1 x o_lora 4, moe_intermediate I=6, E=4 experts top
// k=2, window W=4, CSA rate 2, HCA rate 4, indexer nh=2 x di=4 keeping topk=2, hc_mult 2
// (mix = (2+hc)*hc = 8). Bytes per element: weights 2, parameters 4, state 4.
#include <gtest/gtest.h>

#include "bench/roofline.h"
#include "io/model_config.h"
#include "io/weight_names.h"

namespace deepinfer::bench {
namespace {

ModelConfig small_config() {
  return parse_model_config(R"({
    "model_type": "deepseek_v4", "vocab_size": 100, "hidden_size": 8, "num_hidden_layers": 3,
    "num_attention_heads": 2, "head_dim": 8, "q_lora_rank": 4, "o_groups": 1, "o_lora_rank": 4,
    "moe_intermediate_size": 6, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "sliding_window": 4, "compress_rates": {"compressed_sparse_attention": 2,
                                            "heavily_compressed_attention": 4},
    "index_n_heads": 2, "index_head_dim": 4, "index_topk": 2, "hc_mult": 2,
    "partial_rotary_factor": 0.5, "max_position_embeddings": 64,
    "layer_types": ["sliding_attention", "compressed_sparse_attention",
                    "heavily_compressed_attention"],
    "mlp_layer_types": ["hash_moe", "moe", "moe"]})",
                            "roofline_test");
}

constexpr RooflineDtypes kDtypes{2, 4, 4};

TEST(Roofline, ExpectedDistinctExperts) {
  EXPECT_DOUBLE_EQ(expected_distinct_experts(4, 2, 0), 0.0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(4, 2, 1), 2.0);     // one token: exactly k
  EXPECT_DOUBLE_EQ(expected_distinct_experts(4, 2, 2), 3.0);     // 4 * (1 - 0.5^2)
  EXPECT_DOUBLE_EQ(expected_distinct_experts(4, 2, 6), 3.9375);  // 4 * (1 - 1/64)
  EXPECT_NEAR(expected_distinct_experts(256, 6, 1), 6.0, 1e-9);
  EXPECT_NEAR(expected_distinct_experts(256, 6, 100000), 256.0, 1e-6);
}

// Decode: 2 sequences, each with 5 tokens of state, 1 new token (position p = 5). T = 2, R = 2.
TEST(Roofline, DecodeStepByHand) {
  const StepCost c = step_cost(small_config(), 2, 1, 5, kDtypes);
  EXPECT_EQ(c.tokens, 2);
  // Weights.
  EXPECT_DOUBLE_EQ(c.embed_bytes, 32);  // T*D*2 = 2*8*2
  // V*D*2 = 1600; final norm D*4 = 32; hc head (hc*hc*D + hc + 1)*4 = (32+2+1)*4 = 140.
  EXPECT_DOUBLE_EQ(c.head_bytes, 1772);
  // Per layer 2 sites * (fn mix*hc*D = 128 + base 8 + scale 3) * 4 = 1112; x3 layers.
  EXPECT_DOUBLE_EQ(c.hc_bytes, 3336);
  // Per layer (attn_norm D + ffn_norm D + q_norm q + kv_norm hd) * 4 = (8+8+4+8)*4 = 112; x3.
  EXPECT_DOUBLE_EQ(c.norm_bytes, 336);
  // Matrices: wq_a q*D = 32, wq_b H*hd*q = 64, wkv hd*D = 64, wo_a G*4*(H*hd/G) = 64,
  // wo_b D*G*4 = 32 -> 256 params * 2 = 512; sinks H*4 = 8 -> 520 per layer; x3.
  EXPECT_DOUBLE_EQ(c.attention_bytes, 1560);
  // CSA (width 2hd = 16): wkv + wgate 2*16*8*2 = 512, ape 2*16 + norm 8 = 40 params * 4 = 160
  // -> 672. HCA (width 8): 2*8*8*2 = 256, ape 4*8 + norm 8 = 40 * 4 = 160 -> 416. Sum 1088.
  EXPECT_DOUBLE_EQ(c.compressor_bytes, 1088);
  // CSA indexer: wq_b nh*di*q = 32, weights_proj nh*D = 16, compressor wkv + wgate 2*(2di)*D =
  // 128 -> 176 * 2 = 352; ape 2*8 + norm 4 = 20 * 4 = 80. Sum 432.
  EXPECT_DOUBLE_EQ(c.indexer_bytes, 432);
  // gate E*D*2 = 64 per layer (192); layer 0 hash: tid2eid rows T*k*4 = 16; layers 1, 2 bias
  // E*4 = 16 each (32). Sum 240.
  EXPECT_DOUBLE_EQ(c.router_bytes, 240);
  EXPECT_DOUBLE_EQ(c.shared_expert_bytes, 864);  // 3*I*D*2 = 288 per layer; x3
  // Expected experts touched by 2 tokens: 4*(1 - (1 - 2/4)^2) = 3; 3 * 288 per layer; x3.
  EXPECT_DOUBLE_EQ(c.experts_touched, 3);
  EXPECT_DOUBLE_EQ(c.routed_expert_bytes, 2592);
  // 32 + 1772 + 3336 + 336 + 1560 + 1088 + 432 + 240 + 864 + 2592.
  EXPECT_DOUBLE_EQ(c.weight_bytes(), 12252);

  // State per sequence (elements), c = 5, S = 1:
  //  sliding: read ring min(W-1, 5)*hd = 24; write 1*hd = 8.
  //  CSA (rate 2): ring 24 / 8. Entries 5/2 = 2 -> 6/2 = 3 (one new). Compressor rows of the
  //   new token: K and gate at width 16 (32) + indexer K and gate at 2di = 8 (16) = 48, read
  //   and written. New entry: hd + di = 12 written. Indexer keeps min(topk 2, visible 6/2 = 3)
  //   = 2 entries: 2*hd = 16 read; indexer keys scored 3*di = 12 read.
  //   read 24 + 48 + 16 + 12 = 100, write 8 + 48 + 12 = 68.
  //  HCA (rate 4): ring 24 / 8; entries 5/4 = 1 -> 6/4 = 1 (none new); rows 1*8*2 = 16 read and
  //   written; all 1 entries read: 8. read 24 + 16 + 8 = 48, write 8 + 16 = 24.
  //  Per sequence: read 24 + 100 + 48 = 172, write 8 + 68 + 24 = 100. Two sequences, 4 bytes.
  EXPECT_DOUBLE_EQ(c.state_read_bytes, 2 * 172 * 4);
  EXPECT_DOUBLE_EQ(c.state_write_bytes, 2 * 100 * 4);
  EXPECT_DOUBLE_EQ(c.bytes(), 12252 + 1376 + 800);

  // FLOPs.
  EXPECT_DOUBLE_EQ(c.head_flops, 3200);  // 2*R*V*D = 2*2*100*8
  // hc head: 2*T*hc*hc*D = 128, collapse 2*T*hc*D = 64 -> 192. Per layer, 2 sites of
  // (2*T*mix*hc*D = 512 + 2*T*hc*D = 64 + 2*T*hc*(hc+1)*D = 192) = 1536; x3 = 4608.
  EXPECT_DOUBLE_EQ(c.hc_flops, 4800);
  // Attention projections 2*T*256 = 1024 per layer (3072); CSA compressor 2*T*2*16*8 = 1024;
  // HCA compressor 2*T*2*8*8 = 512; indexer projections 2*T*176 = 704; router 2*T*E*D = 128
  // per layer (384). Sum 5696.
  EXPECT_DOUBLE_EQ(c.dense_flops, 5696);
  EXPECT_DOUBLE_EQ(c.shared_expert_flops, 1728);  // 2*T*3*I*D = 576 per layer
  EXPECT_DOUBLE_EQ(c.routed_expert_flops, 3456);  // 2*T*k*3*I*D = 1152 per layer
  // Query at p = 5: window min(4, 6) = 4 keys. Sliding 4 keys, CSA 4 + 2 kept = 6, HCA 4 +
  // 6/4 = 1 entry = 5: 15 keys * 4*H*hd (64) = 960 per sequence; x2.
  EXPECT_DOUBLE_EQ(c.attention_flops, 1920);
  EXPECT_DOUBLE_EQ(c.indexer_flops, 96);  // 2*nh*di*visible = 16*3 per sequence; x2
  EXPECT_DOUBLE_EQ(c.flops(), 20896);
}

// Prefill: one sequence, no state, 6 tokens (positions 0..5). T = 6, R = 1.
TEST(Roofline, PrefillStepByHand) {
  const SeqStep seq{0, 6};
  const StepCost c = step_cost(small_config(), std::span<const SeqStep>(&seq, 1), kDtypes);
  EXPECT_DOUBLE_EQ(c.embed_bytes, 96);  // 6*8*2
  // 192 gate bytes + tid2eid rows 6*2*4 = 48 + biases 32.
  EXPECT_DOUBLE_EQ(c.router_bytes, 272);
  // Experts touched by 6 tokens: 4*(1 - 0.5^6) = 3.9375; * 288 bytes * 3 layers.
  EXPECT_DOUBLE_EQ(c.experts_touched, 3.9375);
  EXPECT_DOUBLE_EQ(c.routed_expert_bytes, 3402);
  EXPECT_DOUBLE_EQ(c.head_flops, 1600);  // one logits row: 2*1*100*8
  // Windows min(4, p+1) over p = 0..5: 1+2+3+4+4+4 = 18 keys.
  //  sliding: 18 keys -> 18*64 = 1152.
  //  CSA: visible (p+1)/2 = 0,1,1,2,2,3, kept min(2, .) = 0,1,1,2,2,2 = 8 -> 26*64 = 1664.
  //  HCA: visible (p+1)/4 = 0,0,0,1,1,1 = 3 -> 21*64 = 1344.
  EXPECT_DOUBLE_EQ(c.attention_flops, 1152 + 1664 + 1344);
  EXPECT_DOUBLE_EQ(c.indexer_flops, 16 * 9);  // 2*nh*di * (0+1+1+2+2+3)
  // State (elements): sliding writes 6*8 = 48, reads no ring.
  //  CSA: write 48; entries 0 -> 3; rows 6*16*2 + 6*8*2 = 288 read and written; 3 entries *
  //   (hd + di) = 36 written; kept entries min(3, 8)*hd = 24 and keys 3*di = 12 read.
  //   read 288 + 24 + 12 = 324, write 48 + 288 + 36 = 372.
  //  HCA: write 48; entries 0 -> 1; rows 6*8*2 = 96 read and written; 1 entry: 8 written, 8
  //   read. read 96 + 8 = 104, write 48 + 96 + 8 = 152.
  EXPECT_DOUBLE_EQ(c.state_read_bytes, (324 + 104) * 4);
  EXPECT_DOUBLE_EQ(c.state_write_bytes, (48 + 372 + 152) * 4);
}

TEST(Roofline, RooflineTimeAndBound) {
  StepCost c;
  c.embed_bytes = 1000;                        // 1000 bytes
  c.dense_flops = 4000;                        // 4000 FLOPs
  const MachinePeaks memory_bound{100, 1000};  // 10 s vs 4 s
  EXPECT_DOUBLE_EQ(roofline_seconds(c, memory_bound), 10);
  EXPECT_STREQ(roofline_bound(c, memory_bound), "memory");
  const MachinePeaks compute_bound{1000, 100};  // 1 s vs 40 s
  EXPECT_DOUBLE_EQ(roofline_seconds(c, compute_bound), 40);
  EXPECT_STREQ(roofline_bound(c, compute_bound), "compute");
}

// Parameter counts agree with the checkpoint's tensor list.
TEST(Roofline, ParamCountsMatchExpectedWeights) {
  const ModelConfig cfg = small_config();
  double numel = 0;
  for (const WeightSpec& w : expected_weights(cfg)) {
    double n = 1;
    for (int64_t d : w.shape) n *= static_cast<double>(d);
    numel += n;
  }
  const ParamCounts p = param_counts(cfg);
  EXPECT_DOUBLE_EQ(p.total, numel);
  // Active: all but the embedding table, tid2eid (a lookup) and the E - k unused experts.
  EXPECT_DOUBLE_EQ(p.active_per_token, numel - 100 * 8 - 100 * 2 - 3 * (4 - 2) * 3 * 6 * 8);
}

}  // namespace
}  // namespace deepinfer::bench
