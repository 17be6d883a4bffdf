#pragma once
// The timing harness of `cvest bench`: the variants checked, everything
// warmed, then timed passes interleaved repeat by repeat, each row beside
// copies of its own bytes, and the figures (app/bench/RoofStats.hpp).
#include "app/bench/Report.hpp"

#include <iosfwd>
#include <string>

namespace cvest::app::bench {

// Bytes `cvest bench` allocates for `config`: the three roof arrays of the
// cube's elements in double, and multBy, discount and cv for every layout
// and precision.
double bench_bytes(const Config& config);
// Where bench_bytes(config) does not fit in `available` bytes (with a tenth
// kept back for the rest of the process and the system): the one line that
// says so and what fits (how many ids at these dates, layouts and
// precisions); "" where it fits or `available` is unknown (0).
std::string refusal(const Config& config, double available);

// Throws std::invalid_argument on a bad configuration and std::runtime_error
// when a strategy's output differs from m * d anywhere.
Report run(const Config& config, std::ostream& progress);

}  // namespace cvest::app::bench
