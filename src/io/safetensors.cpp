#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/status.h"

namespace deepinfer {

namespace fs = std::filesystem;
using json = nlohmann::json;

int64_t SafetensorsTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string SafetensorsTensor::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

namespace {

// A JSON value as an unsigned 64-bit integer, or false (floats, negatives and non-numbers fail).
bool as_u64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

// Parses `text` as JSON, rejecting duplicate keys in the top-level object (nlohmann would keep
// the last silently, and a duplicated tensor name means a malformed header).
json parse_json_no_top_level_duplicates(const std::string& text, std::string* duplicate) {
  std::set<std::string> keys;
  auto cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!keys.insert(k).second && duplicate->empty()) *duplicate = k;
    }
    return true;
  };
  return json::parse(text, cb, /*allow_exceptions=*/true);
}

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  DI_CHECK(f->fd_ >= 0, errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
           "cannot open safetensors file '{}': {}", path, std::strerror(errno));
  struct stat st {};
  DI_CHECK(::fstat(f->fd_, &st) == 0, ErrorCode::kInvalidArgument, "cannot stat '{}': {}", path,
           std::strerror(errno));
  DI_CHECK(S_ISREG(st.st_mode), ErrorCode::kInvalidArgument,
           "safetensors path '{}' is not a regular file", path);
  f->size_ = static_cast<size_t>(st.st_size);
  DI_CHECK(f->size_ >= 8, ErrorCode::kCorrupt,
           "safetensors file '{}' is truncated: {} bytes, too small for the 8-byte header length",
           path, f->size_);
  void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, f->fd_, 0);
  DI_CHECK(p != MAP_FAILED, ErrorCode::kOutOfMemory, "cannot mmap '{}' ({} bytes): {}", path,
           f->size_, std::strerror(errno));
  f->base_ = static_cast<const uint8_t*>(p);
  f->parse_header();
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), size_);
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsFile::parse_header() {
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base_[i];  // little endian
  DI_CHECK(header_len <= size_ - 8, ErrorCode::kCorrupt,
           "safetensors file '{}' is truncated or corrupt: header length {} runs past the end of "
           "the file ({} bytes)",
           path_, header_len, size_);
  DI_CHECK(header_len >= 2, ErrorCode::kCorrupt,
           "safetensors file '{}' has a header length of {}, too short for a JSON object", path_,
           header_len);
  const std::string text(reinterpret_cast<const char*>(base_ + 8), header_len);
  json header;
  std::string duplicate;
  try {
    header = parse_json_no_top_level_duplicates(text, &duplicate);
  } catch (const json::exception& e) {
    fail(ErrorCode::kCorrupt, "safetensors file '{}' has an invalid JSON header: {}", path_,
         e.what());
  }
  DI_CHECK(header.is_object(), ErrorCode::kCorrupt,
           "safetensors file '{}': header is a JSON {}, expected an object", path_,
           header.type_name());
  DI_CHECK(duplicate.empty(), ErrorCode::kCorrupt,
           "safetensors file '{}': tensor '{}' appears twice in the header", path_, duplicate);

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size_ - data_start;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      DI_CHECK(entry.is_object(), ErrorCode::kCorrupt,
               "safetensors file '{}': __metadata__ must be an object of strings", path_);
      for (const auto& [k, v] : entry.items()) {
        DI_CHECK(v.is_string(), ErrorCode::kCorrupt,
                 "safetensors file '{}': __metadata__ entry '{}' is not a string", path_, k);
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    DI_CHECK(entry.is_object(), ErrorCode::kCorrupt,
             "safetensors file '{}': header entry for tensor '{}' is not an object", path_, name);
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      DI_CHECK(entry.contains(key), ErrorCode::kCorrupt,
               "safetensors file '{}': tensor '{}' lacks '{}'", path_, name, key);
    }
    SafetensorsTensor t;
    t.name = name;
    const json& jd = entry["dtype"];
    DI_CHECK(jd.is_string(), ErrorCode::kCorrupt,
             "safetensors file '{}': tensor '{}' has a non-string dtype", path_, name);
    t.dtype_name = jd.get<std::string>();
    DI_CHECK(dtype_from_safetensors(t.dtype_name, &t.dtype), ErrorCode::kUnsupported,
             "safetensors file '{}': tensor '{}' has unknown dtype '{}'", path_, name,
             t.dtype_name);

    const json& js = entry["shape"];
    DI_CHECK(js.is_array(), ErrorCode::kCorrupt,
             "safetensors file '{}': tensor '{}' has a shape that is not an array", path_, name);
    uint64_t numel = 1;
    for (const json& d : js) {
      uint64_t v = 0;
      DI_CHECK(as_u64(d, &v), ErrorCode::kCorrupt,
               "safetensors file '{}': tensor '{}' has shape entry {} that is not a non-negative "
               "integer",
               path_, name, d.dump());
      DI_CHECK(!__builtin_mul_overflow(numel, v, &numel) && numel < (uint64_t{1} << 58),
               ErrorCode::kCorrupt, "safetensors file '{}': tensor '{}' has an absurd shape {}",
               path_, name, js.dump());
      t.shape.push_back(static_cast<int64_t>(v));
    }

    const json& jo = entry["data_offsets"];
    DI_CHECK(jo.is_array() && jo.size() == 2 && as_u64(jo[0], &t.data_begin) &&
                 as_u64(jo[1], &t.data_end),
             ErrorCode::kCorrupt,
             "safetensors file '{}': tensor '{}' has data_offsets {}, expected [begin, end] of "
             "non-negative integers",
             path_, name, jo.dump());
    DI_CHECK(t.data_begin <= t.data_end, ErrorCode::kCorrupt,
             "safetensors file '{}': tensor '{}' has data_offsets [{}, {}] with begin > end", path_,
             name, t.data_begin, t.data_end);
    DI_CHECK(t.data_end <= data_size, ErrorCode::kCorrupt,
             "safetensors file '{}': tensor '{}' has data_offsets [{}, {}] past the end of the "
             "data section ({} bytes); the file is truncated or corrupt",
             path_, name, t.data_begin, t.data_end, data_size);
    const size_t expected = storage_bytes(t.dtype, static_cast<int64_t>(numel));
    DI_CHECK(t.nbytes() == expected, ErrorCode::kCorrupt,
             "safetensors file '{}': tensor '{}' ({} {}) occupies {} bytes, expected {}", path_,
             name, t.dtype_name, t.shape_str(), t.nbytes(), expected);
    t.data = base_ + data_start + t.data_begin;
    tensors_.emplace(name, std::move(t));
  }

  // Tensors must not share bytes (empty tensors occupy none).
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& [name, t] : tensors_)
    if (t.nbytes() > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->data_begin < b->data_begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    const auto* cur = by_offset[i];
    DI_CHECK(cur->data_begin >= prev->data_end, ErrorCode::kCorrupt,
             "safetensors file '{}': tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", path_,
             prev->name, prev->data_begin, prev->data_end, cur->name, cur->data_begin,
             cur->data_end);
  }
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const SafetensorsTensor& SafetensorsFile::get(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  DI_CHECK(t != nullptr, ErrorCode::kNotFound, "tensor '{}' not found in safetensors file '{}'",
           name, path_);
  return *t;
}

