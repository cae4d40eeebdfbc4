#include "io/weights.h"

#include <cstring>
#include <limits>

#include "core/status.h"
#include "io/dequant.h"
#include "io/safetensors.h"
#include "io/weight_names.h"

namespace deepinfer {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

struct Source {
  std::string disk_name;
  const SafetensorsFile* file = nullptr;
  const SafetensorsTensor* t = nullptr;
  std::string where() const { return fmt::format("'{}' in file '{}'", disk_name, file->path()); }
};

enum class Quant { kNone, kFp8Block, kMxfp4 };

struct Entry {
  explicit Entry(Source source) : w(std::move(source)) {}
  Source w;
  Source scale;  // scale.t == nullptr: not quantised
  Quant quant = Quant::kNone;
  // Slice of a fused [E, R, C] expert tensor: matrix `expert`, rows [row_begin, row_end).
  bool fused = false;
  int64_t expert = 0, row_begin = 0, row_end = 0;
  std::vector<int64_t> shape;  // what get_f32 returns
};

bool is_integer_dtype(DType t) {
  return t == DType::kI64 || t == DType::kI32 || t == DType::kI8 || t == DType::kU8 ||
         t == DType::kBool;
}

// convert_to_f32 reads whole elements; mapped checkpoint bytes need not be aligned for them.
void convert_unaligned(DType dtype, const uint8_t* src, float* out, int64_t n) {
  const size_t align = std::max<size_t>(1, dtype_size_bits(dtype) / 8);
  if (reinterpret_cast<uintptr_t>(src) % align == 0) {
    convert_to_f32(dtype, src, out, n);
    return;
  }
  const size_t bytes = storage_bytes(dtype, n);
  std::vector<uint64_t> tmp((bytes + 7) / 8);
  std::memcpy(tmp.data(), src, bytes);
  convert_to_f32(dtype, tmp.data(), out, n);
}

}  // namespace

struct WeightStore::Impl {
  std::unique_ptr<SafetensorsCheckpoint> ckpt;
  std::map<std::string, Entry> entries;

  void add(const std::string& canonical, Entry e);
  void attach_scale(const std::string& canonical, Entry& e, const Source& scale);
  void finalize(const std::string& canonical, Entry& e);
  const Entry& lookup(const std::string& canonical) const;
  void check_shape(const std::string& canonical, const Entry& e,
                   const std::vector<int64_t>& expected) const;
  void read_f32(const Entry& e, float* out) const;
};

void WeightStore::Impl::add(const std::string& canonical, Entry e) {
  auto it = entries.find(canonical);
  DI_CHECK(it == entries.end(), ErrorCode::kCorrupt,
           "checkpoint '{}': tensors {} and {} both map to canonical name '{}' (two spellings of "
           "one weight)",
           ckpt->dir(), it->second.w.where(), e.w.where(), canonical);
  entries.emplace(canonical, std::move(e));
}

void WeightStore::Impl::attach_scale(const std::string& canonical, Entry& e, const Source& scale) {
  DI_CHECK(e.scale.t == nullptr, ErrorCode::kCorrupt,
           "checkpoint '{}': weight '{}' has two scale tensors, {} and {}", ckpt->dir(), canonical,
           e.scale.where(), scale.where());
  e.scale = scale;
}

