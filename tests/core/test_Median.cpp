// The median and the interval that holds it with 95% confidence: order
// statistics chosen from the binomial distribution, checked against counts
// worked out by hand and against a simulation of what it promises.
#include "core/Median.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using namespace cvest;

TEST_CASE("the median of repeats: the middle value, the middle two's mean, 0 for none", "[median]") {
  CHECK(median({}) == 0);
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 3, 2}) == 2.5);
}

TEST_CASE("the median's 95% interval: none under six values, then the binomial's order statistics", "[median]") {
  for (std::size_t n = 0; n < 6; ++n) CHECK_FALSE(median_interval_95(std::vector<double>(n, 1.0)).exists);
  // Six: the smallest and largest hold the median with 1 - 2/64 = 96.9%.
  const auto six = median_interval_95({0.9, 0.1, 0.5, 0.7, 0.3, 0.2});
  REQUIRE(six.exists);
  CHECK(six.low == 0.1);
  CHECK(six.high == 0.9);
  // Twelve: P(B(12, 1/2) <= 2) = 79/4096 = 1.9% (P(<= 3) = 7.3%): the 3rd
  // smallest and 3rd largest, whatever order they came in.
  std::vector<double> twelve;
  for (int i = 12; i >= 1; --i) twelve.push_back(i);
  const auto in12 = median_interval_95(twelve);
  REQUIRE(in12.exists);
  CHECK(in12.low == 3);
  CHECK(in12.high == 10);
  // Many: k near n/2 - 1.96 sqrt(n) / 2 (the normal approximation), and the
  // sums over 10^5 terms neither overflow nor give up.
  for (const std::size_t n : {1000u, 100000u}) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = double(i + 1);  // the k-th smallest is k
    const auto in = median_interval_95(v);
    REQUIRE(in.exists);
    const double k = double(n) / 2 - 1.96 * std::sqrt(double(n)) / 2;
    CAPTURE(n, in.low, in.high, k);
    CHECK(std::abs(in.low - k) <= 2);
    CHECK(in.low + in.high == double(n) + 1);  // symmetric: k-th smallest and k-th largest
  }
}

TEST_CASE("the median's 95% interval holds a skewed distribution's median in at least 95% of samples",
          "[median]") {
  // Exponential samples (median ln 2), skewed as timings are. Uniforms from
  // the generator's raw bits, so every platform draws the same samples.
  std::mt19937_64 bits(20261205);
  const auto uniform = [&] { return (double(bits() >> 11) + 0.5) / 9007199254740992.0; };
  for (const std::size_t n : {6u, 12u, 41u}) {
    int held = 0, trials = 4000;
    for (int t = 0; t < trials; ++t) {
      std::vector<double> v(n);
      for (auto& x : v) x = -std::log(uniform());
      const auto in = median_interval_95(v);
      REQUIRE(in.exists);
      held += in.low <= std::log(2.0) && std::log(2.0) <= in.high;
    }
    CAPTURE(n, held);
    // At least 95% (a standard error of 0.35% over 4000 trials), and not far
    // above what the chosen order statistics promise (96.9%, 96.1%, 97.2%).
    CHECK(held >= int(0.94 * trials));
    CHECK(held <= int(0.985 * trials));
  }
}
