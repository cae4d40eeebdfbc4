#include "core/cpu_timer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "core/env.h"

namespace deepinfer {

namespace {

struct Totals {
  std::mutex mu;
  std::map<std::string, std::pair<int64_t, double>> by_name;  // calls, seconds
  std::vector<std::string> order;                             // first-seen order
};

Totals& totals() {
  static Totals* t = new Totals();  // never destroyed: the exit hook may still use it
  return *t;
}

void print_at_exit() {
  const std::string r = CpuTimers::report();
  if (!r.empty()) std::fputs(r.c_str(), stderr);
}

}  // namespace

bool CpuTimers::enabled() {
  static const bool on = [] {
    const bool e = env::get_bool("DEEPINFER_CPU_TIMER");
    if (e) std::atexit(print_at_exit);
    return e;
  }();
  return on;
}

void CpuTimers::add(const char* section, double seconds) {
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mu);
  auto [it, fresh] = t.by_name.try_emplace(section, 0, 0.0);
  if (fresh) t.order.push_back(section);
  it->second.first += 1;
  it->second.second += seconds;
}

std::string CpuTimers::report() {
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.order.empty()) return "";
  // Largest total first (sections nest: a step's enclosing section leads, then what it spends
  // most in); each share is of the largest total, since nested sections' totals overlap.
  std::vector<std::string> rows = t.order;
  std::stable_sort(rows.begin(), rows.end(), [&](const std::string& a, const std::string& b) {
    return t.by_name[a].second > t.by_name[b].second;
  });
  const double top = t.by_name[rows.front()].second;
  size_t width = 24;
  for (const auto& name : rows) width = std::max(width, name.size());
  std::string out = fmt::format("{:<{}} {:>10} {:>12} {:>12} {:>8}\n", "cpu section", width,
                                "calls", "total ms", "mean us", "of top");
  for (const auto& name : rows) {
    const auto& [calls, secs] = t.by_name[name];
    out += fmt::format("{:<{}} {:>10} {:>12.3f} {:>12.2f} {:>7.1f}%\n", name, width, calls,
                       secs * 1e3, secs / calls * 1e6, top > 0 ? 100 * secs / top : 0.0);
  }
  return out;
}

void CpuTimers::reset() {
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mu);
  t.by_name.clear();
  t.order.clear();
}

}  // namespace deepinfer
