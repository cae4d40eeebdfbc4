#include "sampling/cuda/row_staging.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "sampling/cuda/select_common.h"

namespace deepinfer::sampling {

namespace {

// The messages of logits_processors.cpp's id check.
void check_id(const char* what, int32_t id, int64_t vocab) {
  DI_CHECK(id >= 0 && id < vocab, ErrorCode::kInvalidArgument,
           "{} token id {} is outside the vocabulary [0, {})", what, id, vocab);
}

}  // namespace

void RowStager::clear(int64_t V) {
  vocab_ = V;
  params_.clear();
  edits_.clear();
  if (static_cast<int64_t>(edit_of_.size()) < V) edit_of_.assign(V, -1);  // kept all -1
}

void RowStager::add(int64_t row, const SampleRow& r) {
  const int64_t V = vocab_;
  const SamplingParams& p = *r.params;
  const TokenContext& ctx = r.context;
  const auto slot = static_cast<int32_t>(params_.size());
  const size_t first_edit = edits_.size();
  // Leaves edit_of_ all -1 again, and drops the row's edits if an id check throws.
  struct Cleanup {
    RowStager& s;
    size_t first;
    bool done = false;
    ~Cleanup() {
      for (size_t k = first; k < s.edits_.size(); ++k) s.edit_of_[s.edits_[k].token] = -1;
      if (!done) s.edits_.resize(first);
    }
  } cleanup{*this, first_edit};
  auto edit = [&](int32_t id) -> cuda::LogitEdit& {
    if (edit_of_[id] < 0) {
      edit_of_[id] = static_cast<int32_t>(edits_.size());
      edits_.push_back({slot, id, 0, 0u, 0.0f});
    }
    return edits_[edit_of_[id]];
  };

  // logits_processors.cpp's steps and id checks, in its order.
  if (ctx.output_token_ids.size() < static_cast<size_t>(p.min_tokens)) {
    if (!p.ignore_eos) {
      for (int32_t id : ctx.eos_token_ids) {
        check_id("eos", id, V);
        edit(id).flags |= cuda::kEditMask;
      }
    }
    for (int32_t id : p.stop_token_ids) {
      check_id("stop_token_ids", id, V);
      edit(id).flags |= cuda::kEditMask;
    }
  }
  for (const auto& [id, bias] : p.logit_bias) {
    check_id("logit_bias", id, V);
    cuda::LogitEdit& e = edit(id);
    e.flags |= cuda::kEditBias;
    e.bias = bias;
  }
  if (p.repetition_penalty != 1.0f) {
    for (int32_t id : ctx.prompt_token_ids) {
      check_id("prompt", id, V);
      edit(id).flags |= cuda::kEditRepetition;
    }
    for (int32_t id : ctx.output_token_ids) {
      check_id("output", id, V);
      edit(id).flags |= cuda::kEditRepetition;
    }
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    for (int32_t id : ctx.output_token_ids) check_id("output", id, V);
    for (int32_t id : ctx.output_token_ids) {
      cuda::LogitEdit& e = edit(id);
      e.flags |= cuda::kEditFrequency;
      ++e.count;
    }
  }

  cuda::RowParams rp{};
  rp.row = row;
  rp.seed = r.seq_seed;
  rp.position = r.position;
  rp.temperature = p.temperature;
  rp.min_p = p.min_p;
  rp.repetition_penalty = p.repetition_penalty;
  rp.frequency_penalty = p.frequency_penalty;
  rp.presence_penalty = p.presence_penalty;
  rp.top_k = p.top_k;
  // sampler.cpp's fraction_of: top_p to 24 fractional bits.
  rp.top_p_q = p.top_p < 1.0f
                   ? static_cast<uint32_t>(std::max(0L, std::lround(p.top_p * 16777216.0f)))
                   : cuda::kTopPOff;
  rp.greedy = p.greedy() ? 1 : 0;
  params_.push_back(rp);
  cleanup.done = true;
}

void apply_edits_host(float* logits, int64_t V, std::span<const cuda::RowParams> params,
                      std::span<const cuda::LogitEdit> edits) {
  for (const cuda::LogitEdit& e : edits) {
    const cuda::RowParams& rp = params[e.slot];
    float& x = logits[rp.row * V + e.token];
    x = cuda::edit_logit(x, e, rp);
  }
}

}  // namespace deepinfer::sampling
