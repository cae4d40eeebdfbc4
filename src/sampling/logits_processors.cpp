#include "sampling/logits_processors.h"

#include <limits>
#include <vector>

#include "core/status.h"

namespace deepinfer::sampling {

namespace {

void check_id(const char* what, int32_t id, size_t vocab) {
  DI_CHECK(id >= 0 && static_cast<size_t>(id) < vocab, ErrorCode::kInvalidArgument,
           "{} token id {} is outside the vocabulary [0, {})", what, id, vocab);
}

// Per-thread scratch of vocab size, left all-zero between calls so each call only touches the
// entries of its own history (O(history), not O(vocab)).
template <typename T>
std::vector<T>& zeroed_scratch(size_t vocab) {
  thread_local std::vector<T> buf;
  if (buf.size() < vocab) buf.assign(vocab, T{0});
  return buf;
}

}  // namespace

void apply_min_tokens(std::span<float> logits, const SamplingParams& params,
                      const TokenContext& ctx) {
  if (ctx.output_token_ids.size() >= static_cast<size_t>(params.min_tokens)) return;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (!params.ignore_eos) {
    for (int32_t id : ctx.eos_token_ids) {
      check_id("eos", id, logits.size());
      logits[id] = kNegInf;
    }
  }
  for (int32_t id : params.stop_token_ids) {
    check_id("stop_token_ids", id, logits.size());
    logits[id] = kNegInf;
  }
}

void apply_logit_bias(std::span<float> logits, const SamplingParams& params) {
  for (const auto& [id, bias] : params.logit_bias) {
    check_id("logit_bias", id, logits.size());
    logits[id] += bias;
  }
}

void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     const TokenContext& ctx) {
  const size_t vocab = logits.size();
  if (params.repetition_penalty != 1.0f) {
    const float r = params.repetition_penalty;
    auto& seen = zeroed_scratch<uint8_t>(vocab);
    auto penalize = [&](std::span<const int32_t> ids, const char* what) {
      for (int32_t id : ids) {
        check_id(what, id, vocab);
        if (seen[id]) continue;
        seen[id] = 1;
        float& x = logits[id];
        x = x > 0.0f ? x / r : x * r;
      }
    };
    // Reset the scratch even when a bad id throws halfway.
    struct Reset {
      std::vector<uint8_t>& seen;
      const TokenContext& ctx;
      size_t vocab;
      ~Reset() {
        for (auto ids : {ctx.prompt_token_ids, ctx.output_token_ids})
          for (int32_t id : ids)
            if (id >= 0 && static_cast<size_t>(id) < vocab) seen[id] = 0;
      }
    } reset{seen, ctx, vocab};
    penalize(ctx.prompt_token_ids, "prompt");
    penalize(ctx.output_token_ids, "output");
  }

  const float f = params.frequency_penalty, p = params.presence_penalty;
  if (f == 0.0f && p == 0.0f) return;
  for (int32_t id : ctx.output_token_ids) check_id("output", id, vocab);
  auto& count = zeroed_scratch<int32_t>(vocab);
  for (int32_t id : ctx.output_token_ids) ++count[id];
  for (int32_t id : ctx.output_token_ids) {
    if (count[id] == 0) continue;  // already applied for this id
    // Two fp32 subtractions, as vLLM does them.
    logits[id] -= f * static_cast<float>(count[id]);
    logits[id] -= p;
    count[id] = 0;
  }
}

void apply_logits_processors(std::span<float> logits, const SamplingParams& params,
                             const TokenContext& ctx) {
  apply_min_tokens(logits, params, ctx);
  apply_logit_bias(logits, params);
  apply_penalties(logits, params, ctx);
}

}  // namespace deepinfer::sampling
