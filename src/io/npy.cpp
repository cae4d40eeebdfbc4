#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "core/status.h"

namespace deepinfer {

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  std::string dims;
  int64_t n = 1;
  for (int64_t d : shape) {
    dims += fmt::format("{}, ", d);
    n *= d;
  }
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
  // Magic (6) + version (2) + length (2) + header + '\n' padded to a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  DI_CHECK(f.good(), ErrorCode::kNotFound, "cannot open '{}' for writing", path);
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  f.write(magic, 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f.write(header.data(), header.size());
  f.write(reinterpret_cast<const char*>(data), n * sizeof(float));
  DI_CHECK(f.good(), ErrorCode::kInternal, "writing '{}' failed", path);
}

NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  DI_CHECK(f.good(), ErrorCode::kNotFound, "cannot open '{}'", path);
  char magic[8];
  f.read(magic, 8);
  DI_CHECK(f.good() && std::memcmp(magic, "\x93NUMPY", 6) == 0, ErrorCode::kCorrupt,
           "'{}' is not a .npy file", path);
  uint32_t hlen = 0;
  if (magic[6] == 1) {
    uint16_t l;
    f.read(reinterpret_cast<char*>(&l), 2);
    hlen = l;
  } else {
    f.read(reinterpret_cast<char*>(&hlen), 4);
  }
  std::string header(hlen, '\0');
  f.read(header.data(), hlen);
  DI_CHECK(f.good(), ErrorCode::kCorrupt, "'{}': truncated header", path);
  std::smatch m;
  DI_CHECK(std::regex_search(header, m, std::regex("'descr':\\s*'([<|][fi][48])'")),
           ErrorCode::kUnsupported, "'{}': unsupported dtype in header {}", path, header);
  const std::string descr = m[1];
  DI_CHECK(header.find("'fortran_order': False") != std::string::npos, ErrorCode::kUnsupported,
           "'{}': fortran order is not supported", path);
  DI_CHECK(std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)")),
           ErrorCode::kCorrupt, "'{}': no shape in header", path);
  NpyArray out;
  const std::string dims = m[1];
  static const std::regex kNumber("\\d+");
  std::sregex_iterator it(dims.begin(), dims.end(), kNumber), end;
  int64_t n = 1;
  for (; it != end; ++it) {
    out.shape.push_back(std::stoll(it->str()));
    n *= out.shape.back();
  }
  const size_t esize = descr[2] - '0';
  std::vector<char> raw(n * esize);
  f.read(raw.data(), raw.size());
  DI_CHECK(f.gcount() == static_cast<std::streamsize>(raw.size()), ErrorCode::kCorrupt,
           "'{}': truncated data ({} of {} bytes)", path, f.gcount(), raw.size());
  out.data.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const char* p = raw.data() + i * esize;
    if (descr[1] == 'f' && esize == 4) {
      float v;
      std::memcpy(&v, p, 4);
      out.data[i] = v;
    } else if (descr[1] == 'f') {
      double v;
      std::memcpy(&v, p, 8);
      out.data[i] = static_cast<float>(v);
    } else if (esize == 4) {
      int32_t v;
      std::memcpy(&v, p, 4);
      out.data[i] = static_cast<float>(v);
    } else {
      int64_t v;
      std::memcpy(&v, p, 8);
      out.data[i] = static_cast<float>(v);
    }
  }
  return out;
}

}  // namespace deepinfer
