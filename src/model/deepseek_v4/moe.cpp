// The MoE sub-block: router (hash or top-k), routed experts, one shared expert.
#include "model/deepseek_v4/blocks.h"

namespace deepinfer::deepseek_v4 {

namespace {
ScoringFunc scoring(RouterScoring s) {
  switch (s) {
    case RouterScoring::kSoftmax:
      return ScoringFunc::kSoftmax;
    case RouterScoring::kSigmoid:
      return ScoringFunc::kSigmoid;
    case RouterScoring::kSqrtSoftplus:
      return ScoringFunc::kSqrtSoftplus;
  }
  return ScoringFunc::kSqrtSoftplus;
}
}  // namespace

Tensor moe_block(Backend& b, const ModelConfig& c, const MoeWeights& w, const TensorView& x,
                 const StepInputs& in) {
  const int64_t S = in.num_tokens;
  const int k = c.num_experts_per_tok, I = c.moe_intermediate_size;
  const float limit = static_cast<float>(c.swiglu_limit);

  // Router logits and the shared expert's gate and up in one GEMM (weights.h: x_proj).
  const std::vector<Tensor> xp = project_fused(b, x, w.x_proj, member_rows(moe_x_members(w)));
  const Tensor& logits = xp[0];
  Tensor weights = b.empty({S, k});
  Tensor idx = b.empty({S, k}, DType::kI32);
  Tensor h = b.empty({S, I}, b.product_input_dtype(S));  // read by the shared w2 only
  Tensor out = b.empty({S, c.hidden_size});
  Tensor plan;
  {
    // The router's selection and the experts' token permutation (a few latency-bound blocks)
    // on the side branch, beside the shared expert's down projection (a weight stream).
    SideBranch side(b);
    b.route(logits, scoring(c.scoring_func), w.bias.view(), w.tid2eid.view(), in.ids,
            static_cast<float>(c.routed_scaling_factor), weights, idx);
    plan = b.moe_plan(idx, w.w1.dim(0));
    side.to_main();
    b.swiglu(xp[1], xp[2], limit, h);
    b.matmul(h, w.shared_w2, out);
  }  // joined: the routed experts read the selection and add into the shared expert's out
  b.moe_experts(x, idx, weights, ExpertWeights{w.w1, w.w3, w.w2, w.s1, w.s3, w.s2}, limit, plan,
                out);
  return out;
}

}  // namespace deepinfer::deepseek_v4
