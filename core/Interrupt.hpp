#pragma once
// Stopping work from outside it: Ctrl-C in Python while cvest.run() (or
// verify, bench) is under way on the module's Kokkos thread.
//
// The command line needs none of this: a signal ends the process, whose
// handlers remove its temporary files first (io/os/TempFiles.hpp). In Python
// the signal only marks a KeyboardInterrupt for the main thread, which is
// waiting for its call; it sets that call's flag (InterruptScope), and the
// work checks it at every block it reads or writes and every benchmark
// repeat (throw_if_interrupted), so it unwinds within a block as any
// failure does: the output's temporary file and journal removed, nothing at
// the output path.
#include <atomic>
#include <stdexcept>

namespace cvest {

struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// While it lives, setting `flag` stops the work running in this process.
// One at a time (the module runs one call at a time); not nested.
class InterruptScope {
 public:
  explicit InterruptScope(const std::atomic<bool>& flag);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

// Throws Interrupted when the live scope's flag is set: one atomic load
// when no scope lives (every command-line run). From any thread.
void throw_if_interrupted();

}  // namespace cvest
