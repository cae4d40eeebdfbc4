// NumPy .npy files (format 1.0, little-endian, C order): fp32 and int32/int64 arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace deepinfer {

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // converted to fp32
};
// Reads '<f4', '<f8', '<i4', '<i8' arrays; errors name the file and the problem.
NpyArray read_npy(const std::string& path);

}  // namespace deepinfer