// ---- checkpoint directories ----

namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DI_CHECK(in.good(), ErrorCode::kNotFound, "cannot read '{}'", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Shard names come from a file we do not trust: keep them inside the checkpoint directory.
bool is_plain_relative(const std::string& shard) {
  const fs::path p(shard);
  if (shard.empty() || p.is_absolute()) return false;
  for (const auto& part : p)
    if (part == "..") return false;
  return true;
}

}  // namespace

std::unique_ptr<SafetensorsCheckpoint> SafetensorsCheckpoint::open(const std::string& dir) {
  auto ckpt = std::make_unique<SafetensorsCheckpoint>();
  ckpt->dir_ = dir;
  const auto open_single = [&](const std::string& path) {
    ckpt->source_ = path;
    ckpt->files_.push_back(SafetensorsFile::open(path));
    const SafetensorsFile* f = ckpt->files_.back().get();
    for (const auto& [name, t] : f->tensors()) ckpt->tensors_.emplace(name, Ref{f, &t});
    return std::move(ckpt);
  };
  std::error_code ec;
  if (fs::is_regular_file(dir, ec) && dir.ends_with(".safetensors")) {
    ckpt->dir_ = fs::path(dir).parent_path().string();
    return open_single(dir);
  }
  DI_CHECK(fs::is_directory(dir, ec), ErrorCode::kNotFound,
           "checkpoint directory '{}' does not exist", dir);
  const std::string index_path = (fs::path(dir) / kIndexFile).string();
  const std::string single_path = (fs::path(dir) / kSingleFile).string();

  if (!fs::exists(index_path, ec)) {
    DI_CHECK(fs::exists(single_path, ec), ErrorCode::kNotFound,
             "checkpoint directory '{}' has neither {} nor {}", dir, kSingleFile, kIndexFile);
    return open_single(single_path);
  }

  ckpt->source_ = index_path;
  json index;
  try {
    index = json::parse(read_text_file(index_path));
  } catch (const json::exception& e) {
    fail(ErrorCode::kCorrupt, "index '{}' is not valid JSON: {}", index_path, e.what());
  }
  DI_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
           ErrorCode::kCorrupt, "index '{}' lacks a 'weight_map' object", index_path);
  std::map<std::string, const SafetensorsFile*> shards;
  for (const auto& [name, jshard] : index["weight_map"].items()) {
    DI_CHECK(jshard.is_string(), ErrorCode::kCorrupt,
             "index '{}': weight_map entry for tensor '{}' is not a file name", index_path, name);
    const std::string shard = jshard.get<std::string>();
    DI_CHECK(is_plain_relative(shard), ErrorCode::kCorrupt,
             "index '{}': tensor '{}' maps to shard '{}' outside the checkpoint directory",
             index_path, name, shard);
    auto it = shards.find(shard);
    if (it == shards.end()) {
      const std::string shard_path = (fs::path(dir) / shard).string();
      DI_CHECK(fs::exists(shard_path, ec), ErrorCode::kNotFound,
               "shard '{}' (named for tensor '{}' in index '{}') does not exist", shard_path, name,
               index_path);
      ckpt->files_.push_back(SafetensorsFile::open(shard_path));
      it = shards.emplace(shard, ckpt->files_.back().get()).first;
    }
    const SafetensorsTensor* t = it->second->find(name);
    DI_CHECK(t != nullptr, ErrorCode::kCorrupt,
             "tensor '{}' is listed in index '{}' under shard '{}', but that shard lacks it", name,
             index_path, it->second->path());
    ckpt->tensors_.emplace(name, Ref{it->second, t});
  }
  return ckpt;
}

const SafetensorsCheckpoint::Ref* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace deepinfer
