#include "bench/random_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <numeric>

#include "bench/fast_convert.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "io/model_config.h"
#include "io/weight_names.h"
#include "sampling/rng.h"

namespace deepinfer::bench {

using json = nlohmann::json;
namespace fs = std::filesystem;

CheckpointDtype parse_checkpoint_dtype(const std::string& name) {
  if (name == "bf16") return CheckpointDtype::kBf16;
  if (name == "fp8") return CheckpointDtype::kFp8;
  if (name == "mxfp4-experts") return CheckpointDtype::kMxfp4Experts;
  fail(ErrorCode::kInvalidArgument, "--dtype: '{}' is not one of bf16, fp8, mxfp4-experts", name);
}

const char* checkpoint_dtype_name(CheckpointDtype dtype) {
  switch (dtype) {
    case CheckpointDtype::kBf16:
      return "bf16";
    case CheckpointDtype::kFp8:
      return "fp8";
    case CheckpointDtype::kMxfp4Experts:
      return "mxfp4-experts";
  }
  return "?";
}

namespace {

constexpr int64_t kFp8Block = 128;
constexpr int64_t kMxBlock = 32;
constexpr int64_t kChunkElems = int64_t{8} << 20;  // fp32 values generated per chunk (32 MB)

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

struct Init {
  float mean = 0, std = 1;
};

Init init_for(const std::string& name, const std::vector<int64_t>& shape) {
  auto ends = [&](const char* s) { return name.ends_with(s); };
  if (name == "embed.weight") return {0.0f, 1.0f};
  if (ends("norm.weight")) return {1.0f, 0.05f};
  if (ends("_base")) return {0.0f, 0.1f};
  if (ends("_scale")) return {0.9f, 0.05f};
  if (ends("attn_sink")) return {0.25f, 0.1f};
  if (ends(".ape") || ends("gate.bias")) return {0.0f, 0.1f};
  // Matrices (projections, experts, head, mHC fn): N(0, 1/in).
  const double in = shape.size() >= 2 ? static_cast<double>(shape.back()) : 1.0;
  return {0.0f, static_cast<float>(1.0 / std::sqrt(in))};
}

// The standard normal quantile function at 2^16 + 1 knots p = k / 2^16 (the end knots at
// 2^-18 and 1 - 2^-18, cutting the tails at +-4.6 sigma): Acklam's rational approximation polished
// by one Halley step on erfc.
const std::vector<float>& normal_quantile_table() {
  static const std::vector<float> table = [] {
    constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                            1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
    constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                            6.680131188771972e+01, -1.328068155288572e+01};
    constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                            -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
    constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                            3.754408661907416e+00};
    auto quantile = [&](double p) {
      double x;
      if (p < 0.02425 || p > 1 - 0.02425) {
        const double q = std::sqrt(-2 * std::log(std::min(p, 1 - p)));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
        if (p > 0.5) x = -x;
      } else {
        const double q = p - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
      }
      const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
      const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
      return x - u / (1 + x * u / 2);
    };
    constexpr int kKnots = 1 << 16;
    std::vector<float> t(kKnots + 1);
    for (int k = 0; k <= kKnots; ++k) {
      const double p = k == 0        ? 0.25 / kKnots
                       : k == kKnots ? 1 - 0.25 / kKnots
                                     : static_cast<double>(k) / kKnots;
      t[k] = static_cast<float>(quantile(p));
    }
    return t;
  }();
  return table;
}

// Standard normals (times sd, plus mean) at flat indices [begin, begin + n) of stream `stream`:
// element i takes word i % 4 of Philox block i / 4; its top 24 bits are a uniform u, and
// z = the quantile table linearly interpolated at u (inverse-CDF sampling).
void fill_normal(uint64_t seed, uint64_t stream, int64_t begin, int64_t n, float mean, float sd,
                 float* out) {
  const float* table = normal_quantile_table().data();
  const sampling::PhiloxKey key = sampling::philox_key(seed);
  const auto s_lo = static_cast<uint32_t>(stream), s_hi = static_cast<uint32_t>(stream >> 32);
  int64_t i = begin;
  const int64_t end = begin + n;
  while (i < end) {
    const auto block = static_cast<uint64_t>(i / 4);
    const sampling::PhiloxCounter w = sampling::philox4x32_10(
        {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), s_lo, s_hi}, key);
    for (int lane = static_cast<int>(i % 4); lane < 4 && i < end; ++lane, ++i) {
      const uint32_t u = w[lane] >> 8;  // 24 bits: 16 pick the knot, 8 interpolate
      const uint32_t k = u >> 8;
      const float f = (static_cast<float>(u & 0xFF) + 0.5f) * (1.0f / 256.0f);
      out[i - begin] = mean + sd * (table[k] + f * (table[k + 1] - table[k]));
    }
  }
}

