// Test helpers for io/: a tiny safetensors writer, temporary directories and error matchers.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer::testing {

struct TestTensor {
  std::string name;
  std::string dtype;  // safetensors dtype string
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

TestTensor raw_tensor(std::string name, std::string dtype, std::vector<int64_t> shape,
                      std::vector<uint8_t> bytes);
TestTensor f32_tensor(std::string name, std::vector<int64_t> shape,
                      const std::vector<float>& values);
// Values are rounded to bf16.
TestTensor bf16_tensor(std::string name, std::vector<int64_t> shape,
                       const std::vector<float>& values);
TestTensor i64_tensor(std::string name, std::vector<int64_t> shape,
                      const std::vector<int64_t>& values);
// A bf16 tensor filled with distinct values derived from `seed` (see pattern_value).
TestTensor pattern_bf16(std::string name, std::vector<int64_t> shape, int seed);
float pattern_value(int seed, int64_t i);  // exactly representable in bf16

// The bytes of a safetensors file holding `tensors` back to back, in order.
std::string safetensors_bytes(const std::vector<TestTensor>& tensors);
// 8-byte little-endian length + `header` + `data`: for hand-made malformed files.
std::string raw_file(const std::string& header, const std::string& data);
void write_file(const std::filesystem::path& path, const std::string& bytes);

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

std::string golden_dir(const std::string& name);  // tests/data/golden/<name>

// Runs fn, expecting an Error with `code` whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn&& fn, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error (" << error_code_name(code) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(error_code_name(e.code()), std::string(error_code_name(code))) << e.what();
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message lacks '" << p << "': " << e.what();
  }
}

}  // namespace deepinfer::testing
