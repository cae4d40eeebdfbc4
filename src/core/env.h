// The environment registry: every DEEPINFER_* variable is declared once in env.cpp with its type,
// default and documentation. docs/env.md is generated from it (`deepinfer env --markdown`) and a
// test checks the two agree. Reading an undeclared variable is a bug and throws.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace deepinfer::env {

enum class VarType { kBool, kInt, kString };

struct VarSpec {
  std::string_view name;
  VarType type;
  std::string_view default_value;
  std::string_view doc;
};

std::span<const VarSpec> registry();
const VarSpec& spec(std::string_view name);  // throws for an undeclared name

// Typed readers: the environment value if set (and well-formed, else an error naming the
// variable), otherwise the declared default.
bool get_bool(std::string_view name);
int64_t get_int(std::string_view name);
std::string get_string(std::string_view name);

// docs/env.md content.
std::string markdown();

}  // namespace deepinfer::env
