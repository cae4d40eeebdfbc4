// Errors used across deepinfer. Failures are reported by throwing deepinfer::Error, whose code
// tells callers (CLI exit status, API error class, HTTP status later) what kind of problem it was
// and whose message names the file / tensor / field / argument at fault.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace deepinfer {

enum class ErrorCode {
  kInvalidArgument,  // bad user input: CLI flag, API argument, request
  kNotFound,         // missing file, tensor, config field
  kCorrupt,          // malformed file content: truncated, bad header, inconsistent shapes
  kUnsupported,      // valid but not implemented: unknown model_type, dtype, component
  kOutOfMemory,
  kInternal,  // a broken invariant inside deepinfer
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace deepinfer

// DI_CHECK(cond, code, "fmt", args...): throws deepinfer::Error(code, message) when cond is false.
#define DI_CHECK(cond, code, ...)                      \
  do {                                                 \
    if (!(cond)) ::deepinfer::fail(code, __VA_ARGS__); \
  } while (0)

// Internal invariants: a failure is a deepinfer bug, reported with its location.
#define DI_ASSERT(cond)                                                                          \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      ::deepinfer::fail(::deepinfer::ErrorCode::kInternal, "internal check failed: {} at {}:{}", \
                        #cond, __FILE__, __LINE__);                                              \
  } while (0)
