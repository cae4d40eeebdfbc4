#include "core/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/status.h"

namespace deepinfer {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kCorrupt:
      return "corrupt input";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kOutOfMemory:
      return "out of memory";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "error";
}

size_t dtype_size_bits(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kI32:
      return 32;
    case DType::kF16:
    case DType::kBF16:
      return 16;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
    case DType::kF8E4M3:
    case DType::kE8M0:
      return 8;
    case DType::kI64:
      return 64;
    case DType::kFP4E2M1:
      return 4;
  }
  return 0;
}

size_t storage_bytes(DType t, int64_t numel) {
  return (static_cast<size_t>(numel) * dtype_size_bits(t) + 7) / 8;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI8:
      return "i8";
    case DType::kU8:
      return "u8";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kBool:
      return "bool";
    case DType::kF8E4M3:
      return "f8_e4m3";
    case DType::kE8M0:
      return "e8m0";
    case DType::kFP4E2M1:
      return "fp4_e2m1";
  }
  return "?";
}

bool dtype_from_safetensors(std::string_view s, DType* out) {
  static constexpr std::pair<std::string_view, DType> kNames[] = {
      {"F32", DType::kF32},      {"F16", DType::kF16},    {"BF16", DType::kBF16},
      {"I8", DType::kI8},        {"U8", DType::kU8},      {"I32", DType::kI32},
      {"I64", DType::kI64},      {"BOOL", DType::kBool},  {"F8_E4M3", DType::kF8E4M3},
      {"F8_E8M0", DType::kE8M0}, {"F4", DType::kFP4E2M1},
  };
  for (const auto& [name, t] : kNames) {
    if (name == s) {
      *out = t;
      return true;
    }
  }
  return false;
}

float bf16_to_f32(uint16_t v) {
  return std::bit_cast<float>(static_cast<uint32_t>(v) << 16);
}

uint16_t f32_to_bf16(float v) {
  uint32_t u = std::bit_cast<uint32_t>(v);
  if (std::isnan(v)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep quiet NaN
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t v) {
  return static_cast<float>(std::bit_cast<_Float16>(v));
}
uint16_t f32_to_f16(float v) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(v));
}

namespace {

// Positive values of a small float format indexed by code; used for exact nearest-even rounding.
template <int kCodes>
uint8_t round_to_code(float a, const std::array<float, kCodes>& table) {
  // table is increasing; a >= 0 and <= table.back().
  int lo = 0;
  while (lo + 1 < kCodes && table[lo + 1] <= a) ++lo;
  if (table[lo] == a || lo + 1 == kCodes) return static_cast<uint8_t>(lo);
  float dlo = a - table[lo], dhi = table[lo + 1] - a;
  if (dlo < dhi) return static_cast<uint8_t>(lo);
  if (dhi < dlo) return static_cast<uint8_t>(lo + 1);
  return static_cast<uint8_t>((lo & 1) ? lo + 1 : lo);  // tie: even code
}

std::array<float, 127> make_e4m3_table() {
  std::array<float, 127> t{};
  for (int c = 0; c < 127; ++c) t[c] = e4m3_to_f32(static_cast<uint8_t>(c));
  return t;
}

std::array<float, 8> make_e2m1_table() {
  std::array<float, 8> t{};
  for (int c = 0; c < 8; ++c) t[c] = e2m1_to_f32(static_cast<uint8_t>(c));
  return t;
}

}  // namespace

float e4m3_to_f32(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 0xF, man = v & 0x7;
  float r;
  if (exp == 0xF && man == 0x7) {
    r = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    r = std::ldexp(static_cast<float>(man), -9);
  } else {
    r = std::ldexp(1.0f + man / 8.0f, exp - 7);
  }
  return sign ? -r : r;
}

uint8_t f32_to_e4m3(float v) {
  if (std::isnan(v)) return 0x7F;
  static const auto table = make_e4m3_table();
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const float a = std::fabs(v);
  if (a >= 448.0f) return sign | 0x7E;  // saturate (e4m3fn has no infinity)
  return sign | round_to_code<127>(a, table);
}

float e8m0_to_f32(uint8_t v) {
  if (v == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}

uint8_t f32_to_e8m0(float v) {
  if (std::isnan(v) || v <= 0.0f) return 0xFF;
  int e;
  std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1): floor(log2 v) = e - 1
  int code = (e - 1) + 127;
  if (code < 0) code = 0;
  if (code > 254) code = 254;
  return static_cast<uint8_t>(code);
}

float e2m1_to_f32(uint8_t nibble) {
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float r = kValues[nibble & 0x7];
  return (nibble & 0x8) ? -r : r;
}

uint8_t f32_to_e2m1(float v) {
  static const auto table = make_e2m1_table();
  if (std::isnan(v)) return 0x7;  // no NaN in e2m1: saturate like overflow
  const uint8_t sign = std::signbit(v) ? 0x8 : 0;
  const float a = std::fabs(v);
  if (a >= 6.0f) return sign | 0x7;
  return sign | round_to_code<8>(a, table);
}

void convert_to_f32(DType src, const void* in, float* out, int64_t n) {
  switch (src) {
    case DType::kF32:
      std::memcpy(out, in, n * sizeof(float));
      return;
    case DType::kBF16: {
      auto p = static_cast<const uint16_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      return;
    }
    case DType::kF16: {
      auto p = static_cast<const uint16_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(p[i]);
      return;
    }
    case DType::kF8E4M3: {
      auto p = static_cast<const uint8_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = e4m3_to_f32(p[i]);
      return;
    }
    case DType::kE8M0: {
      auto p = static_cast<const uint8_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = e8m0_to_f32(p[i]);
      return;
    }
    case DType::kFP4E2M1: {
      auto p = static_cast<const uint8_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = e2m1_to_f32((p[i / 2] >> (4 * (i & 1))) & 0xF);
      return;
    }
    case DType::kI8: {
      auto p = static_cast<const int8_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = p[i];
      return;
    }
    case DType::kU8:
    case DType::kBool: {
      auto p = static_cast<const uint8_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = p[i];
      return;
    }
    case DType::kI32: {
      auto p = static_cast<const int32_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
      return;
    }
    case DType::kI64: {
      auto p = static_cast<const int64_t*>(in);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
      return;
    }
  }
  fail(ErrorCode::kInternal, "convert_to_f32: unhandled dtype");
}

}  // namespace deepinfer
