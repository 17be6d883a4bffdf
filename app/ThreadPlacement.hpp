#pragma once
// The same thread placement however cvest is started (scripts/cvest, an
// installed copy, a bundle, a batch script): OpenMP's settings come from the
// environment, which libgomp reads as it loads, before main. Where the user
// set none, cvest sets its defaults (OMP_PROC_BIND=spread, OMP_PLACES=threads,
// OMP_WAIT_POLICY=passive: pinned threads, which Kokkos otherwise warns
// about, and idle ones that leave the cores to the I/O threads) and starts
// itself again once so that they apply. A user's own settings are kept.
namespace cvest::app {

// Call first in main, before MPI or any thread starts. Returns only where
// nothing needs changing or the restart failed (then runs as it is).
void place_threads_by_default(int argc, char* argv[]);

}  // namespace cvest::app
