#pragma once
// flat's in-memory choices measured on first use, as FFTW's planner
// measures: where this CPU, thread count and precision have no record of
// flat/left's streams, flat/right's dates at once or flat's store kind, the
// first flat command (a run, a bench, cvest.multiply) measures them in about
// a second (two where the machine is busy) and records them as `cvest tune` does (app/tune/WalkRecords.hpp); a
// record already there (cvest tune's longer measurement) is kept. Without
// this, a new user got the stated defaults, measured on one Intel host:
// flat/left float at 0.71-0.72 of its roof at 400,000-1,000,000 ids on
// another (issue 59).
#include "core/Names.hpp"

#include <cstddef>
#include <iosfwd>
#include <string>

namespace cvest::app {

// Whether first use may measure: CVEST_FIRST_USE unset, "on" or "1"; "off"
// or "0" turn it off (reproducible timing: the stated defaults or the
// records as they are); anything else is an InputError. A deck turns it off
// with [run] measure_first_use = false.
bool first_use_allowed();

// The measurement for `precision`, where first_use_allowed(), the default
// execution space is the host's and a record of any of the three choices is
// missing here: once a process, precision and record file, its records
// saved (the missing ones) and put in force; where none is missing, the
// records as they are now put in force (another rank's, saved since this
// process started). Returns what it did in one line ("" where
// it measured nothing): the choices, the seconds it took, the record file.
// A failure (no memory for its arrays, a record that cannot be written) is
// said in that line, the defaults kept; it never throws but for the
// variable's InputError. Progress lines on `progress`.
std::string measure_on_first_use(Precision precision, std::ostream& progress);

// The discount bytes of each of its shapes (and of cv beside each; the
// layouts take the same two arrays in turn): one and a half times the L3
// caches this process's CPUs use (`l3_bytes`, their sum; 0 where unknown;
// cv, written with streaming stores, takes no room there), and 48 MiB at
// least (the size measured on an AMD EPYC Zen 4 VM with an L3 of 32 MiB),
// 512 MiB at most (past an L3 of about 340 MiB discount is less than 1.5
// times it, past 512 MiB it fits: the time, not the cache, bounds it). A
// constant 48 MiB sat inside an Intel VM's L3 of 300 MiB.
std::size_t first_use_bytes(std::size_t l3_bytes);
// first_use_bytes of this process's L3 as sysfs gives it (none where only
// sysconf does: inside a VM it can name the host's whole L3).
std::size_t first_use_bytes_here();
// Its rounds over arrays of `bytes`: 6 at 48 MiB, fewer where the arrays
// are larger (each pass longer), 4 at least (the busy check's quartiles
// need them: of 3 passes they are the whole range): about a second where
// the L3 is 32 MiB, about six where it is 300 MiB (three shapes).
int first_use_rounds(std::size_t bytes);

}  // namespace cvest::app
