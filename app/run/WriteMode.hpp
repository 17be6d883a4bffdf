#pragma once
// How the output is written on this machine, settled here from `cvest tune`'s
// records (app/tune/WriteModes.hpp) and handed to io/output/ as values: io/
// reads no record. [output] direct = "auto" becomes on, off or automatic with
// the reason, and a compressed output gets the disk's measured plain rate,
// against which its coding is judged (io::OutputFile::writes_text).
#include "io/output/OutputFile.hpp"

#include <string>

namespace cvest::app {

// `spec` with its write mode settled (choose_direct on its bytes and folder):
// for an uncompressed output or a share of one, where the raw path applies.
io::OutputSpec with_write_mode(io::OutputSpec spec);

// `spec` with the rate cvest tune measured the disk writing plain bytes at
// in its folder on this machine, the faster of its two ways, and the date;
// none (0) where it has not measured there or its record cannot be read.
io::OutputSpec with_plain_rate(io::OutputSpec spec);

// Rank 0's output: the write mode where uncompressed, the plain rate where
// compressed.
io::OutputSpec settled_output(io::OutputSpec spec);

}  // namespace cvest::app
