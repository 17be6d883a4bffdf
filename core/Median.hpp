#pragma once
// The median of repeated timings or ratios (the mean of the middle two for
// an even count; 0 for none): what every figure cvest reports from repeats is.
#include <algorithm>
#include <vector>

namespace cvest {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace cvest