enum class Storage { kF32, kBF16, kI64, kFp8, kMxfp4 };

// One logical tensor and where its bytes (and its scale's) go.
struct Item {
  WeightSpec spec;
  Storage storage = Storage::kBF16;
  int64_t rows = 1, cols = 1;  // the logical [rows, cols] matrix (1-D: one row)
  int64_t bytes = 0, scale_bytes = 0;
  int shard = 0;
  uint64_t offset = 0, scale_offset = 0;

  int64_t group_rows() const { return storage == Storage::kFp8 ? kFp8Block : 1; }
  int64_t row_bytes() const {
    switch (storage) {
      case Storage::kF32:
        return cols * 4;
      case Storage::kBF16:
        return cols * 2;
      case Storage::kI64:
        return cols * 8;
      case Storage::kFp8:
        return cols;
      case Storage::kMxfp4:
        return cols / 2;
    }
    return 0;
  }
  int64_t scale_cols() const {
    return storage == Storage::kFp8 ? (cols + kFp8Block - 1) / kFp8Block
                                    : (cols + kMxBlock - 1) / kMxBlock;
  }
  int64_t scale_rows() const {
    return storage == Storage::kFp8 ? (rows + kFp8Block - 1) / kFp8Block : rows;
  }
  bool has_scale() const { return storage == Storage::kFp8 || storage == Storage::kMxfp4; }
  std::string scale_name() const {
    return spec.name.substr(0, spec.name.size() - std::string(".weight").size()) + ".scale";
  }
  const char* dtype() const {
    switch (storage) {
      case Storage::kF32:
        return "F32";
      case Storage::kBF16:
        return "BF16";
      case Storage::kI64:
        return "I64";
      case Storage::kFp8:
        return "F8_E4M3";
      case Storage::kMxfp4:
        return "I8";
    }
    return "?";
  }
  std::vector<int64_t> disk_shape() const {
    if (storage == Storage::kMxfp4) return {rows, cols / 2};
    return spec.shape;
  }
};

bool is_routed_expert(const std::string& name) {
  return name.find(".ffn.experts.") != std::string::npos;
}

Storage storage_for(const WeightSpec& w, CheckpointDtype dtype) {
  const std::string& n = w.name;
  if (w.is_int) return Storage::kI64;
  if (n.starts_with("hc_") || n.find(".hc_") != std::string::npos || n.ends_with("attn_sink") ||
      n.ends_with(".ape") || n.ends_with("gate.bias"))
    return Storage::kF32;
  const bool matrix = w.shape.size() == 2 && n.ends_with(".weight");
  if (!matrix || dtype == CheckpointDtype::kBf16) return Storage::kBF16;
  if (n == "embed.weight" || n == "head.weight" || n.ends_with("ffn.gate.weight"))
    return Storage::kBF16;
  if (dtype == CheckpointDtype::kMxfp4Experts && is_routed_expert(n)) {
    DI_CHECK(w.shape[1] % kMxBlock == 0, ErrorCode::kInvalidArgument,
             "mxfp4-experts: expert matrix '{}' has {} columns, not a multiple of {}", n,
             w.shape[1], kMxBlock);
    return Storage::kMxfp4;
  }
  return Storage::kFp8;
}

