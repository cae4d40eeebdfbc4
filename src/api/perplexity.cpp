#include "api/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"

namespace deepinfer {

double PerplexityResult::ppl() const {
  return std::exp(mean_nll());
}

PerplexityResult perplexity(deepseek_v4::Model& model, std::span<const int32_t> ids, int32_t bos,
                            int64_t ctx, int chunks_per_batch,
                            const std::function<void(int64_t, int64_t)>& progress) {
  DI_CHECK(ctx >= 2, ErrorCode::kInvalidArgument, "ctx {} must be at least 2", ctx);
  DI_CHECK(!ids.empty(), ErrorCode::kInvalidArgument, "the text has no tokens");
  const int64_t V = model.config().vocab_size;
  const int64_t per = ctx - 1;
  const int64_t total = (static_cast<int64_t>(ids.size()) + per - 1) / per;
  PerplexityResult r;
  for (int64_t c0 = 0; c0 < total; c0 += chunks_per_batch) {
    const int64_t c1 = std::min<int64_t>(total, c0 + chunks_per_batch);
    std::vector<std::vector<int32_t>> seqs;
    std::vector<deepseek_v4::SequenceState> states;
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t b = c * per, e = std::min<int64_t>(b + per, ids.size());
      std::vector<int32_t> s{bos};
      s.insert(s.end(), ids.begin() + b, ids.begin() + e);
      seqs.push_back(std::move(s));
      states.push_back(model.new_state());
    }
    std::vector<deepseek_v4::Model::BatchItem> items;
    for (size_t i = 0; i < seqs.size(); ++i)
      items.push_back({seqs[i], &states[i], deepseek_v4::Model::BatchItem::Logits::kAll});
    Tensor logits = model.forward_batch(items);
    int64_t row = 0;
    for (const auto& s : seqs) {
      // Row t predicts token t + 1; the last row predicts nothing in this chunk.
      for (size_t t = 0; t + 1 < s.size(); ++t) {
        const float* l = logits.data_as<float>() + (row + t) * V;
        const float mx = *std::max_element(l, l + V);
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(double(l[v]) - mx);
        r.nll_sum += std::log(sum) + mx - l[s[t + 1]];
        r.tokens += 1;
      }
      row += static_cast<int64_t>(s.size());
    }
    r.chunks += c1 - c0;
    if (progress) progress(c1, total);
  }
  return r;
}

}  // namespace deepinfer
