#include "bench/random_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/dtype.h"
#include "core/status.h"
#include "io/weight_names.h"

namespace deepinfer::bench {

namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor host_tensor(const std::vector<int64_t>& shape, DType dtype) {
  return Tensor::empty(shape.data(), static_cast<int>(shape.size()), dtype);
}

}  // namespace

RandomWeightSource::RandomWeightSource(const ModelConfig& config, uint64_t seed, bool mxfp4_experts)
    : num_experts_(config.n_routed_experts), seed_(seed), mxfp4_experts_(mxfp4_experts) {
  for (WeightSpec& w : expected_weights(config)) shapes_.emplace(w.name, std::move(w.shape));
}

bool RandomWeightSource::has(const std::string& name) const {
  return shapes_.count(name) > 0;
}

void RandomWeightSource::check(const std::string& name, const std::vector<int64_t>& shape) const {
  const auto it = shapes_.find(name);
  DI_CHECK(it != shapes_.end(), ErrorCode::kNotFound,
           "random weights: '{}' is not a tensor of this config", name);
  DI_CHECK(it->second == shape, ErrorCode::kInvalidArgument,
           "random weights: '{}' has shape {}, but {} was asked for", name, shape_str(it->second),
           shape_str(shape));
}

uint64_t RandomWeightSource::tensor_seed(const std::string& name, int part) const {
  return mix64(mix64(seed_ ^ name_hash(name)) + static_cast<uint64_t>(part));
}

void RandomWeightSource::uniform_range(const std::string& name, const std::vector<int64_t>& shape,
                                       float* lo, float* hi) {
  // U(mean - sqrt(3) sd, mean + sqrt(3) sd) has make-random's mean and variance.
  const RandomInit init = random_init(name, shape);
  const float half = static_cast<float>(std::sqrt(3.0) * init.std);
  *lo = init.mean - half;
  *hi = init.mean + half;
}

Tensor RandomWeightSource::param(const std::string& name, const std::vector<int64_t>& shape) const {
  check(name, shape);
  Tensor t = host_tensor(shape, DType::kF32);
  float* v = t.data_as<float>();
  random_tensor_values(name, shape, seed_, 0, t.numel(), v);
  // make-random stores norm weights as BF16 (the other parameters as F32).
  if (name.ends_with("norm.weight"))
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = bf16_to_f32(f32_to_bf16(v[i]));
  return t;
}

Tensor RandomWeightSource::ints(const std::string& name, const std::vector<int64_t>& shape) const {
  check(name, shape);
  DI_CHECK(shape.size() == 2, ErrorCode::kInvalidArgument, "random weights: '{}' is not [rows, k]",
           name);
  std::vector<int64_t> v(static_cast<size_t>(numel(shape)));
  random_tid2eid_rows(name, seed_, num_experts_, shape[1], 0, shape[0], v.data());
  Tensor t = host_tensor(shape, DType::kI32);
  int32_t* out = t.data_as<int32_t>();
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<int32_t>(v[i]);
  return t;
}

std::vector<Tensor> RandomWeightSource::matrix_blocks(Backend& backend, const std::string& name,
                                                      int64_t rows, int64_t cols, int parts) const {
  check(name, {rows, cols});
  DI_CHECK(parts >= 1 && rows % parts == 0, ErrorCode::kInvalidArgument,
           "random weights: '{}' [{}, {}] does not split into {} row blocks", name, rows, cols,
           parts);
  float lo = 0, hi = 0;
  uniform_range(name, {rows, cols}, &lo, &hi);
  std::vector<Tensor> out;
  for (int p = 0; p < parts; ++p) {
    Tensor t = backend.empty({rows / parts, cols}, backend.weight_dtype());
    backend.fill_random(t, tensor_seed(name, p), lo, hi);
    out.push_back(std::move(t));
  }
  return out;
}

void RandomWeightSource::expert_range(int layer, const std::string& leaf, int64_t E, int64_t rows,
                                      int64_t cols, float* lo, float* hi) const {
  DI_CHECK(E == num_experts_, ErrorCode::kInvalidArgument,
           "random weights: {} experts asked for, the config has {}", E, num_experts_);
  const int w = leaf == "w1" ? 1 : leaf == "w2" ? 2 : leaf == "w3" ? 3 : 0;
  DI_CHECK(w != 0, ErrorCode::kInvalidArgument, "random weights: expert matrix '{}'", leaf);
  const std::string first = expert_weight_name(layer, 0, w);
  check(first, {rows, cols});
  uniform_range(first, {rows, cols}, lo, hi);
}

Tensor RandomWeightSource::experts(Backend& backend, int layer, const std::string& leaf, int64_t E,
                                   int64_t rows, int64_t cols) const {
  float lo = 0, hi = 0;
  expert_range(layer, leaf, E, rows, cols, &lo, &hi);
  Tensor t = backend.empty({E, rows, cols}, backend.weight_dtype());
  backend.fill_random(t, tensor_seed(fmt::format("layers.{}.ffn.experts.{}", layer, leaf), 0), lo,
                      hi);
  return t;
}

bool RandomWeightSource::mxfp4_experts(Backend& backend, int layer, const std::string& leaf,
                                       int64_t E, int64_t rows, int64_t cols, Tensor* data,
                                       Tensor* scales) const {
  if (!mxfp4_experts_ || cols % 32 != 0) return false;
  float lo = 0, hi = 0;
  expert_range(layer, leaf, E, rows, cols, &lo, &hi);
  const double sd = (static_cast<double>(hi) - lo) / std::sqrt(12.0);
  const long scale = std::clamp<long>(127 + std::lround(std::log2(sd / std::sqrt(8.5625))),
                                      kMxfp4MinScale, kMxfp4MaxScale);
  *data = backend.empty({E, rows, cols}, DType::kFP4E2M1);
  backend.fill_random(*data, tensor_seed(fmt::format("layers.{}.ffn.experts.{}", layer, leaf), 0),
                      -6.f, 6.f);
  const std::vector<uint8_t> s(static_cast<size_t>(E * (cols / 32) * rows),
                               static_cast<uint8_t>(scale));
  *scales = backend.from_host(s.data(), {E, cols / 32, rows}, DType::kE8M0);
  return true;
}

std::unique_ptr<deepseek_v4::Model> make_random_model(const PresetOptions& preset, uint64_t seed,
                                                      Backend& backend, bool mxfp4_experts) {
  ModelConfig config = preset_model_config(preset);
  const RandomWeightSource source(config, seed, mxfp4_experts);
  deepseek_v4::ModelWeights weights = deepseek_v4::load_weights(config, source, backend);
  // The fills are queued on the device: wait for them (a download synchronises), so the model
  // is complete and the load time is honest.
  std::vector<uint8_t> probe(weights.norm.view().nbytes());
  backend.download(weights.norm.view(), probe.data());
  return std::make_unique<deepseek_v4::Model>(std::move(config), std::move(weights), backend);
}

}  // namespace deepinfer::bench
