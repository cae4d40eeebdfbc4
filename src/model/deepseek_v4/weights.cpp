#include "model/deepseek_v4/weights.h"

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/env.h"
#include "io/dequant.h"
#include "io/weights.h"
#include "model/deepseek_v4/rope.h"

namespace deepinfer::deepseek_v4 {

namespace {

// Copies host data onto the backend's device (a no-op on the CPU).
Tensor place(Backend& backend, Tensor host) {
  if (backend.device() == Device::kCpu) return host;
  Tensor dev;
  switch (host.ndim()) {
    case 1:
      dev = backend.empty({host.dim(0)}, host.dtype());
      break;
    case 2:
      dev = backend.empty({host.dim(0), host.dim(1)}, host.dtype());
      break;
    case 3:
      dev = backend.empty({host.dim(0), host.dim(1), host.dim(2)}, host.dtype());
      break;
    default:
      fail(ErrorCode::kInternal, "place: unexpected rank {}", host.ndim());
  }
  backend.upload(host.view().data(), dev);
  return dev;
}

std::vector<int64_t> shape_of(const Tensor& t) {
  std::vector<int64_t> s(t.ndim());
  for (int i = 0; i < t.ndim(); ++i) s[i] = t.dim(i);
  return s;
}

// An fp32 host matrix converted to the backend's weight dtype and placed on its device.
Tensor place_matrix(Backend& backend, Tensor host) {
  if (backend.weight_dtype() == DType::kF32) return place(backend, std::move(host));
  DI_CHECK(backend.weight_dtype() == DType::kBF16, ErrorCode::kUnsupported,
           "weight dtype {} is not supported", dtype_name(backend.weight_dtype()));
  Tensor bf = Tensor::empty(shape_of(host).data(), host.ndim(), DType::kBF16);
  const float* src = host.data_as<float>();
  uint16_t* dst = bf.data_as<uint16_t>();
  for (int64_t i = 0; i < host.numel(); ++i) dst[i] = f32_to_bf16(src[i]);
  return place(backend, std::move(bf));
}

Tensor host_rows(const Tensor& t, int64_t r0, int64_t n) {
  Tensor out = Tensor::empty({n, t.dim(1)});
  std::memcpy(out.data_as<float>(), t.data_as<float>() + r0 * t.dim(1),
              n * t.dim(1) * sizeof(float));
  return out;
}

// [m, 2d] (two series side by side) -> [2m, d]: series a's rows, then series b's.
Tensor host_series_rows(const Tensor& t, int64_t d) {
  const int64_t m = t.dim(0);
  Tensor out = Tensor::empty({2 * m, d});
  for (int64_t half = 0; half < 2; ++half)
    for (int64_t r = 0; r < m; ++r)
      std::memcpy(out.data_as<float>() + (half * m + r) * d,
                  t.data_as<float>() + r * 2 * d + half * d, d * sizeof(float));
  return out;
}

// A checkpoint as a source: every tensor read (and dequantised) to fp32 on the host, matrices
// converted to the weight dtype there, then uploaded.
class StoreSource final : public WeightSource {
 public:
  explicit StoreSource(const WeightStore& store) : store_(store) {}
  bool has(const std::string& name) const override { return store_.has(name); }
  Tensor param(const std::string& name, const std::vector<int64_t>& shape) const override {
    return store_.get_f32(name, shape);
  }
  Tensor ints(const std::string& name, const std::vector<int64_t>& shape) const override {
    return store_.get_i32(name, shape);
  }
  std::vector<Tensor> matrix_blocks(Backend& backend, const std::string& name, int64_t rows,
                                    int64_t cols, int parts) const override {
    Tensor full = store_.get_f32(name, std::vector<int64_t>{rows, cols});
    if (parts == 1) return {place_matrix(backend, std::move(full))};
    std::vector<Tensor> out;
    const int64_t per = rows / parts;
    for (int p = 0; p < parts; ++p)
      out.push_back(place_matrix(backend, host_rows(full, p * per, per)));
    return out;
  }
  Tensor experts(Backend& backend, int layer, const std::string& leaf, int64_t E, int64_t rows,
                 int64_t cols) const override {
    Tensor out = Tensor::empty({E, rows, cols});
    const int64_t per = rows * cols;
    for (int64_t e = 0; e < E; ++e) {
      Tensor t = store_.get_f32(fmt::format("layers.{}.ffn.experts.{}.{}.weight", layer, e, leaf),
                                std::vector<int64_t>{rows, cols});
      std::memcpy(out.data_as<float>() + e * per, t.data_as<float>(), per * sizeof(float));
    }
    return place_matrix(backend, std::move(out));
  }
  bool mxfp4_experts(Backend& backend, int layer, const std::string& leaf, int64_t E, int64_t rows,
                     int64_t cols, Tensor* data, Tensor* scales) const override {
    if (cols % kMxfp4BlockSize != 0) return false;
    const int64_t groups = cols / kMxfp4BlockSize, per = rows * cols / 2;
    Tensor packed = Tensor::empty({E, rows, cols}, DType::kFP4E2M1);
    Tensor sc = Tensor::empty({E, groups, rows}, DType::kE8M0);
    std::vector<uint8_t> by_row(static_cast<size_t>(rows * groups));
    for (int64_t e = 0; e < E; ++e) {
      const std::string name = fmt::format("layers.{}.ffn.experts.{}.{}.weight", layer, e, leaf);
      if (!store_.get_mxfp4(name, {rows, cols}, packed.data_as<uint8_t>() + e * per, by_row.data()))
        return false;
      uint8_t* dst = sc.data_as<uint8_t>() + e * groups * rows;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t g = 0; g < groups; ++g) {
          const uint8_t v = by_row[r * groups + g];
          if (v < kMxfp4MinScale || v > kMxfp4MaxScale) return false;
          dst[g * rows + r] = v;
        }
    }
    *data = place(backend, std::move(packed));
    *scales = place(backend, std::move(sc));
    return true;
  }

