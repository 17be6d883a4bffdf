#include "app/bench/RoofStats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cvest::app::bench {

std::string unsteady_roof(const std::vector<double>& regular_s, const std::vector<double>& streaming_s, double bytes,
                          bool beyond_caches) {
  // In cache a pass takes microseconds, launch overheads and all: no roof
  // for memory bandwidth, and too noisy to judge.
  if (regular_s.empty() || streaming_s.empty() || !beyond_caches) return "";
  // One slow repeat is noise on a shared VM (it moves no median); a third of
  // them at under half the best, or the two kinds of copy more than 2x apart
  // on arrays beyond the caches (streaming stores save at most a third of
  // the traffic), is not.
  const auto slow_share = [](const std::vector<double>& t) {
    const double fastest = *std::min_element(t.begin(), t.end());
    return double(std::count_if(t.begin(), t.end(), [&](double x) { return x > 2.0 * fastest; })) / double(t.size());
  };
  const auto range = [&](const std::vector<double>& t) {
    const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
    return fmt::format("{:.1f}-{:.1f} GB/s (median {:.1f})", bytes / *hi / 1e9, bytes / *lo / 1e9,
                       bytes / median(t) / 1e9);
  };
  const double kinds = median(regular_s) / median(streaming_s);  // streaming GB/s over regular GB/s
  if (std::max(slow_share(regular_s), slow_share(streaming_s)) > 1.0 / 3.0 || kinds > 2.0 || kinds < 0.5)
    return fmt::format("the copy roof disagreed with itself: copy {}, with streaming stores {}, over {} repeats",
                       range(regular_s), range(streaming_s), regular_s.size());
  return "";
}

namespace {

// The copy kinds timed for a row: regular, streaming, and the copy in
// flat's walk where there is one.
std::vector<const std::vector<double>*> copy_kinds(const std::vector<double>& regular_s,
                                                   const std::vector<double>& streaming_s,
                                                   const std::vector<double>& runs_s) {
  std::vector<const std::vector<double>*> kinds{&regular_s, &streaming_s};
  if (!runs_s.empty()) kinds.push_back(&runs_s);
  return kinds;
}

}  // namespace

std::vector<double> roof_fractions(const std::vector<double>& kernel_s, double moved,
                                   const std::vector<double>& regular_s, const std::vector<double>& streaming_s,
                                   double copied, const std::vector<double>& runs_s) {
  // The roof is the kind of copy fastest over the repeats (by median), and
  // each repeat pairs the kernel's pass with that kind's pass beside it. Not
  // the faster of the kinds in each repeat: of two kinds equally fast, the
  // faster of two noisy passes beats either kind's own pace, and the kernel
  // has one pass (3-5% lower fractions on this VM, docs/benchmarks.md).
  const auto kinds = copy_kinds(regular_s, streaming_s, runs_s);
  const std::vector<double>* roof = nullptr;
  for (const auto* kind : kinds)
    if (!kind->empty() && (!roof || median(*kind) < median(*roof))) roof = kind;
  std::vector<double> fractions;
  for (std::size_t r = 0; roof && r < kernel_s.size() && r < roof->size(); ++r)
    fractions.push_back((moved / kernel_s[r]) / (copied / (*roof)[r]));
  return fractions;
}

double roof_fraction(const std::vector<double>& kernel_s, double moved, const std::vector<double>& regular_s,
                     const std::vector<double>& streaming_s, double copied, const std::vector<double>& runs_s) {
  return median(roof_fractions(kernel_s, moved, regular_s, streaming_s, copied, runs_s));
}

double best_fraction(const std::vector<double>& kernel_s, double moved, const std::vector<double>& regular_s,
                     const std::vector<double>& streaming_s, double copied, const std::vector<double>& runs_s) {
  double fastest_copy = 0;
  for (const auto* kind : copy_kinds(regular_s, streaming_s, runs_s))
    for (const double s : *kind)
      if (s > 0 && (fastest_copy == 0 || s < fastest_copy)) fastest_copy = s;
  if (kernel_s.empty() || fastest_copy == 0) return 0;
  return (moved / *std::min_element(kernel_s.begin(), kernel_s.end())) / (copied / fastest_copy);
}

std::array<double, 2> quartiles(std::vector<double> v) {
  if (v.empty()) return {0, 0};
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {  // linear between the closest ranks
    const double x = q * double(v.size() - 1);
    const std::size_t lo = std::size_t(x), hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (x - double(lo)) * (v[hi] - v[lo]);
  };
  return {at(0.25), at(0.75)};
}

bool above_roof(const Result& res) {
  // Its fastest pass beyond every copy's fastest: no luck of pairing in it.
  if (res.kernel_s.size() >= 5 && res.roof_fraction_best > best_above) return true;
  // Strict: faster than every copy beside it (each repeat's fastest) in
  // every repeat; a repeat without a copy of some kind clears it.
  const auto kinds = copy_kinds(res.roof_regular_s, res.roof_streaming_s, res.roof_runs_s);
  for (std::size_t r = 0; r < res.kernel_s.size(); ++r)
    for (const auto* kind : kinds)
      if (r >= kind->size() || res.kernel_s[r] >= (*kind)[r]) return false;
  return res.kernel_s.size() >= 5;
}

bool pairs_unsteady(const Result& res) {
  return res.kernel_s.size() >= 3 && res.roof_fraction_best > 0 &&
         std::abs(res.roof_fraction - res.roof_fraction_best) > unsteady_pairs;
}

double bytes_copied(Index elements, Precision precision) {
  return 2.0 * double(elements) * double(element_size(precision));
}

double bytes_moved(Index T, Index N, Index K, Precision precision) {
  return (2.0 * double(T) * double(N) * double(K) + double(N) * double(K)) * double(element_size(precision));
}

}  // namespace cvest::app::bench