// Decides how a tensor is read and what shape it has; validates weight/scale pairs once, at
// open, so a bad checkpoint fails before any weight is used.
void WeightStore::Impl::finalize(const std::string& canonical, Entry& e) {
  const SafetensorsTensor& w = *e.w.t;
  const int want_ndim = e.fused ? 3 : 2;
  if (e.scale.t == nullptr) {
    if (!e.fused) {
      e.shape = w.shape;
    } else {
      e.shape = {e.row_end - e.row_begin, w.shape[2]};
      DI_CHECK(w.dtype != DType::kFP4E2M1 || w.shape[2] % 2 == 0, ErrorCode::kUnsupported,
               "fused fp4 tensor {} has an odd row length {}", e.w.where(), w.shape[2]);
    }
    return;
  }
  const SafetensorsTensor& s = *e.scale.t;
  if (w.dtype == DType::kF8E4M3) {
    e.quant = Quant::kFp8Block;
  } else if (w.dtype == DType::kI8 || w.dtype == DType::kU8 || w.dtype == DType::kFP4E2M1) {
    e.quant = Quant::kMxfp4;
  } else {
    fail(ErrorCode::kUnsupported,
         "weight {} has dtype {} but comes with scale tensor {}; only F8_E4M3 (block scales) and "
         "packed fp4 (I8/U8/F4 with e8m0 scales) are quantised formats",
         e.w.where(), w.dtype_name, e.scale.where());
  }
  DI_CHECK(static_cast<int>(w.shape.size()) == want_ndim, ErrorCode::kUnsupported,
           "quantised weight {} has shape {}; only {}-D {} are supported", e.w.where(),
           w.shape_str(), want_ndim, e.fused ? "fused expert tensors" : "matrices");
  const int64_t total_rows = w.shape[want_ndim - 2];
  const int64_t stored_cols = w.shape[want_ndim - 1];
  const bool packed = e.quant == Quant::kMxfp4 && w.dtype != DType::kFP4E2M1;
  const int64_t cols = packed ? 2 * stored_cols : stored_cols;
  DI_CHECK(e.quant != Quant::kMxfp4 || cols % 2 == 0, ErrorCode::kCorrupt,
           "fp4 weight {} has an odd row length {}", e.w.where(), cols);

  std::vector<int64_t> want_scale;
  if (e.fused) want_scale.push_back(w.shape[0]);
  if (e.quant == Quant::kFp8Block) {
    DI_CHECK(is_fp8_scale_dtype(s.dtype), ErrorCode::kCorrupt,
             "scale tensor {} for FP8 weight {} has dtype {}, expected F32, BF16, F16 or F8_E8M0",
             e.scale.where(), e.w.where(), s.dtype_name);
    want_scale.push_back(ceil_div(total_rows, kFp8BlockSize));
    want_scale.push_back(ceil_div(cols, kFp8BlockSize));
  } else {
    DI_CHECK(s.dtype == DType::kE8M0 || s.dtype == DType::kU8, ErrorCode::kCorrupt,
             "scale tensor {} for MXFP4 weight {} has dtype {}, expected F8_E8M0 (or U8)",
             e.scale.where(), e.w.where(), s.dtype_name);
    want_scale.push_back(total_rows);
    want_scale.push_back(ceil_div(cols, kMxfp4BlockSize));
  }
  DI_CHECK(s.shape == want_scale, ErrorCode::kCorrupt,
           "scale tensor {} has shape {}, expected {} for weight {} ({} {})", e.scale.where(),
           s.shape_str(), shape_str(want_scale), e.w.where(), w.dtype_name, w.shape_str());
  if (e.fused) {
    e.shape = {e.row_end - e.row_begin, cols};
  } else {
    e.shape = {total_rows, cols};
  }
  (void)canonical;
}

const Entry& WeightStore::Impl::lookup(const std::string& canonical) const {
  auto it = entries.find(canonical);
  DI_CHECK(it != entries.end(), ErrorCode::kNotFound, "tensor '{}' not found in checkpoint '{}'",
           canonical, ckpt->source());
  return it->second;
}

void WeightStore::Impl::check_shape(const std::string& canonical, const Entry& e,
                                    const std::vector<int64_t>& expected) const {
  if (e.shape == expected) return;
  if (e.fused) {
    fail(ErrorCode::kCorrupt,
         "tensor '{}' (expert {} rows [{}, {}) of {} {}) has shape {}, expected {}", canonical,
         e.expert, e.row_begin, e.row_end, e.w.where(), e.w.t->shape_str(), shape_str(e.shape),
         shape_str(expected));
  }
  fail(ErrorCode::kCorrupt, "tensor {} has shape {}, expected {} (canonical name '{}')",
       e.w.where(), shape_str(e.shape), shape_str(expected), canonical);
}

