#pragma once
// The median of repeated timings or ratios (the mean of the middle two for
// an even count; 0 for none): what every figure cvest reports from repeats
// is; and how well a sample pins it down.
#include <algorithm>
#include <cmath>
#include <vector>

namespace cvest {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The interval that holds the median of what was sampled with at least 95%
// confidence, whatever its distribution: the k-th smallest and k-th largest
// values, k the largest with P(Binomial(n, 1/2) < k) <= 2.5%. None under
// six values (even the smallest and largest of five hold it with 94%).
struct MedianInterval {
  double low = 0, high = 0;
  bool exists = false;
};

inline MedianInterval median_interval_95(std::vector<double> v) {
  const std::size_t n = v.size();
  // P(B <= j) summed term by term in logs: no factorial overflows, and the
  // terms too small for a double add nothing.
  const double log_all = double(n) * std::log(2.0), log_n = std::lgamma(double(n) + 1);
  std::size_t k = 0;
  double below = 0;
  for (std::size_t j = 0; j < n / 2; ++j) {
    below += std::exp(log_n - std::lgamma(double(j) + 1) - std::lgamma(double(n - j) + 1) - log_all);
    if (below > 0.025) break;
    k = j + 1;
  }
  if (k == 0) return {};
  std::sort(v.begin(), v.end());
  return {v[k - 1], v[n - k], true};
}

}  // namespace cvest
