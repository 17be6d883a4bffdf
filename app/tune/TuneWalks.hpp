#pragma once
// `cvest tune`'s in-memory measurements: how many streams flat/left walks at
// once (core/FlatRun.hpp flat_streams_most) and how many dates flat/right
// takes at once (flat_dates_most), timed on this machine with its threads,
// recorded per CPU model and thread count (app/tune/WalkRecords.hpp) and read at
// start by the command line and Python alike.
#include "app/tune/WalkRecords.hpp"

#include "core/Types.hpp"

#include <cstddef>
#include <iosfwd>

namespace cvest::app {

// The most ids, `most` at most, at which flat on T dates of `walk`'s layout
// (K = 5, elements of `element_size` bytes, streaming stores) walks each
// count it tries (1, 2 and 4) as many streams or dates as it says, with
// discount at `d` and cv at `cv` (their places in a 4 KiB page are what
// count); 0 where none within 4096 ids does. Rows less than 1 KiB apart in
// a page take fewer (core/FlatRun.hpp), and a shape whose rows allow no
// four compares a walk with itself: 48 MiB at 100 dates of float did, and
// first use chose 2 dates at once where 4 ran 0.93-0.98 of the roof against
// 2's 0.79-0.93 (issue 59). flat/right's dates at once adjacent ones where
// such ids lie within the 4096, as at the users' round counts of ids (rows
// 4 dates apart walk memory another way). Leaves no trial set.
Index ids_walking_as_said(Walk walk, Index T, Index most, std::size_t element_size, const void* d, const void* cv);

// The dates of the shapes flat's walks are measured at (cvest tune, first
// use): the counts below core's flat_many_dates (28) are those that lag
// least at both 8 and 20 dates. Measured at 8 alone, flat/left's counts
// tied there within the noise on a Zen 4 VM, and first use took four
// streams below 28 dates in 21 of 95 first uses (two in 32), where the
// bench at 20 dates ran four at 0.73-0.99 of a copy of its bytes and one at
// 0.92-1.07 (docs/benchmarks.md).
inline constexpr Index walk_dates[] = {100, 20, 8};

// flat in `precision` on `walk`'s layout with at most 1, 2 and 4 of its count
// (flat/left's streams, flat/right's dates at once) at each of walk_dates, about
// `bytes` of discount each (100 dates, whose runs are long, 20 and 8; fewer ids
// where ids_walking_as_said finds a count walking fewer on the arrays, or
// flat/right's dates at once not adjacent), each
// shape's arrays warmed for `warm_seconds` (memory just touched is slow for
// seconds on a VM), then `repeats` rounds taking every count in turn, the
// order rotated each round, each timed pass right after an untimed one of
// its own count. Before that, each count's output is checked on its own (cv
// cleared first); the record (`walked`) and the progress line say where a
// count walks fewer (its spacing does not fit the shape).
WalkRecord measure_walks(Walk walk, Precision precision, double bytes, int repeats, double warm_seconds,
                         std::ostream& progress);

// `record`'s count in force for its walk and precision
// (policy::set_flat_streams_measured, set_flat_dates_measured or
// set_flat_stores_measured), said as measured on its date.
void apply_walk_record(const WalkRecord& record);

// The records for this machine and its host threads, where there are any,
// applied; a damaged or foreign record file, or none to be read: one warning
// line on stderr where `say` (one rank of several says it), the stated
// defaults kept; never throws. Called once Kokkos runs (the thread count is
// its).
void apply_walk_records(bool say);

}  // namespace cvest::app
