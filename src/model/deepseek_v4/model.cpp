#include "model/deepseek_v4/model.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <utility>

#include "core/cpu_timer.h"
#include "io/weights.h"
#include "model/deepseek_v4/blocks.h"

namespace deepinfer::deepseek_v4 {

Model::Model(ModelConfig config, ModelWeights weights, Backend& backend)
    : config_(std::move(config)), weights_(std::move(weights)), backend_(backend) {}

std::unique_ptr<Model> Model::load(const std::string& dir, Backend& backend) {
  DI_CHECK(std::filesystem::is_directory(dir), ErrorCode::kNotFound,
           "model directory '{}' does not exist", dir);
  ModelConfig config = load_model_config((std::filesystem::path(dir) / "config.json").string());
  auto store = WeightStore::open(dir);
  ModelWeights weights = load_weights(config, *store, backend);
  return std::make_unique<Model>(std::move(config), std::move(weights), backend);
}

namespace {

// The residual streams between mHC sites: X, and the last site's expansion (hc_post of X with
// its block's output y) when it is still to run: the next site runs it with its own collapse
// (hc_post_pre_norm), the head on its own (expanded()).
struct Streams {
  Tensor X, y, post, comb;  // y, post, comb: empty once expanded

  Tensor expanded(Backend& b) const {
    if (!y.defined()) return X;
    Tensor next = b.empty({X.dim(0), X.dim(1), X.dim(2)});
    b.hc_post(X, y, post, comb, next);
    return next;
  }
  // The same streams at rows `rows` (I32 [R] on the device) only, gathered before the expansion:
  // every step of it and of the head works row by row.
  Streams gathered(Backend& b, const Tensor& rows) const {
    const int64_t R = rows.dim(0), n = X.dim(1), D = X.dim(2);
    auto gather = [&](const Tensor& t, int64_t width) {
      Tensor out = b.empty({R, width});
      b.embedding(rows, t.view().reshape({t.dim(0), width}), out);  // a row gather
      return out;
    };
    Streams g;
    const Tensor x = gather(X, n * D);
    g.X = x.with_view(x.view().reshape({R, n, D}));
    if (!y.defined()) return g;
    g.y = gather(y, D);
    g.post = gather(post, n);
    Tensor c = gather(comb, n * n);
    g.comb = c.with_view(c.view().reshape({R, n, n}));
    return g;
  }
};

// One mHC site around a sub-block: collapse the streams (expanding the last site's first), run
// the block on the normed input; its expansion with the post weights and the (transposed)
// combination matrix is left to the next site. `in` is taken over and released once expanded,
// so that the block runs with one copy of the streams alive, as before the deferral.
template <typename Block>
Streams hc_site(Backend& b, const ModelConfig& c, const HcWeights& hc, const Tensor& norm_w,
                Streams in, Block&& block) {
  const int64_t S = in.X.dim(0);
  const int n = c.hc_mult, D = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps), hc_eps = static_cast<float>(c.hc_eps);
  // The block's input is read only by products (its projections, the routed experts).
  Tensor normed = b.empty({S, D}, b.product_input_dtype(S));
  Tensor post = b.empty({S, n}), comb = b.empty({S, n, n});
  Tensor X = in.X;
  if (in.y.defined()) {
    X = b.empty({S, n, D});
    b.hc_post_pre_norm(in.X, in.y, in.post, in.comb, X, hc.fn, hc.base, hc.scale,
                       c.hc_sinkhorn_iters, hc_eps, eps, norm_w, normed, post, comb);
    in = Streams{};
  } else {
    b.hc_pre_norm(X, hc.fn, hc.base, hc.scale, c.hc_sinkhorn_iters, hc_eps, eps, norm_w, normed,
                  post, comb);
  }
  Tensor y = block(normed.view());
  return {X, y, post, comb};
}

}  // namespace

Tensor Model::forward(std::span<const int32_t> ids, SequenceState& state) {
  const BatchItem item{ids, &state, BatchItem::Logits::kAll};
  return forward_batch(std::span<const BatchItem>(&item, 1));
}

