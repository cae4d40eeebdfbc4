// Random tiny checkpoints shared by the bench tests, written once per process into the build
// tree. ctest runs test cases of one executable as concurrent processes, so every directory is
// the process's own (its pid in the name; removed at exit): a shared one was rewritten by one
// process while another read it.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "bench/random_checkpoint.h"

namespace deepinfer::bench::testing {

inline std::string bundled_model_dir() {
  return std::string(DEEPINFER_SOURCE_DIR) + "/models/deepseek-v4-tiny-en";
}

// Removes this process's scratch directories when it exits.
struct ScratchDirs {
  std::vector<std::filesystem::path> dirs;
  ~ScratchDirs() {
    std::error_code ec;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};

inline std::string scratch_dir(const std::string& name) {
  static ScratchDirs owned;
  const auto dir = std::filesystem::path(DEEPINFER_BINARY_DIR) / "bench_test_tmp" /
                   (name + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  owned.dirs.push_back(dir);
  return dir.string();
}

// The tiny preset with `layers` layers in `dtype`, seed 7, written on first use.
inline const std::string& tiny_checkpoint(CheckpointDtype dtype, int layers) {
  static std::map<std::pair<int, int>, std::string> cache;
  const auto key = std::make_pair(static_cast<int>(dtype), layers);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  RandomCheckpointOptions o;
  o.preset.preset = "tiny";
  o.preset.num_layers = layers;
  o.dtype = dtype;
  o.seed = 7;
  o.out_dir = scratch_dir(std::string("tiny-") + checkpoint_dtype_name(dtype) + "-" +
                          std::to_string(layers));
  o.tokenizer_from = bundled_model_dir();
  write_random_checkpoint(o);
  return cache.emplace(key, o.out_dir).first->second;
}

}  // namespace deepinfer::bench::testing
