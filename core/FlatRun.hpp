#pragma once
// How long a run of contiguous elements one work item of `flat` takes on the
// host (and the copy roofs alike, so a kernel and its roof are cut the
// same): an eighth of a thread's share of the L2 cache, read from the
// machine at run time (core/Topology.hpp), between 64 KiB and 1 MiB. A LayoutRight thread walks every date of
// one multBy run in turn, so that run stays in L2 beside the discount and cv
// streams going through; a longer run keeps the hardware prefetchers going
// longer between jumps from one date to the next (8,192 elements, 64 KiB of
// doubles, the old constant, reached 0.70-0.74 of a streaming copy on an
// Intel host with 2 MiB of L2; 32,768 reached 0.85-0.89).
#include "core/Topology.hpp"
#include "core/Types.hpp"

#include <cstddef>
#include <string>

namespace cvest::policy {

struct FlatRun {
  std::size_t bytes = 0;     // a run's bytes
  std::size_t l2_bytes = 0;  // the L2 it was derived from (0: unknown)
  std::string source;        // where l2_bytes came from, or the stated default
  std::size_t l3_share = 0;  // a thread's share of the L3 (0: unknown), for the walk below
  std::string walk_forced;   // CVEST_FLAT_WALK: "storage" or "dates" (empty: from the L3)
};

// Read once per process. CVEST_FLAT_RUN=BYTES (e.g. "256KiB") overrides it,
// for measuring one length against another.
const FlatRun& flat_run();

// A run in elements of `element_size` bytes: a multiple of 64.
inline Index flat_run_elements(std::size_t element_size) {
  const Index n = Index(flat_run().bytes / element_size);
  return n < 64 ? 64 : n / 64 * 64;
}

// How a LayoutRight thread walks the cube: multBy's (N, K) slice of
// `slice_bytes` cut into tiles of ids, and each tile walked date by date, a
// date's part of the tile in storage order (long streams, as a copy's), so
// the tile's multBy, read from memory once, is read again from the cache for
// every other date. A tile is a quarter of a thread's share of the L3 (its
// size over the CPUs of this process that share it: core/Topology.hpp; the
// rest holds the discount lines the thread streams past it, which an AMD L3
// takes as L2's victims), a whole number of runs, at most the slice: where
// the slice fits, the walk is storage order; the tiles evened out over the
// slice. 2-CPU AMD VM, 32 MiB L3, 20 x
// 2,000,000 x 5 doubles, x copy roof: tiles of 256 KiB 0.63-0.70, 1 MiB
// 0.87-0.89, 4 MiB 0.88-0.91, 8 MiB 0.68-0.75 (docs/benchmarks.md);
// a tile of one run is the walk that keeps a run's multBy in L2, the stated
// default where the L3 cannot be read. CVEST_FLAT_WALK=storage|dates forces
// those two, CVEST_FLAT_TILE=BYTES a tile size. Returns the tile's bytes.
std::size_t flat_tile_bytes(std::size_t slice_bytes, std::size_t element_size);

// "16384 elements of double (128 KiB: an eighth of a thread's 1024 KiB of L2,
// sysfs); LayoutRight: tiles of multBy of up to 4096 KiB (a quarter of a
// thread's share of the L3) walked date by date, ..."
std::string flat_run_text(std::size_t element_size);

}  // namespace cvest::policy
