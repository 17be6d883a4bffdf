#pragma once
// Whether a block device has gone idle, from its busy time in
// /proc/diskstats: what `cvest tune` waits for before each timed pass
// (app/tune/WriteModes.hpp wait_until_idle), so that no pass pays for the last
// one's writes or discards still under way. The file and the reading are
// parameters, so that tests give fixtures (tests/io/os/diskstats.txt) and
// sequences of their own.
#include <functional>
#include <string>

namespace cvest::io {

// The time the device "MAJ:MIN" has spent doing I/O so far, in ms (the
// tenth counter of its line, discards included, in the kernel's
// /proc/diskstats format); -1 where it is not listed (no block device: a
// network or memory file system), the file cannot be read, or the line has
// fewer counters (a partition on kernels before 2.6.25 had four).
long busy_ms(const std::string& number, const std::string& diskstats = "/proc/diskstats");

// Returns once `busy` (a device's busy time: busy_ms) has given the same
// value over half a second (read every half second, 30 s at most); where its
// first is below 0 (not a block device), after a pause of half a second.
void wait_until_steady(const std::function<long()>& busy);

}  // namespace cvest::io