// Quantises fp32 rows [r0, r0 + nr) of an item into its stored bytes (`dst`: those rows) and its
// scale grid (`scale`: the whole tensor's).
void store_rows(const Item& it, int64_t r0, int64_t nr, const float* v, uint8_t* dst,
                uint8_t* scale) {
  const int64_t K = it.cols, n = nr * K;
  switch (it.storage) {
    case Storage::kF32:
      std::memcpy(dst, v, n * 4);
      return;
    case Storage::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t b = fast_f32_to_bf16(v[i]);
        std::memcpy(dst + 2 * i, &b, 2);
      }
      return;
    case Storage::kI64:
      fail(ErrorCode::kInternal, "store_rows: integer tensor '{}'", it.spec.name);
    case Storage::kFp8: {
      const int64_t sc = it.scale_cols(), br = r0 / kFp8Block;
      for (int64_t cb = 0; cb < sc; ++cb) {
        const int64_t c0 = cb * kFp8Block, c1 = std::min(K, c0 + kFp8Block);
        float amax = 0;
        for (int64_t r = 0; r < nr; ++r)
          for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(v[r * K + c]));
        const float s = amax > 0 ? amax / 448.0f : 1.0f;
        std::memcpy(scale + 4 * (br * sc + cb), &s, 4);
        const float inv = 1.0f / s;
        for (int64_t r = 0; r < nr; ++r)
          for (int64_t c = c0; c < c1; ++c) dst[r * K + c] = fast_f32_to_e4m3(v[r * K + c] * inv);
      }
      return;
    }
    case Storage::kMxfp4: {
      const int64_t sc = it.scale_cols();
      for (int64_t r = 0; r < nr; ++r) {
        const float* row = v + r * K;
        uint8_t* out = dst + r * (K / 2);
        for (int64_t b = 0; b < sc; ++b) {
          const int64_t c0 = b * kMxBlock, c1 = std::min(K, c0 + kMxBlock);
          float amax = 0;
          for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(row[c]));
          // Smallest power of two that brings the block within e2m1's range (max 6).
          int e = amax > 0 ? static_cast<int>(std::ceil(std::log2(amax / 6.0f))) : -127;
          e = std::clamp(e, -127, 127);
          scale[(r0 + r) * sc + b] = static_cast<uint8_t>(e + 127);
          const float inv = std::ldexp(1.0f, -e);
          for (int64_t c = c0; c < c1; c += 2)
            out[c / 2] = static_cast<uint8_t>(fast_f32_to_e2m1(row[c] * inv) |
                                              (fast_f32_to_e2m1(row[c + 1] * inv) << 4));
        }
      }
      return;
    }
  }
}

// tid2eid rows [r0, r0 + nr) as stored (I64).
void tid2eid_rows(const Item& it, uint64_t seed, int num_experts, int64_t r0, int64_t nr,
                  uint8_t* dst) {
  std::vector<int64_t> v(static_cast<size_t>(nr * it.cols));
  random_tid2eid_rows(it.spec.name, seed, num_experts, it.cols, r0, nr, v.data());
  std::memcpy(dst, v.data(), v.size() * sizeof(int64_t));
}

