#include "test_util.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace deepinfer::testing {

TestTensor raw_tensor(std::string name, std::string dtype, std::vector<int64_t> shape,
                      std::vector<uint8_t> bytes) {
  return TestTensor{std::move(name), std::move(dtype), std::move(shape), std::move(bytes)};
}

TestTensor f32_tensor(std::string name, std::vector<int64_t> shape,
                      const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return raw_tensor(std::move(name), "F32", std::move(shape), std::move(bytes));
}

TestTensor bf16_tensor(std::string name, std::vector<int64_t> shape,
                       const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t v = f32_to_bf16(values[i]);
    std::memcpy(bytes.data() + 2 * i, &v, 2);
  }
  return raw_tensor(std::move(name), "BF16", std::move(shape), std::move(bytes));
}

TestTensor i64_tensor(std::string name, std::vector<int64_t> shape,
                      const std::vector<int64_t>& values) {
  std::vector<uint8_t> bytes(values.size() * 8);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return raw_tensor(std::move(name), "I64", std::move(shape), std::move(bytes));
}

float pattern_value(int seed, int64_t i) {
  // Small multiples of 1/64 (exact in bf16), varied by seed and position, never all zero.
  return static_cast<float>(((seed * 131 + i * 17) % 199) - 99) / 64.0f;
}

TestTensor pattern_bf16(std::string name, std::vector<int64_t> shape, int seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = pattern_value(seed, i);
  return bf16_tensor(std::move(name), std::move(shape), v);
}

std::string raw_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string safetensors_bytes(const std::vector<TestTensor>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';  // the format pads the header with spaces to align data
  return raw_file(h, data);
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "deepinfer_io_XXXXXX").string();
  char* p = ::mkdtemp(tmpl.data());
  if (p == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string golden_dir(const std::string& name) {
  return std::string(DEEPINFER_SOURCE_DIR) + "/tests/data/golden/" + name;
}

}  // namespace deepinfer::testing
