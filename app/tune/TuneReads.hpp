#pragma once
// `cvest tune`'s read measurement: cvest itself run file to file on an input
// the page cache does not hold, reading it past the cache and through it,
// interleaved. Reading alone, and reading with one thread writing on, ranked
// the two ways the opposite of cvest's runs on this project's VM (1.6 GB:
// reads alone through the cache 0.75-1.79 s against 1.42-1.74 s direct;
// cvest's runs 3.67 s through it against 2.35 s direct; docs/benchmarks.md):
// what a run does is what is measured.
#include "app/tune/WriteModes.hpp"

#include <iosfwd>
#include <string>

namespace cvest::app {

// Generates an input of about `bytes` in `folder`, runs it `repeats` times
// each way (alternating which goes first; before each run the input is
// dropped from the page cache, the last output removed and the device left
// to go idle), the output written as `record` says writes go faster; the
// runs' seconds go into `record`'s read passes. Its files (fresh temporary
// names) are removed after, and on a signal.
void measure_reads(const std::string& folder, double bytes, int repeats, WriteModeRecord& record,
                   std::ostream& progress);

}  // namespace cvest::app
