#pragma once
// How a bench row is judged against its roof: fractions of copies of its
// own bytes timed beside it, their spread, a roof that disagrees with
// itself, a row above its roof, and the bytes each pass moves.
#include "app/bench/Report.hpp"
#include "core/Roof.hpp"
#include "core/Types.hpp"

#include <array>
#include <string>
#include <vector>

namespace cvest::app::bench {

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
// chance about once in a hundred rows), or its fastest pass outran the
// fastest pass of every copy by more than best_above (flat/left double at
// 100 x 400,000 read 1.14, best-of 1.13, at 85.5 GB/s against copies of
// 74.9, issue 59; a lead: a loop of one vector, kernel's and copy's alike,
// ran at the pace of where it lay in the code, 0.85-0.98 against 1.00-1.06
// between two builds, docs/benchmarks.md). No kernel can (it is that copy
// plus a multiply): the bench reports it as a fault of the measurement.
inline constexpr double best_above = 1.05;
bool above_roof(const Result& res);
// A row whose x roof (per-repeat pairs) and best-of part by more than
// unsteady_pairs: the copies beside its passes ran at another pace than its
// kernel's, as when this VM's bandwidth moves between 45 and 90 GB/s from
// pass to pass; such pairs read 1.26 (best-of 0.87) and 1.04 (0.75) in a
// grid of 32 benches whose steady rows parted by 0.06 at most (issue 59).
// Its fraction is not a measurement of the kernel: the bench says so.
inline constexpr double unsteady_pairs = 0.15;
bool pairs_unsteady(const Result& res);

// Bytes a copy of one cube into another moves: read and write.
double bytes_copied(Index elements, Precision precision);

// Bytes one pass moves, a kernel's and its roof's alike: read d, write cv,
// read multBy once.
double bytes_moved(Index T, Index N, Index K, Precision precision);

}  // namespace cvest::app::bench
