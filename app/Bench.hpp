#pragma once
// The kernel benchmark: every strategy x layout x precision on in-memory data,
// interleaved and repeated, each judged against a copy of its own bytes on
// its own arrays (discount into cv, multBy read) in the same repeats (and the
// machine's copy roof on separate arrays, reported beside them).
#include "core/Roof.hpp"
#include "core/Spaces.hpp"
#include "core/Strategy.hpp"
#include "core/Types.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <functional>
#include <iosfwd>
#include <memory>
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

// Bytes `cvest bench` allocates for `config`: the three roof arrays of the
// cube's elements in double, and multBy, discount and cv for every layout
// and precision.
double bench_bytes(const Config& config);
// Where bench_bytes(config) does not fit in `available` bytes (with a tenth
// kept back for the rest of the process and the system): the one line that
// says so and what fits (how many ids at these dates, layouts and
// precisions); "" where it fits or `available` is unknown (0).
std::string refusal(const Config& config, double available);

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

// The median of repeated timings (core/Roof.hpp).
using roof::median;

// Why copy timings (seconds per pass of `bytes`) of arrays beyond the caches
// cannot serve as a roof, or "" when they can: over a third of either kind's
// repeats took more than twice its fastest, or the median regular and
// streaming copies are more than 2x apart. Arrays in cache: always "" (a
// pass of microseconds is mostly launch overhead, and noisy).
std::string unsteady_roof(const std::vector<double>& regular_s, const std::vector<double>& streaming_s, double bytes,
                          bool beyond_caches);

// A row's fraction of its roof: in each repeat, the kernel's GB/s (`moved`
// bytes in kernel_s) over that of the roof's copy (`copied` bytes) timed
// beside it, the roof being the kind of copy (regular_s, streaming_s or
// runs_s) with the fastest median; the median of those. Pairs from one
// repeat meet the same moment of a machine whose bandwidth swings within
// seconds, where the ratio of two medians may pair a fast moment of one with
// a slow moment of the other.
double roof_fraction(const std::vector<double>& kernel_s, double moved, const std::vector<double>& regular_s,
                     const std::vector<double>& streaming_s, double copied, const std::vector<double>& runs_s = {});
// Each side at its quietest moment: the GB/s of the kernel's fastest pass over
// that of the fastest pass of any kind of copy. Where single passes swing by
// a quarter (a shared VM's neighbours), a median of five per-repeat ratios
// passed 1.15 though no kernel pass beat the fastest copy pass (0.98); a
// kernel is a copy plus a multiply, so this one stays at or below 1 but by
// luck. It leans low, if anything: the copies have two or three times the
// kernel's passes to be fast in (docs/benchmarks.md).
double best_fraction(const std::vector<double>& kernel_s, double moved, const std::vector<double>& regular_s,
                     const std::vector<double>& streaming_s, double copied, const std::vector<double>& runs_s = {});
// Those per-repeat fractions, in repeat order.
// runs_s: a third copy's seconds (Result::roof_runs_s), where there is one.
std::vector<double> roof_fractions(const std::vector<double>& kernel_s, double moved,
                                   const std::vector<double>& regular_s, const std::vector<double>& streaming_s,
                                   double copied, const std::vector<double>& runs_s = {});
// The first and third quartiles (linear between ranks; {0, 0} for none).
std::array<double, 2> quartiles(std::vector<double> v);
// A row above its roof beyond its spread: its kernel outran every copy of its
// own bytes beside it in every one of at least 5 repeats (a row truly at its
// roof does so in each with odds of about 2 in 5 here, so 5 in a row by
// chance about once in a hundred rows). No kernel can (it is that copy plus
// a multiply): the bench reports it as a fault of the measurement.
bool above_roof(const Result& res);

// Bytes a copy of one cube into another moves: read and write.
double bytes_copied(Index elements, Precision precision);

// Bytes one pass moves, a kernel's and its roof's alike: read d, write cv,
// read multBy once.
double bytes_moved(Index T, Index N, Index K, Precision precision);

// Throws std::invalid_argument on a bad configuration and std::runtime_error
// when a strategy's output differs from m * d anywhere.
Report run(const Config& config, std::ostream& progress);

// One layout and precision's arrays at config's shape (on huge pages, filled
// and first touched as the benchmark's are): `pass(s)` times one fenced pass
// of strategy s over them, `mismatches()` counts cv's elements other than
// multBy * discount after it, `clear()` zeroes cv, `walked()` says how many
// streams (LayoutLeft) or dates at once (LayoutRight) flat walks on them now
// (cvest tune's walks, app/tune/TuneWalks.hpp).
struct Arrays {
  std::function<double(Strategy)> pass;
  std::function<Index()> mismatches;
  std::function<void()> clear;
  std::function<int()> walked;
};
Arrays arrays(const Config& config, LayoutKind layout, Precision precision);

// The benchmark as a server, for bench/compare to interleave cvest with
// programs in other processes repeat by repeat: allocates and checks every
// strategy x layout (the config's first precision), then answers one line
// per command read from `in`, as JSON on `out`:
//   warm SECONDS          every variant and the roof in turn until SECONDS
//                         have passed (memory a process has just touched
//                         stays slow for seconds on a VM)
//                         -> {"warmed_s", "passes"}
//   time STRATEGY LAYOUT  one fenced pass -> {"strategy", "layout", "seconds", "GBps", "streaming_stores"}
//   roof                  one copy with regular and one with streaming stores
//                         of the first layout's kernel bytes (its discount
//                         into its cv, its multBy read; the kernels' own
//                         arrays; GB/s of those bytes, as `time` counts)
//                         -> {"copy_GBps", "copy_streaming_GBps", "arrays"}
//   touch                 every array once (untimed use: after the process
//                         sat idle while another ran) -> {"touched_s"}
//   quit (or end of input)
// A bad command gets {"error": "..."}. `ready` is printed first, after the check.
void serve(const Config& config, std::istream& in, std::ostream& out, std::ostream& progress);

// What serve() answers, as an object (import cvest's BenchServer): the
// arrays allocated and every strategy checked at construction; handle()
// takes one command line (warm, time, roof, touch) and returns the reply.
class Server {
 public:
  explicit Server(const Config& config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  std::string describe() const;  // "100 x 400000 x 5 f64, 7 strategies x 2 layouts, checked"
  nlohmann::json handle(const std::string& command);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// What `cvest bench` prints (app/BenchTable.cpp): by default a summary
// within 120 columns (the roofs' medians, each row's time, GB/s and fraction
// of its roof, the best); print_table is the full text (--explain): flat's
// walk on these arrays, every column and the legend.
void print_summary(const Report& report, std::ostream& out);
void print_table(const Report& report, std::ostream& out);
nlohmann::json to_json(const Report& report);

}  // namespace cvest::app::bench
