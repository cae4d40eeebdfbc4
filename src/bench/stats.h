// Summary statistics with numpy's conventions (vLLM's benchmark reports use np.mean,
// np.median, np.percentile with linear interpolation).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace deepinfer::bench {

// The q-th percentile (q in [0, 100]) with linear interpolation between order statistics;
// 0 for an empty sample.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

inline double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

inline double stddev(const std::vector<double>& v) {
  if (v.empty()) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

}  // namespace deepinfer::bench