Tensor Model::run(std::span<const BatchItem> items, bool logits_to_host) {
  Backend& b = backend_;
  const ModelConfig& c = config_;
  DI_CHECK(!items.empty(), ErrorCode::kInvalidArgument, "forward needs at least one sequence");
  StepInputs in;
  std::vector<int32_t> ids, logit_rows;
  for (size_t i = 0; i < items.size(); ++i) {
    const BatchItem& it = items[i];
    const int64_t S = static_cast<int64_t>(it.ids.size());
    DI_CHECK(S > 0, ErrorCode::kInvalidArgument, "sequence {} of the batch has no tokens", i);
    DI_CHECK(it.state && static_cast<int64_t>(it.state->layers.size()) == c.num_hidden_layers,
             ErrorCode::kInvalidArgument, "sequence {} has no state for this model's {} layers", i,
             c.num_hidden_layers);
    const bool last_on_device = !it.last_id.empty();
    if (last_on_device)
      DI_CHECK(it.last_id.dtype() == DType::kI32 && it.last_id.numel() == 1 &&
                   it.last_id.device() == b.device(),
               ErrorCode::kInvalidArgument,
               "sequence {}: last_id must be one int32 on the backend's device", i);
    for (int64_t s = 0; s < S - (last_on_device ? 1 : 0); ++s)
      DI_CHECK(it.ids[s] >= 0 && it.ids[s] < c.vocab_size, ErrorCode::kInvalidArgument,
               "token id {} at index {} of sequence {} is outside the vocabulary [0, {})",
               it.ids[s], s, i, c.vocab_size);
    for (size_t j = 0; j < i; ++j)
      DI_CHECK(items[j].state != it.state, ErrorCode::kInvalidArgument,
               "sequences {} and {} of the batch share one state", j, i);
    in.segments.push_back({in.num_tokens, S, it.state});
    for (int64_t s = 0; s < S; ++s) {
      ids.push_back(last_on_device && s == S - 1 ? 0 : it.ids[s]);
      in.positions.push_back(static_cast<int32_t>(it.state->num_tokens + s));
      if (it.logits == BatchItem::Logits::kAll ||
          (it.logits == BatchItem::Logits::kLast && s == S - 1))
        logit_rows.push_back(static_cast<int32_t>(in.num_tokens + s));
    }
    in.num_tokens += S;
  }
  const int64_t T = in.num_tokens;
  const ScopedCpuTimer timer("model: forward");
  // From the first upload to the logits download the host only queues work (on a GPU: the
  // launches stream ahead of the device; a host sync in between is an error).
  std::optional<SyncFreeRegion> sync_free;
  sync_free.emplace(b, "the model forward");
  // A decode step (one token per sequence) runs as one graph, kept per batch size.
  const bool decode_only = std::all_of(in.segments.begin(), in.segments.end(),
                                       [](const Segment& s) { return s.count == 1; });
  std::optional<GraphRegion> graph;
  if (decode_only) graph.emplace(b, T);
  in.ids = upload_i32(b, ids);
  const int n = c.hc_mult, D = c.hidden_size;
  std::vector<int32_t> repeated(T * n);  // the embedding's ids, one per residual stream
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < n; ++h) repeated[t * n + h] = ids[t];
  const Tensor repeated_dev = upload_i32(b, repeated);
  {
    // Ids still on the device go in by one batched copy.
    std::vector<TensorView> src, dst;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].last_id.empty()) continue;
      const int64_t t = in.segments[i].row0 + in.segments[i].count - 1;
      src.push_back(items[i].last_id);
      dst.push_back(in.ids.view().slice_rows(t, t + 1));
      for (int h = 0; h < n; ++h) {
        src.push_back(items[i].last_id);
        dst.push_back(repeated_dev.view().slice_rows(t * n + h, t * n + h + 1));
      }
    }
    if (!src.empty()) b.copy_batch(src, dst);
  }
  in.positions_dev = upload_i32(b, in.positions);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (c.layer_types[l] == AttnType::kSliding) continue;
    const int m = c.compress_rate(l);
    if (std::any_of(in.rates.begin(), in.rates.end(), [m](const auto& r) { return r.m == m; }))
      continue;
    std::vector<int32_t> visible(T);
    for (int64_t t = 0; t < T; ++t) visible[t] = (in.positions[t] + 1) / m;
    in.rates.push_back({m, upload_i32(b, visible)});
  }

  // The embedding is copied into hc_mult residual streams: X [T, hc, D].
  Streams streams{b.empty({T, n, D})};
  b.embedding(repeated_dev, weights_.embed, streams.X.view().reshape({T * n, D}));

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& L = weights_.layers[l];
    streams = hc_site(b, c, L.hc_attn, L.attn_norm, std::move(streams), [&](const TensorView& x) {
      const ScopedCpuTimer t("model: attention block");
      return attention_block(b, c, weights_, l, x, in);
    });
    streams = hc_site(b, c, L.hc_ffn, L.ffn_norm, std::move(streams), [&](const TensorView& x) {
      const ScopedCpuTimer t("model: moe block");
      return moe_block(b, c, L.moe, x, in);
    });
  }
  for (const BatchItem& it : items) it.state->num_tokens += static_cast<int64_t>(it.ids.size());

  // Only the rows whose logits were asked for go through the head.
  const int64_t R = static_cast<int64_t>(logit_rows.size());
  if (R == 0) {
    if (graph) graph->finish();
    sync_free.reset();
    return Tensor::empty({0, c.vocab_size});
  }
  // The last site's expansion and the head run on those rows alone: the streams are not state,
  // so a prompt's other rows need neither (at 65,536 prompt tokens, a whole expansion and
  // collapse of the streams).
  if (R != T) streams = streams.gathered(b, upload_i32(b, logit_rows));
  const Tensor X = streams.expanded(b);
  Tensor h = b.empty({R, D});
  b.hc_head(X, weights_.hc_head_fn, weights_.hc_head_base, weights_.hc_head_scale,
            static_cast<float>(c.hc_eps), static_cast<float>(c.rms_norm_eps), h);
  Tensor hn = b.empty({R, D});
  b.rms_norm(h, weights_.norm, static_cast<float>(c.rms_norm_eps), hn);
  Tensor logits_dev = b.empty({R, c.vocab_size});
  b.matmul(hn, weights_.head, logits_dev);
  if (graph) graph->finish();
  sync_free.reset();
  if (b.device() == Device::kCpu || !logits_to_host) return logits_dev;
  Tensor logits = Tensor::empty({R, c.vocab_size});
  b.download(logits_dev, logits.view().data());
  return logits;
}

}  // namespace deepinfer::deepseek_v4
