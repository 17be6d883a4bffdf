#pragma once
// How long a run of contiguous elements one work item of `flat` takes on the
// host (and the copy roofs alike, so a kernel and its roof are cut the
// same): an eighth of the core's L2 cache, read from the machine at run
// time, between 64 KiB and 1 MiB. A LayoutRight thread walks every date of
// one multBy run in turn, so that run stays in L2 beside the discount and cv
// streams going through; a longer run keeps the hardware prefetchers going
// longer between jumps from one date to the next (8,192 elements, 64 KiB of
// doubles, the old constant, reached 0.70-0.74 of a streaming copy on an
// Intel host with 2 MiB of L2; 32,768 reached 0.85-0.89).
#include "core/Types.hpp"

#include <cstddef>
#include <string>

namespace cvest::policy {

struct FlatRun {
  std::size_t bytes = 0;     // a run's bytes
  std::size_t l2_bytes = 0;  // the L2 it was derived from (0: unknown)
  std::string source;        // where l2_bytes came from, or the stated default
  std::size_t l3_bytes = 0;  // the L3 (0: unknown), for the walk below
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

// How a LayoutRight thread walks the cube. Where multBy's (N, K) slice of
// `slice_bytes` fits half the L3, in storage order: each thread streams one
// contiguous range of the cube (as a copy does), multBy read again for every
// date from the L3 (100 x 400,000 x 5 on an AMD host, 508 MiB L3: 0.91-0.95 of
// the copy roof, against 0.77-0.83 for the walk below). Otherwise, or where
// the L3 cannot be read (the stated default), each run's dates in turn, so
// the run's multBy stays in L2. CVEST_FLAT_WALK=storage|dates forces one.
bool flat_walks_storage_order(std::size_t slice_bytes);

// "16384 elements of double (128 KiB: an eighth of the 1 MiB L2, sysconf);
// storage order where multBy fits half the 508 MiB L3, else a run's dates in turn"
std::string flat_run_text(std::size_t element_size);

}  // namespace cvest::policy
