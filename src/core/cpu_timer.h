// Named host-side section timers. With DEEPINFER_CPU_TIMER=1 every ScopedCpuTimer adds its wall
// time to a per-name total, and a table (calls, total, mean, share of the largest total; largest
// first) prints to stderr at exit.
// Disabled, a ScopedCpuTimer costs one branch.
#pragma once

#include <chrono>
#include <string>

namespace deepinfer {

class CpuTimers {
 public:
  static bool enabled();
  static void add(const char* section, double seconds);
  // The table as text (what prints at exit); empty when nothing was timed.
  static std::string report();
  static void reset();
};

class ScopedCpuTimer {
 public:
  explicit ScopedCpuTimer(const char* section)
      : section_(CpuTimers::enabled() ? section : nullptr),
        start_(section_ ? std::chrono::steady_clock::now()
                        : std::chrono::steady_clock::time_point{}) {}
  ~ScopedCpuTimer() {
    if (section_)
      CpuTimers::add(
          section_,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  ScopedCpuTimer(const ScopedCpuTimer&) = delete;
  ScopedCpuTimer& operator=(const ScopedCpuTimer&) = delete;

 private:
  const char* section_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace deepinfer