 private:
  const WeightStore& store_;
};

class Loader {
 public:
  Loader(const WeightSource& source, Backend& backend) : src_(source), backend_(backend) {}

  // Vectors and small parameters: fp32 on every backend.
  Tensor f32(const std::string& name, std::initializer_list<int64_t> shape) {
    return place(backend_, src_.param(name, shape));
  }
  // Weight matrices: the backend's weight dtype.
  Tensor matrix(const std::string& name, int64_t rows, int64_t cols) {
    return std::move(src_.matrix_blocks(backend_, name, rows, cols, 1).at(0));
  }
  Tensor i32(const std::string& name, std::initializer_list<int64_t> shape) {
    return place(backend_, src_.ints(name, shape));
  }
  const WeightSource& source() const { return src_; }
  Backend& backend() const { return backend_; }

 private:
  const WeightSource& src_;
  Backend& backend_;
};

// CSA projections are 2d wide (series a = first d outputs, b = the rest); HCA's are d wide.
CompressorWeights load_compressor(Loader& ld, const std::string& prefix, int D, int d, int m,
                                  bool two_series) {
  CompressorWeights c;
  const int width = two_series ? 2 * d : d;
  const int parts = two_series ? 2 : 1;
  std::vector<Tensor> wkv =
      ld.source().matrix_blocks(ld.backend(), prefix + ".wkv.weight", width, D, parts);
  std::vector<Tensor> wgate =
      ld.source().matrix_blocks(ld.backend(), prefix + ".wgate.weight", width, D, parts);
  Tensor ape = ld.source().param(prefix + ".ape", {m, width});
  c.wkv_a = wkv.at(0);
  c.wgate_a = wgate.at(0);
  c.slot_bias = place(ld.backend(), two_series ? host_series_rows(ape, d) : ape);
  if (two_series) {
    c.wkv_b = wkv.at(1);
    c.wgate_b = wgate.at(1);
  }
  c.norm = ld.f32(prefix + ".norm.weight", {d});
  return c;
}

// Copies `members` (same dtype and width) into one matrix, row blocks in order, and turns each
// member into a view of its block (its own storage goes).
Tensor fuse_rows(Backend& b, const std::vector<Tensor*>& members) {
  int64_t rows = 0;
  for (const Tensor* t : members) rows += t->dim(0);
  const Tensor& first = *members.front();
  Tensor fused = b.empty({rows, first.dim(1)}, first.dtype());
  int64_t r = 0;
  for (Tensor* t : members) {
    DI_CHECK(t->dtype() == first.dtype() && t->dim(1) == first.dim(1), ErrorCode::kInternal,
             "fusing matrices of different dtype or width ({} vs {})", t->shape_str(),
             first.shape_str());
    const TensorView block = fused.view().slice_rows(r, r + t->dim(0));
    b.copy(*t, block);
    *t = fused.with_view(block);
    r += block.dim(0);
  }
  return fused;
}

}  // namespace

ModelWeights load_weights(const ModelConfig& c, const WeightStore& store, Backend& backend) {
  return load_weights(c, StoreSource(store), backend);
}