void pwrite_all(int fd, const void* data, size_t n, uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    DI_CHECK(w > 0, ErrorCode::kInternal, "writing '{}' failed: {}", path, std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

std::string shard_name(int i, int n) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n);
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Copies tokenizer files from `from` when its config's vocab matches; returns a note otherwise.
std::string copy_tokenizer(const std::string& from, int vocab, const fs::path& out, bool* copied) {
  *copied = false;
  if (from.empty()) return "no tokenizer source given; prompts must be token ids";
  const fs::path src(from);
  int src_vocab = -1;
  try {
    std::ifstream in(src / "config.json");
    if (in) src_vocab = json::parse(in).value("vocab_size", -1);
  } catch (const json::exception&) {
    src_vocab = -1;
  }
  if (src_vocab != vocab || !fs::is_regular_file(src / "tokenizer.json"))
    return fmt::format(
        "no tokenizer written: the vocabulary ({}) has no matching tokenizer (the one in '{}' has "
        "{} tokens); prompts must be token ids",
        vocab, from, src_vocab);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    if (fs::is_regular_file(src / f))
      fs::copy_file(src / f, out / f, fs::copy_options::overwrite_existing);
  *copied = true;
  return "";
}

// Writes chunks at file offsets on a background thread, double-buffered: the next chunk is
// generated while the previous one goes to disk.
class AsyncWriter {
 public:
  AsyncWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~AsyncWriter() {
    for (auto& f : pending_)
      if (f.valid()) f.wait();
  }
  // A buffer of n bytes that no write in flight uses.
  std::vector<uint8_t>& buffer(size_t n) {
    if (pending_[cur_].valid()) pending_[cur_].get();
    bufs_[cur_].resize(n);
    return bufs_[cur_];
  }
  // Queues the buffer last returned by buffer() for writing at `offset`.
  void submit(uint64_t offset) {
    const std::vector<uint8_t>& b = bufs_[cur_];
    pending_[cur_] = std::async(std::launch::async, [this, &b, offset] {
      pwrite_all(fd_, b.data(), b.size(), offset, path_);
    });
    cur_ ^= 1;
  }
  void drain() {
    for (auto& f : pending_)
      if (f.valid()) f.get();
  }

 private:
  int fd_;
  std::string path_;
  std::vector<uint8_t> bufs_[2];
  std::future<void> pending_[2];
  int cur_ = 0;
};

// Generates and writes every item of one shard; data_start = where the data section begins.
void write_items(const std::vector<Item>& items, int shard, const ModelConfig& config,
                 uint64_t seed, ThreadPool& pool, int fd, uint64_t data_start,
                 const std::string& path) {
  AsyncWriter writer(fd, path);
  std::vector<uint8_t> scale;
  for (const Item& it : items) {
    if (it.shard != shard) continue;
    scale.assign(static_cast<size_t>(it.scale_bytes), 0);
    const int64_t g = it.group_rows();
    const int64_t rows_per_chunk =
        std::max<int64_t>(g, kChunkElems / std::max<int64_t>(it.cols, 1) / g * g);
    for (int64_t r0 = 0; r0 < it.rows; r0 += rows_per_chunk) {
      const int64_t nr = std::min(rows_per_chunk, it.rows - r0);
      std::vector<uint8_t>& chunk = writer.buffer(static_cast<size_t>(nr * it.row_bytes()));
      pool.parallel_for((nr + g - 1) / g, 1, [&](int64_t gb, int64_t ge) {
        std::vector<float> v;
        for (int64_t gi = gb; gi < ge; ++gi) {
          const int64_t a = r0 + gi * g, n = std::min(g, r0 + nr - a);
          uint8_t* dst = chunk.data() + (a - r0) * it.row_bytes();
          if (it.storage == Storage::kI64) {
            tid2eid_rows(it, seed, config.n_routed_experts, a, n, dst);
            continue;
          }
          v.resize(static_cast<size_t>(n * it.cols));
          random_tensor_values(it.spec.name, it.spec.shape, seed, a * it.cols, n * it.cols,
                               v.data());
          store_rows(it, a, n, v.data(), dst, scale.data());
        }
      });
      writer.submit(data_start + it.offset + r0 * it.row_bytes());
    }
    // The scale grid is complete once every chunk of the tensor was generated.
    if (it.has_scale())
      pwrite_all(fd, scale.data(), scale.size(), data_start + it.scale_offset, path);
  }
  writer.drain();
}

}  // namespace

RandomInit random_init(const std::string& name, const std::vector<int64_t>& shape) {
  const Init i = init_for(name, shape);
  return {i.mean, i.std};
}