void WeightStore::Impl::read_f32(const Entry& e, float* out) const {
  const SafetensorsTensor& w = *e.w.t;
  const int64_t rows = e.fused || e.quant != Quant::kNone ? e.shape[0] : 0;
  const int64_t cols = e.fused || e.quant != Quant::kNone ? e.shape[1] : 0;
  // Index of the first row read within the stored tensor (fused: counts earlier experts' rows).
  const int64_t first_row = e.fused ? e.expert * w.shape[1] + e.row_begin : 0;
  switch (e.quant) {
    case Quant::kNone: {
      int64_t n = 1;
      for (int64_t d : e.shape) n *= d;
      const size_t offset = storage_bytes(w.dtype, first_row * cols);
      convert_unaligned(w.dtype, w.data + offset, out, n);
      return;
    }
    case Quant::kFp8Block: {
      const SafetensorsTensor& s = *e.scale.t;
      const int64_t scale_cols = s.shape.back();
      const int64_t scale_per_expert = s.shape[s.shape.size() - 2] * scale_cols;
      const size_t scale_offset = storage_bytes(s.dtype, e.expert * scale_per_expert);
      dequant_fp8_block(w.data + first_row * cols, rows, cols, e.row_begin, s.data + scale_offset,
                        s.dtype, scale_cols, out);
      return;
    }
    case Quant::kMxfp4: {
      const SafetensorsTensor& s = *e.scale.t;
      const int64_t scale_cols = s.shape.back();
      dequant_mxfp4(w.data + first_row * (cols / 2), rows, cols, s.data + first_row * scale_cols,
                    scale_cols, out);
      return;
    }
  }
}

WeightStore::WeightStore() : impl_(std::make_unique<Impl>()) {}
WeightStore::~WeightStore() = default;

std::unique_ptr<WeightStore> WeightStore::open(const std::string& dir) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  Impl& im = *store->impl_;
  im.ckpt = SafetensorsCheckpoint::open(dir);

  // Fused tensors expand to per-expert entries; remember them so fused scales can follow.
  std::map<std::pair<std::string, WeightNameKind>, std::vector<std::string>> fused_entries;
  std::vector<std::pair<CanonicalWeightName, Source>> scales;
  for (const auto& [disk_name, ref] : im.ckpt->tensors()) {
    const Source src{disk_name, ref.file, ref.tensor};
    CanonicalWeightName c = canonicalize_weight_name(disk_name);
    if (c.is_scale) {
      scales.emplace_back(std::move(c), src);
      continue;
    }
    if (c.kind == WeightNameKind::kPlain) {
      im.add(c.name, Entry{src});
      continue;
    }
    const auto& shape = ref.tensor->shape;
    const bool gate_up = c.kind == WeightNameKind::kFusedGateUp;
    DI_CHECK(shape.size() == 3 && (!gate_up || shape[1] % 2 == 0), ErrorCode::kCorrupt,
             "fused expert tensor {} has shape {}, expected {}", src.where(),
             ref.tensor->shape_str(),
             gate_up ? "[experts, 2 * intermediate, hidden]" : "[experts, hidden, intermediate]");
    auto& names = fused_entries[{c.name, c.kind}];
    for (int64_t expert = 0; expert < shape[0]; ++expert) {
      const int64_t half = gate_up ? shape[1] / 2 : shape[1];
      // gate_up rows [0, I) are w1 (gate), [I, 2I) are w3 (up); down_proj is w2.
      for (int part = 0; part < (gate_up ? 2 : 1); ++part) {
        Entry e{src};
        e.fused = true;
        e.expert = expert;
        e.row_begin = part * half;
        e.row_end = e.row_begin + half;
        const std::string name = expert_weight_name(c.layer, expert, gate_up ? 1 + 2 * part : 2);
        im.add(name, std::move(e));
        names.push_back(name);
      }
    }
  }

  for (const auto& [c, src] : scales) {
    if (c.kind != WeightNameKind::kPlain) {
      auto it = fused_entries.find({c.name, c.kind});
      DI_CHECK(it != fused_entries.end(), ErrorCode::kCorrupt,
               "scale tensor {} has no fused expert weight to scale", src.where());
      for (const std::string& name : it->second) im.attach_scale(name, im.entries.at(name), src);
      continue;
    }
    auto it = im.entries.find(c.name);
    if (it != im.entries.end() && !it->second.fused) {
      im.attach_scale(c.name, it->second, src);
    } else {
      // No weight beside it: an ordinary tensor that happens to be called "*.scale".
      std::string_view plain = src.disk_name;
      if (plain.starts_with("model.")) plain.remove_prefix(6);
      im.add(std::string(plain), Entry{src});
    }
  }
  for (auto& [name, e] : im.entries) im.finalize(name, e);
  return store;
}

