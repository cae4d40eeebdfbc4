// Perplexity of a text under a model, with the protocol of models/*/reference.json: the text is
// tokenized as one string without special tokens, cut into consecutive chunks of ctx-1 tokens,
// and each chunk is scored as its own sequence [BOS] + chunk (no state carried over), every
// chunk token predicted once.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/deepseek_v4/model.h"

namespace deepinfer {

struct PerplexityResult {
  int64_t tokens = 0;
  int64_t chunks = 0;
  double nll_sum = 0;
  double mean_nll() const { return tokens ? nll_sum / tokens : 0.0; }
  double ppl() const;
};

// `ids`: the text's token ids (no BOS). `progress(done, total)` is called after each batch.
PerplexityResult perplexity(deepseek_v4::Model& model, std::span<const int32_t> ids, int32_t bos,
                            int64_t ctx, int chunks_per_batch = 4,
                            const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace deepinfer
