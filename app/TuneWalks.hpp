#pragma once
// `cvest tune`'s in-memory measurement: how many streams flat/left walks at
// once (core/FlatRun.hpp flat_streams_most), timed on this machine with its
// threads, recorded per CPU model and thread count (io/WalkRecords.hpp) and
// read at start by the command line and Python alike.
#include "io/WalkRecords.hpp"

#include <iosfwd>

namespace cvest::app {

// flat/left in double with at most 1, 2 and 4 streams at two shapes of about
// `bytes` of discount each (100 dates, whose runs are long, and 8), each
// shape's arrays warmed for `warm_seconds` (memory just touched is slow for
// seconds on a VM), then `repeats` rounds taking every count in turn, the
// order rotated each round. Before that, each count's output is checked on
// its own (cv cleared first); the progress line says where a count walks
// fewer streams (its spacing does not fit the shape's work items).
io::WalkRecord measure_walks(double bytes, int repeats, double warm_seconds, std::ostream& progress);

// The record for this machine and its host threads, where there is one, sets
// flat's streams (policy::set_flat_streams_measured); a damaged or foreign
// record file, or none to be read: one warning line on stderr where `say`
// (one rank of several says it), the stated default kept; never throws.
// Called once Kokkos runs (the thread count is its).
void apply_walk_record(bool say);

}  // namespace cvest::app
