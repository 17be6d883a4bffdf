#pragma once
// `cvest tune`'s in-memory measurements: how many streams flat/left walks at
// once (core/FlatRun.hpp flat_streams_most) and how many dates flat/right
// takes at once (flat_dates_most), timed on this machine with its threads,
// recorded per CPU model and thread count (app/tune/WalkRecords.hpp) and read at
// start by the command line and Python alike.
#include "app/tune/WalkRecords.hpp"

#include <iosfwd>

namespace cvest::app {

// flat in double on `walk`'s layout with at most 1, 2 and 4 of its count
// (flat/left's streams, flat/right's dates at once) at two shapes of about
// `bytes` of discount each (100 dates, whose runs are long, and 8), each
// shape's arrays warmed for `warm_seconds` (memory just touched is slow for
// seconds on a VM), then `repeats` rounds taking every count in turn, the
// order rotated each round. Before that, each count's output is checked on
// its own (cv cleared first); the progress line says where a count walks
// fewer (its spacing does not fit the shape).
WalkRecord measure_walks(Walk walk, double bytes, int repeats, double warm_seconds, std::ostream& progress);

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
