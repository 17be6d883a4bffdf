#pragma once
// The kernel benchmark's configuration and figures: every strategy x layout x
// precision on in-memory data, interleaved and repeated, each judged against
// a copy of its own bytes on its own arrays (discount into cv, multBy read)
// in the same repeats (and the machine's copy roof on separate arrays,
// reported beside them). app/bench/: Variants (the arrays and passes),
// Harness (the timing), RoofStats (the judging), Server, Formats.
#include "core/Spaces.hpp"
#include "core/Strategy.hpp"
#include "core/Types.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace cvest::app::bench {

struct Config {
  Index dates = 100, ids = 400000, cols = 5;
  std::vector<Strategy> strategies;  // empty: all
  std::vector<LayoutKind> layouts{LayoutKind::right, LayoutKind::left};
  std::vector<Precision> precisions{Precision::f64};
  int repeats = 5;  // timed passes per variant, after one warm-up pass
  // Then every variant and the roof in turn for this long before timing:
  // memory a process has just touched stays slow for seconds on a VM.
  double warm_seconds = 3;
};

// Thrown when the copy roof disagrees with itself beyond what noise explains
// (unsteady_roof): the figures would mislead.
struct UnsteadyRoof : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Roof {
  double copy_GBps = 0, copy_streaming_GBps = 0, triad_GBps = 0;
  double copy_min_GBps = 0, copy_max_GBps = 0, copy_streaming_min_GBps = 0, copy_streaming_max_GBps = 0;
  double best() const { return std::max(copy_GBps, copy_streaming_GBps); }
};

struct Result {
  Strategy strategy;
  LayoutKind layout;
  Precision precision;
  bool streaming = false;  // wrote cv with streaming stores
  double median_s = 0, min_s = 0, max_s = 0;
  double GBps = 0;           // (read d + write cv + read multBy once) / median
  double roof_GBps = 0;      // the kind of copy of this row's bytes with the fastest median (of up to three)
  double roof_copy_GBps = 0, roof_copy_streaming_GBps = 0;  // the regular and streaming kinds (medians)
  // The median over repeats of GB/s over the pass of that fastest kind in
  // the same repeat (roof_fraction()).
  double roof_fraction = 0;
  double roof_fraction_q1 = 0, roof_fraction_q3 = 0;  // its spread: the quartiles over repeats
  // The fastest pass of any kind of copy over the kernel's fastest pass
  // (best_fraction()).
  double roof_fraction_best = 0;
  // Each repeat's seconds: the kernel's pass, and the copies of this row's
  // bytes on its own arrays timed right beside it.
  std::vector<double> kernel_s{}, roof_regular_s{}, roof_streaming_s{};
  // A third copy, in flat's own walk with the multiply removed (streaming
  // stores): LayoutLeft with 1 < T < flat's run, in runs of T; LayoutRight on
  // the host where flat takes dates together, its tiles and dates at once.
  // Empty otherwise.
  std::vector<double> roof_runs_s{};
};

struct Report {
  BuildFacts build;
  Config config;
  Roof roof;
  std::vector<Result> results;
  std::string flat_dates;    // how flat/right grouped dates on each precision's arrays
  std::string flat_streams;  // how many streams flat/left walked at once on each precision's arrays
  std::string first_use;     // what flat measured on first use before the arrays (app/FirstUse.hpp), or ""
};

}  // namespace cvest::app::bench
