#pragma once
// The out-of-core pipeline: blocks of the plan flow
//   read (I/O thread) -> h2d -> kernel -> d2h -> write (I/O thread)
// with two host staging slots on each side, so block k+1 is read and block
// k-1 written while block k is computed. Buffers are allocated once. The
// file side always holds C-order (T, N, K); a LayoutLeft run transposes in
// the stage-in / stage-out steps. h2d and d2h are explicit stages even on host
// spaces (where a LayoutRight run computes straight in the staging slots).
#include "core/Plan.hpp"
#include "core/Strategy.hpp"
#include "core/Types.hpp"

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace cvest {

// What the pipeline needs from the file side. Buffers are C-order.
template <class Scalar>
struct BlockIO {
  std::function<void(Range ids, Scalar* multby)> read_multby;               // (ids, K)
  std::function<void(const Block&, Scalar* discount)> read_discount;        // (dates, ids, K)
  std::function<void(const Block&, const Scalar* cv)> write_cv;             // (dates, ids, K)
  // Optional, each in place of the matching call above: where a block's
  // data already lies in host memory (C-order, contiguous, in StagingSpace
  // where it is to be copied asynchronously). The pipeline then computes
  // from / copies out of that memory directly instead of through a staging
  // slot, and the I/O thread has nothing to do for it. A resident multBy
  // and the in-memory benchmark (`cvest transfers`) use these.
  std::function<const Scalar*(Range ids)> multby_at;
  std::function<const Scalar*(const Block&)> discount_at;
  std::function<Scalar*(const Block&)> cv_at;
};

enum class Phase { read, h2d, kernel, d2h, write };
inline constexpr int phase_count = 5;
std::string_view to_string(Phase phase);

struct PhaseSpan {
  int block;
  Phase phase;
  double begin_s, end_s;  // since the pipeline started
};

struct PipelineStats {
  double seconds[phase_count] = {};  // busy time per phase
  double bytes[phase_count] = {};    // bytes moved per phase
  double total_s = 0;                // wall time
  std::vector<PhaseSpan> timeline;
};

struct PipelineOptions {
  Strategy strategy = Strategy::flat;
  bool progress = true;         // a progress line per block on `progress_out`
  std::string label;            // names the job in progress lines
  // Host spaces: stage through separate compute buffers even where the
  // kernel could work in the staging slots, so the device path's staging
  // is exercised (and tested) on machines without a device.
  bool force_staging = false;
  // Test hook: called by the I/O threads before each read/write, so tests can
  // make a stage slow and check that blocks still land in order.
  std::function<void(Phase, int block)> before_io;
};

// Runs the plan. Throws whatever BlockIO throws (from any thread), after the
// other threads have stopped.
template <class Scalar, class Layout>
PipelineStats run_pipeline(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                           std::ostream& progress_out);

}  // namespace cvest
