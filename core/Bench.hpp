#pragma once
// The kernel benchmark: every strategy x layout x precision on in-memory data,
// interleaved and repeated, judged against the copy roof measured in the same
// run on arrays of the same size.
#include "core/Spaces.hpp"
#include "core/Strategy.hpp"
#include "core/Types.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>
#include <vector>

namespace cvest::bench {

struct Config {
  Index dates = 100, ids = 400000, cols = 5;
  std::vector<Strategy> strategies;  // empty: all
  std::vector<LayoutKind> layouts{LayoutKind::right, LayoutKind::left};
  std::vector<Precision> precisions{Precision::f64};
  int repeats = 5;  // timed passes per variant, after one warm-up pass
};

struct Roof {
  double copy_GBps = 0, copy_streaming_GBps = 0, triad_GBps = 0;
  double best() const { return std::max(copy_GBps, copy_streaming_GBps); }
};

struct Result {
  Strategy strategy;
  LayoutKind layout;
  Precision precision;
  bool streaming = false;  // wrote cv with streaming stores
  double median_s = 0, min_s = 0, max_s = 0;
  double GBps = 0;           // (read d + write cv + read multBy once) / median
  double roof_fraction = 0;  // GBps / roof.best()
};

struct Report {
  BuildFacts build;
  Config config;
  Roof roof;
  std::vector<Result> results;
};

// The values the in-memory benchmarks fill in: reproducible, non-trivial,
// every element's product distinct enough that one written to the wrong
// place is caught.
template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar multby_value(Index i, Index k) {
  return Scalar(1) + Scalar((i * 7 + k * 3) % 61) / Scalar(64);
}
template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar discount_value(Index t, Index i, Index k) {
  return Scalar(1) / Scalar(1 + t) - Scalar((i + 5 * k) % 97) / Scalar(1024);
}

// The median of repeated timings (the mean of the middle two for an even count).
double median(std::vector<double> v);

// Bytes one pass moves: read d, write cv, read multBy once.
double bytes_moved(Index T, Index N, Index K, Precision precision);

// Throws std::invalid_argument on a bad configuration and std::runtime_error
// when a strategy's output differs from m * d anywhere.
Report run(const Config& config, std::ostream& progress);

void print_table(const Report& report, std::ostream& out);
nlohmann::json to_json(const Report& report);

}  // namespace cvest::bench
