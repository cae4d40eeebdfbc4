// Token sampling from fp32 logits rows, deterministic per (seq_seed, position).
//
// sample_row, in order:
//   1. logprobs (LogprobsMode::kRaw, vLLM's default "raw_logprobs") are taken from the row as
//      given: log_softmax of the model's logits, before processors and temperature;
//   2. logits processors (logits_processors.h) edit the row in place;
//   3. greedy (temperature < kGreedyTemperature): argmax, ties -> lowest id. Otherwise, in
//      fp32:  z = logit / temperature,  p = exp(z - max z)  (the top token has p = 1; exp is
//      sampling_exp.h's, bit-identical on the host and on CUDA devices), and
//        min_p:  drop p < min_p                             (relative to the top token, as vLLM)
//        top_k:  keep the first k in the order (p desc, id asc)
//        top_p:  keep the shortest prefix of that order whose weight >= ceil(top_p * kept weight)
//                (top_p taken to 24 fractional bits, the product exact in 128-bit integers)
//      This is vLLM's order (temperature, min_p, top_k, top_p), each step renormalising.
//   4. u = bits24 * 2^-24 from rng.h at (seq_seed, position, kSampleStream); the token is the
//      first, in the order (p desc, id asc), whose running weight exceeds floor(u * total weight).
// Weights are integers, token_weight(p) = floor(p * 2^40), so every sum is exact and independent
// of summation order: a radix selection (no sort), a parallel reduction on a device or a full
// sort all pick the same token. (p desc, id asc) is a strict total order, so equal logits always
// resolve to the same token too. Tokens with p < 2^-40 (relative to the top token) have weight 0
// and are never sampled. A row where every logit is -inf / NaN after processing throws
// kInvalidArgument.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "deepinfer/sampling_params.h"
#include "sampling/logits_processors.h"

namespace deepinfer {
class ThreadPool;
}

namespace deepinfer::sampling {

inline constexpr int kWeightBits = 40;

// A kept token's integer sampling weight; p in (0, 1] so p * 2^40 is exact before flooring.
inline uint64_t token_weight(float p) {
  return static_cast<uint64_t>(p * static_cast<float>(uint64_t{1} << kWeightBits));
}

enum class LogprobsMode {
  kRaw,        // log_softmax of the raw model logits (vLLM default)
  kProcessed,  // log of the distribution actually sampled from: after processors, temperature
               // and truncation (-inf outside the kept set); for greedy, log_softmax of the
               // processed logits
};

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
  // Sampled token: number of tokens whose logprob is >= its own (vLLM's rank, 1 = best).
  // Top list: 1-based position in the list.
  int64_t rank = 0;
};

struct Logprobs {
  TokenLogprob sampled;
  // The top `logprobs` tokens (whole vocabulary for -1) in the order (logprob desc, id asc).
  // May or may not contain the sampled token; callers merge, as vLLM does.
  std::vector<TokenLogprob> top;
};

struct SampleResult {
  int32_t token = -1;
  std::optional<Logprobs> logprobs;  // set iff params.logprobs is set
};

// Processes `logits` in place (see above) and samples one token.
// `position`: absolute index of the token being sampled (prompt length + outputs so far).
SampleResult sample_row(std::span<float> logits, const SamplingParams& params, uint64_t seq_seed,
                        int64_t position, const TokenContext& ctx,
                        LogprobsMode mode = LogprobsMode::kRaw);

// Argmax over non-NaN logits, ties -> lowest id.
int32_t greedy_token(std::span<const float> logits);

// Steps 3-4 on already processed logits (the row is not modified): greedy or random.
int32_t sample_processed(std::span<const float> logits, const SamplingParams& params,
                         uint64_t seq_seed, int64_t position);

// The set step 3 keeps, in sampling order, with each token's unnormalised p (greedy: the argmax
// alone, with p = 1).
struct KeptToken {
  int32_t token;
  float p;
};
std::vector<KeptToken> kept_support(std::span<const float> logits, const SamplingParams& params);

// One row of a batch: logits row i of sample_batch pairs with rows[i].
struct SampleRow {
  const SamplingParams* params = nullptr;
  uint64_t seq_seed = 0;
  int64_t position = 0;
  TokenContext context;
};

// sample_row over rows of `vocab_size` logits each, rows independent (results do not depend on
// the batch or the pool). With a pool, rows run in parallel.
std::vector<SampleResult> sample_batch(std::span<float> logits, int64_t vocab_size,
                                       std::span<const SampleRow> rows,
                                       LogprobsMode mode = LogprobsMode::kRaw,
                                       ThreadPool* pool = nullptr);

}  // namespace deepinfer::sampling
