#include "model/deepseek_v4/model.h"

#include <filesystem>

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

// One mHC site around a sub-block: collapse the streams, run the block on the normed input,
// expand back with the post weights and the (transposed) combination matrix.
template <typename Block>
Tensor hc_site(Backend& b, const ModelConfig& c, const HcWeights& hc, const Tensor& norm_w,
               const Tensor& X, Block&& block) {
  const int64_t S = X.dim(0);
  const int n = c.hc_mult, D = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  Tensor collapsed = b.empty({S, D}), post = b.empty({S, n}), comb = b.empty({S, n, n});
  b.hc_pre(X, hc.fn, hc.base, hc.scale, c.hc_sinkhorn_iters, static_cast<float>(c.hc_eps), eps,
           collapsed, post, comb);
  Tensor normed = b.empty({S, D});
  b.rms_norm(collapsed, norm_w, eps, normed);
  Tensor y = block(normed.view());
  Tensor next = b.empty({S, n, D});
  b.hc_post(X, y, post, comb, next);
  return next;
}

}  // namespace

Tensor Model::forward(std::span<const int32_t> ids, SequenceState& state) {
  Backend& b = backend_;
  const ModelConfig& c = config_;
  const int64_t S = static_cast<int64_t>(ids.size());
  DI_CHECK(S > 0, ErrorCode::kInvalidArgument, "forward needs at least one token");
  for (int64_t i = 0; i < S; ++i)
    DI_CHECK(ids[i] >= 0 && ids[i] < c.vocab_size, ErrorCode::kInvalidArgument,
             "token id {} at index {} is outside the vocabulary [0, {})", ids[i], i, c.vocab_size);
  DI_CHECK(static_cast<int64_t>(state.layers.size()) == c.num_hidden_layers,
           ErrorCode::kInvalidArgument, "sequence state has {} layers, the model {}",
           state.layers.size(), c.num_hidden_layers);

  StepInputs in;
  in.num_tokens = S;
  in.first_position = state.num_tokens;
  in.positions.resize(S);
  for (int64_t s = 0; s < S; ++s) in.positions[s] = static_cast<int32_t>(state.num_tokens + s);
  in.ids = upload_i32(b, std::vector<int32_t>(ids.begin(), ids.end()));
  in.positions_dev = upload_i32(b, in.positions);

  // The embedding is copied into hc_mult residual streams: X [S, hc, D].
  const int n = c.hc_mult, D = c.hidden_size;
  std::vector<int32_t> repeated(S * n);
  for (int64_t s = 0; s < S; ++s)
    for (int h = 0; h < n; ++h) repeated[s * n + h] = ids[s];
  Tensor X = b.empty({S, n, D});
  b.embedding(upload_i32(b, repeated), weights_.embed, X.view().reshape({S * n, D}));

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& L = weights_.layers[l];
    X = hc_site(b, c, L.hc_attn, L.attn_norm, X, [&](const TensorView& x) {
      return attention_block(b, c, weights_, l, x, in, state.layers[l]);
    });
    X = hc_site(b, c, L.hc_ffn, L.ffn_norm, X,
                [&](const TensorView& x) { return moe_block(b, c, L.moe, x, in); });
  }

  Tensor h = b.empty({S, D});
  b.hc_head(X, weights_.hc_head_fn, weights_.hc_head_base, weights_.hc_head_scale,
            static_cast<float>(c.hc_eps), static_cast<float>(c.rms_norm_eps), h);
  Tensor hn = b.empty({S, D});
  b.rms_norm(h, weights_.norm, static_cast<float>(c.rms_norm_eps), hn);
  Tensor logits_dev = b.empty({S, c.vocab_size});
  b.matmul(hn, weights_.head, logits_dev);
  state.num_tokens += S;
  if (b.device() == Device::kCpu) return logits_dev;
  Tensor logits = Tensor::empty({S, c.vocab_size});
  b.download(logits_dev, logits.view().data());
  return logits;
}

}  // namespace deepinfer::deepseek_v4