bool WeightStore::has(const std::string& canonical_name) const {
  return impl_->entries.count(canonical_name) != 0;
}

Tensor WeightStore::get_f32(const std::string& canonical_name,
                            std::initializer_list<int64_t> shape) const {
  return get_f32(canonical_name, std::vector<int64_t>(shape));
}

Tensor WeightStore::get_i32(const std::string& canonical_name,
                            std::initializer_list<int64_t> shape) const {
  return get_i32(canonical_name, std::vector<int64_t>(shape));
}

Tensor WeightStore::get_f32(const std::string& canonical_name,
                            const std::vector<int64_t>& shape) const {
  const Entry& e = impl_->lookup(canonical_name);
  impl_->check_shape(canonical_name, e, shape);
  Tensor out = Tensor::empty(shape.data(), static_cast<int>(shape.size()), DType::kF32);
  impl_->read_f32(e, out.data_as<float>());
  return out;
}

Tensor WeightStore::get_i32(const std::string& canonical_name,
                            const std::vector<int64_t>& shape) const {
  const Entry& e = impl_->lookup(canonical_name);
  impl_->check_shape(canonical_name, e, shape);
  const SafetensorsTensor& w = *e.w.t;
  DI_CHECK(is_integer_dtype(w.dtype) && e.quant == Quant::kNone && !e.fused, ErrorCode::kCorrupt,
           "tensor {} has dtype {}, expected an integer dtype (canonical name '{}')", e.w.where(),
           w.dtype_name, canonical_name);
  Tensor out = Tensor::empty(shape.data(), static_cast<int>(shape.size()), DType::kI32);
  int32_t* dst = out.data_as<int32_t>();
  const int64_t n = out.numel();
  const size_t elem = dtype_size_bits(w.dtype) / 8;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = w.data + i * elem;
    int64_t v = 0;
    switch (w.dtype) {
      case DType::kI64:
        std::memcpy(&v, p, 8);
        break;
      case DType::kI32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        v = x;
        break;
      }
      case DType::kI8:
        v = static_cast<int8_t>(*p);
        break;
      default:
        v = *p;
        break;  // U8, BOOL
    }
    DI_CHECK(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
             ErrorCode::kCorrupt, "tensor {} holds {} at flat index {}, outside the int32 range",
             e.w.where(), v, i);
    dst[i] = static_cast<int32_t>(v);
  }
  return out;
}

bool WeightStore::get_mxfp4(const std::string& canonical_name, const std::vector<int64_t>& shape,
                            uint8_t* packed, uint8_t* scales) const {
  const Entry& e = impl_->lookup(canonical_name);
  impl_->check_shape(canonical_name, e, shape);
  if (e.quant != Quant::kMxfp4 || shape.size() != 2 || shape[1] % kMxfp4BlockSize != 0)
    return false;
  const int64_t rows = shape[0], cols = shape[1], scale_cols = cols / kMxfp4BlockSize;
  // The first row within the stored tensor (fused: counts the earlier experts' rows).
  const int64_t first_row = e.fused ? e.expert * e.w.t->shape[1] + e.row_begin : 0;
  std::memcpy(packed, e.w.t->data + first_row * (cols / 2), rows * (cols / 2));
  std::memcpy(scales, e.scale.t->data + first_row * scale_cols, rows * scale_cols);
  return true;
}

std::vector<std::string> WeightStore::canonical_names() const {
  std::vector<std::string> names;
  names.reserve(impl_->entries.size());
  for (const auto& [name, e] : impl_->entries) names.push_back(name);
  return names;
}

std::vector<int64_t> WeightStore::shape(const std::string& canonical_name) const {
  return impl_->lookup(canonical_name).shape;
}

std::string WeightStore::describe(const std::string& canonical_name) const {
  const Entry& e = impl_->lookup(canonical_name);
  if (e.fused) return fmt::format("expert {} of {}", e.expert, e.w.where());
  return e.w.where();
}

const std::string& WeightStore::dir() const {
  return impl_->ckpt->dir();
}

}  // namespace deepinfer