ModelWeights load_weights(const ModelConfig& c, const WeightSource& source, Backend& backend) {
  Loader ld(source, backend);
  const int D = c.hidden_size, V = c.vocab_size, H = c.num_attention_heads, hd = c.head_dim;
  const int hc = c.hc_mult, mix = (2 + hc) * hc;
  ModelWeights w;
  w.embed = ld.matrix("embed.weight", V, D);
  w.head = c.tie_word_embeddings && !source.has("head.weight") ? w.embed
                                                               : ld.matrix("head.weight", V, D);
  w.norm = ld.f32("norm.weight", {D});
  w.hc_head_fn = ld.f32("hc_head_fn", {hc, hc * D});
  w.hc_head_base = ld.f32("hc_head_base", {hc});
  w.hc_head_scale = ld.f32("hc_head_scale", {1});

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("layers.{}", l);
    LayerWeights L;
    L.attn_norm = ld.f32(p + ".attn_norm.weight", {D});
    L.ffn_norm = ld.f32(p + ".ffn_norm.weight", {D});
    L.hc_attn = {ld.f32(p + ".hc_attn_fn", {mix, hc * D}), ld.f32(p + ".hc_attn_base", {mix}),
                 ld.f32(p + ".hc_attn_scale", {3})};
    L.hc_ffn = {ld.f32(p + ".hc_ffn_fn", {mix, hc * D}), ld.f32(p + ".hc_ffn_base", {mix}),
                ld.f32(p + ".hc_ffn_scale", {3})};

    AttentionWeights& A = L.attn;
    const std::string a = p + ".attn";
    A.wq_a = ld.matrix(a + ".wq_a.weight", c.q_lora_rank, D);
    A.q_norm = ld.f32(a + ".q_norm.weight", {c.q_lora_rank});
    A.wq_b = ld.matrix(a + ".wq_b.weight", H * hd, c.q_lora_rank);
    A.wkv = ld.matrix(a + ".wkv.weight", hd, D);
    A.kv_norm = ld.f32(a + ".norm.weight", {hd});
    A.wo_a = ld.matrix(a + ".wo_a.weight", c.o_groups * c.o_lora_rank, H * hd / c.o_groups);
    A.wo_b = ld.matrix(a + ".wo_b.weight", D, c.o_groups * c.o_lora_rank);
    A.sinks = ld.f32(a + ".attn_sink", {H});
    const AttnType type = c.layer_types[l];
    if (type != AttnType::kSliding) {
      const bool csa = type == AttnType::kCSA;
      const int m = c.compress_rate(l);
      A.has_compressor = true;
      A.compressor = load_compressor(ld, a + ".compressor", D, hd, m, csa);
      if (csa) {
        A.has_indexer = true;
        const int nh = c.index_n_heads, di = c.index_head_dim;
        A.indexer.compressor = load_compressor(ld, a + ".indexer.compressor", D, di, m, true);
        A.indexer.wq_b = ld.matrix(a + ".indexer.wq_b.weight", nh * di, c.q_lora_rank);
        A.indexer.weights_proj = ld.matrix(a + ".indexer.weights_proj.weight", nh, D);
      }
    }

    MoeWeights& M = L.moe;
    const std::string f = p + ".ffn";
    const int E = c.n_routed_experts, I = c.moe_intermediate_size, k = c.num_experts_per_tok;
    M.gate = ld.matrix(f + ".gate.weight", E, D);
    if (c.mlp_layer_types[l] == MlpType::kHashMoe) {
      M.tid2eid = ld.i32(f + ".gate.tid2eid", {V, k});
    } else if (source.has(f + ".gate.bias")) {
      M.bias = ld.f32(f + ".gate.bias", {E});
    }
    // MXFP4 only where all three matrices are (moe_experts takes the three in one form).
    const bool mxfp4 = env::get_bool("DEEPINFER_MXFP4_EXPERTS") &&
                       backend.takes_mxfp4_experts(E, I, D) &&
                       source.mxfp4_experts(backend, l, "w1", E, I, D, &M.w1, &M.s1) &&
                       source.mxfp4_experts(backend, l, "w3", E, I, D, &M.w3, &M.s3) &&
                       source.mxfp4_experts(backend, l, "w2", E, D, I, &M.w2, &M.s2);
    if (mxfp4) {
      for (const Tensor* t : {&M.w1, &M.w3, &M.w2}) backend.prepare_mxfp4_experts(t->view());
    } else {
      M.s1 = M.s3 = M.s2 = Tensor();
      M.w1 = source.experts(backend, l, "w1", E, I, D);
      M.w3 = source.experts(backend, l, "w3", E, I, D);
      M.w2 = source.experts(backend, l, "w2", E, D, I);
    }
    M.shared_w1 = ld.matrix(f + ".shared_experts.w1.weight", I, D);
    M.shared_w3 = ld.matrix(f + ".shared_experts.w3.weight", I, D);
    M.shared_w2 = ld.matrix(f + ".shared_experts.w2.weight", D, I);
    A.x_proj = fuse_rows(backend, attention_x_members(A));
    M.x_proj = fuse_rows(backend, moe_x_members(M));
    w.layers.push_back(std::move(L));
  }

  auto freq_tensor = [&](const RopeConfig& rope) {
    const std::vector<float> f = deepseek_v4::rope_inv_freq(rope, c.qk_rope_head_dim);
    Tensor t = Tensor::empty({static_cast<int64_t>(f.size())});
    std::memcpy(t.data_as<float>(), f.data(), f.size() * sizeof(float));
    return place(backend, t);
  };
  w.inv_freq_main = freq_tensor(c.rope_main);
  w.inv_freq_compress = freq_tensor(c.rope_compress);
  // The fused matrices' members left their own blocks in the backend's cache.
  backend.release_cached_memory();
  return w;
}

}  // namespace deepinfer::deepseek_v4