// k distinct experts of E per row (partial Fisher-Yates).
void random_tid2eid_rows(const std::string& name, uint64_t seed, int num_experts, int64_t k,
                         int64_t r0, int64_t nr, int64_t* out) {
  DI_CHECK(k <= num_experts, ErrorCode::kInvalidArgument,
           "{}: {} distinct experts per row of only {}", name, k, num_experts);
  const sampling::PhiloxKey key = sampling::philox_key(seed);
  const uint64_t stream = fnv1a(name);
  std::vector<int64_t> perm(num_experts);
  for (int64_t r = 0; r < nr; ++r) {
    std::iota(perm.begin(), perm.end(), 0);
    const uint64_t row = static_cast<uint64_t>(r0 + r);
    for (int64_t i = 0; i < k; ++i) {
      const uint64_t block = row * static_cast<uint64_t>((k + 3) / 4) + i / 4;
      const auto w = sampling::philox4x32_10(
          {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
           static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
          key);
      const int64_t j = i + static_cast<int64_t>(w[i % 4] % static_cast<uint32_t>(num_experts - i));
      std::swap(perm[i], perm[j]);
      out[r * k + i] = perm[i];
    }
  }
}

void random_tensor_values(const std::string& name, const std::vector<int64_t>& shape, uint64_t seed,
                          int64_t begin, int64_t n, float* out) {
  const Init init = init_for(name, shape);
  fill_normal(seed, fnv1a(name), begin, n, init.mean, init.std, out);
}

RandomCheckpointResult write_random_checkpoint(const RandomCheckpointOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  DI_CHECK(!o.out_dir.empty(), ErrorCode::kInvalidArgument, "--out: an output directory is needed");
  DI_CHECK(o.shard_bytes > 0, ErrorCode::kInvalidArgument, "shard size must be positive");
  const json config_json = preset_config(o.preset);
  const ModelConfig config = preset_model_config(o.preset);
  const fs::path out(o.out_dir);
  fs::create_directories(out);
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string f = entry.path().filename().string();
    if (f == "model.safetensors" || f == "model.safetensors.index.json" ||
        (f.starts_with("model-") && f.ends_with(".safetensors")))
      fs::remove(entry.path());
  }

  // Plan: storage, sizes, shards and offsets, all before a byte is written.
  std::vector<Item> items;
  RandomCheckpointResult res;
  for (WeightSpec& w : expected_weights(config)) {
    Item it;
    it.storage = storage_for(w, o.dtype);
    it.rows = w.shape.size() >= 2 ? w.shape[0] : 1;
    it.cols = w.shape.size() >= 2 ? w.shape[1] : w.shape[0];
    it.spec = std::move(w);
    it.bytes = it.rows * it.row_bytes();
    if (it.has_scale())
      it.scale_bytes = it.scale_rows() * it.scale_cols() * (it.storage == Storage::kFp8 ? 4 : 1);
    res.params += static_cast<double>(it.rows) * it.cols;
    items.push_back(std::move(it));
  }
  std::vector<uint64_t> shard_size{0};
  for (Item& it : items) {
    const auto need = static_cast<uint64_t>(it.bytes + it.scale_bytes);
    if (shard_size.back() > 0 && shard_size.back() + need > static_cast<uint64_t>(o.shard_bytes))
      shard_size.push_back(0);
    it.shard = static_cast<int>(shard_size.size()) - 1;
    it.offset = shard_size.back();
    it.scale_offset = it.offset + it.bytes;
    shard_size.back() += need;
  }
  const int num_shards = static_cast<int>(shard_size.size());
  res.num_tensors = 0;

  ThreadPool pool(o.num_threads);
  json weight_map = json::object();
  for (int s = 0; s < num_shards; ++s) {
    const auto ts = std::chrono::steady_clock::now();
    const std::string name = shard_name(s, num_shards);
    const std::string path = (out / name).string();
    json header = json::object();
    header["__metadata__"] = {{"format", "pt"}};
    for (const Item& it : items) {
      if (it.shard != s) continue;
      header[it.spec.name] = {{"dtype", it.dtype()},
                              {"shape", it.disk_shape()},
                              {"data_offsets", {it.offset, it.offset + it.bytes}}};
      weight_map[it.spec.name] = name;
      ++res.num_tensors;
      if (it.has_scale()) {
        header[it.scale_name()] = {
            {"dtype", it.storage == Storage::kFp8 ? "F32" : "F8_E8M0"},
            {"shape", {it.scale_rows(), it.scale_cols()}},
            {"data_offsets", {it.scale_offset, it.scale_offset + it.scale_bytes}}};
        weight_map[it.scale_name()] = name;
        ++res.num_tensors;
      }
    }
    std::string h = header.dump();
    h.append((8 - h.size() % 8) % 8, ' ');
    const uint64_t data_start = 8 + h.size();
    const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    DI_CHECK(fd >= 0, ErrorCode::kNotFound, "cannot create '{}': {}", path, std::strerror(errno));
    try {
      const uint64_t len = h.size();
      uint8_t len_le[8];
      for (int b = 0; b < 8; ++b) len_le[b] = static_cast<uint8_t>(len >> (8 * b));
      pwrite_all(fd, len_le, 8, 0, path);
      pwrite_all(fd, h.data(), h.size(), 8, path);
      write_items(items, s, config, o.seed, pool, fd, data_start, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    DI_CHECK(::close(fd) == 0, ErrorCode::kInternal, "closing '{}' failed: {}", path,
             std::strerror(errno));
    res.bytes += static_cast<int64_t>(shard_size[s]);
    res.shards.push_back(name);
    const double secs = since(ts);
    log(fmt::format("  {} ({:.2f} GB) in {:.1f} s ({:.0f} MB/s)", name, shard_size[s] / 1e9, secs,
                    shard_size[s] / 1e6 / std::max(secs, 1e-9)));
  }

  json index = {{"metadata", {{"total_size", res.bytes}}}, {"weight_map", weight_map}};
  std::ofstream(out / "model.safetensors.index.json") << index.dump(2) << "\n";
  std::ofstream(out / "config.json") << config_json.dump(2) << "\n";
  res.tokenizer_note =
      copy_tokenizer(o.tokenizer_from, config.vocab_size, out, &res.tokenizer_copied);
  res.seconds = since(t0);
  return res;
}

}  // namespace deepinfer::bench
