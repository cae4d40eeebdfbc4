// Safetensors files, memory-mapped: opening a file parses and validates its header only; tensor
// bytes stay in the page cache until a reader touches them. A checkpoint directory is either one
// model.safetensors or model.safetensors.index.json plus the shards its weight_map names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace deepinfer {

// One tensor's header entry, with its bytes located inside the mapping.
struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;  // as written in the header ("BF16", "F8_E4M3", ...)
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t data_begin = 0;  // offsets relative to the data section, as in the header
  uint64_t data_end = 0;
  const uint8_t* data = nullptr;  // points into the mapping; valid while the file lives

  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(data_end - data_begin); }
  std::string shape_str() const;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws Error naming the file (and tensor) on any defect.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  // Tensors by name (sorted).
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  // Like find, but throws kNotFound naming the tensor and this file.
  const SafetensorsTensor& get(const std::string& name) const;
  // The optional "__metadata__" string map.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void parse_header();

  std::string path_;
  int fd_ = -1;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint directory: every tensor by its on-disk name, wherever it lives.
class SafetensorsCheckpoint {
 public:
  struct Ref {
    const SafetensorsFile* file;
    const SafetensorsTensor* tensor;
  };

  static constexpr const char* kSingleFile = "model.safetensors";
  static constexpr const char* kIndexFile = "model.safetensors.index.json";

  // Uses the index when present, else model.safetensors; throws kNotFound when neither exists.
  // A path to one .safetensors file opens just that file.
  static std::unique_ptr<SafetensorsCheckpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // "model.safetensors" or the index file: what to name in errors about the whole checkpoint.
  const std::string& source() const { return source_; }
  const std::map<std::string, Ref>& tensors() const { return tensors_; }
  const Ref* find(const std::string& name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::string dir_;
  std::string source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Ref> tensors_;
};

}  // namespace deepinfer
