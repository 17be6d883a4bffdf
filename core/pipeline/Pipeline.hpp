#pragma once
// The out-of-core pipeline, in one of two shapes.
// Overlapped (every space): blocks of the plan flow
//   read (I/O thread) -> h2d -> kernel -> d2h -> write (I/O thread)
// with two host staging slots on each side, so block k+1 is read and block
// k-1 written while block k is computed on every thread of the space.
// h2d and d2h are explicit stages even on host spaces (where a LayoutRight
// run computes straight in the staging slots).
// Per thread (host OpenMP): each thread takes whole blocks and reads,
// computes (the strategy's kernel, run inline on that thread) and writes them
// itself. A block then stays in its core's cache from read to write, no block
// changes hands between threads, and one thread's write (which the file
// system serialises) overlaps the other threads' reads and kernels.
// Buffers are allocated once. The file side always holds C-order (T, N, K);
// a LayoutLeft run transposes in the stage-in / stage-out steps.
#include "core/Median.hpp"
#include "core/Plan.hpp"
#include "core/pipeline/MappedBytes.hpp"
#include "core/Strategy.hpp"
#include "core/Types.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <iosfwd>
#include <string>
#include <type_traits>
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
  // The calls above may run on several threads at once (the per-thread
  // pipeline needs that).
  bool concurrent = false;
};

// Buffers kept from one pipeline run to the next (a deck's jobs and their
// repeats): a run that asks for a buffer under the same label gets the
// memory the last one used, already mapped, instead of fresh pages to fault
// in (about 7 ms a job on the seed deck's 2 MiB blocks, more than its
// kernels). Asking for more than is kept frees the kept buffer first;
// end_job() frees what the job just ended did not ask for, and the caller
// clears it before a job whose buffers would not fit the budget beside what
// is kept, so kept and new buffers together stay within it.
class BufferCache {
 public:
  BufferCache() = default;
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;
  // `fresh`, where given: whether the memory was mapped now (its pages
  // fault in as they are first written).
  template <class Scalar, class Space>
  Kokkos::View<Scalar*, Space> get(const std::string& label, std::size_t n, bool* fresh = nullptr) {
    const std::size_t bytes = n * sizeof(Scalar);
    Entry& e = entries_[label];
    const bool mapping = !e.memory || e.bytes < bytes || e.space != Space::name();
    if (fresh) *fresh = mapping;
    if (mapping) {
      e = Entry{};  // free before allocating its successor
      // Page-aligned: an output's direct writes (O_DIRECT) then take a
      // block's rows without a copy.
      if constexpr (std::is_same_v<Space, Kokkos::HostSpace>) {
        auto mapped = map_bytes(bytes);  // core/pipeline/MappedBytes.hpp: why not malloc's
        e.data = mapped.get();
        e.memory = std::move(mapped);
      } else {  // Kokkos puts its allocation header first: aligned within
        constexpr std::size_t page = 4096;
        auto view = std::make_shared<Kokkos::View<unsigned char*, Space>>(
            Kokkos::view_alloc(label, Kokkos::WithoutInitializing), std::max<std::size_t>(bytes, 1) + page - 1);
        const auto address = reinterpret_cast<std::uintptr_t>(view->data());
        e.data = view->data() + (page - address % page) % page;
        e.memory = std::move(view);
      }
      e.bytes = bytes;
      e.space = Space::name();
    }
    e.used = true;
    return Kokkos::View<Scalar*, Space>(reinterpret_cast<Scalar*>(e.data), n);  // not owning
  }
  // Bytes kept now, and freeing all of them (before a job whose buffers
  // would not fit the budget beside them).
  std::size_t kept_bytes() const {
    std::size_t sum = 0;
    for (const auto& [label, e] : entries_) sum += e.bytes;
    return sum;
  }
  void clear() { entries_.clear(); }
  void end_job() {
    for (auto it = entries_.begin(); it != entries_.end();)
      if (!it->second.used) it = entries_.erase(it);
      else (it++)->second.used = false;
  }

 private:
  struct Entry {
    std::shared_ptr<void> memory;
    void* data = nullptr;
    std::size_t bytes = 0;
    std::string space;
    bool used = false;
  };
  std::map<std::string, Entry> entries_;
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
  // The copy roof, measured in the run on the kernels' own buffers: the
  // same bytes as the kernel call it is paired with (block_kernel_bytes),
  // copied with the stores the kernel used, multBy's rows read; on the
  // thread(s) that ran the call. Not part of any phase; the wall time
  // includes it. Where a block is computed where it was read (host
  // LayoutRight), every other block a thread takes has its discount copied
  // into its cv in the kernel's place, before the kernel (which then
  // overwrites it): from the caches as the reads left them, as the kernel
  // of the thread's block before found them, which is its pair (kernel_s:
  // that call's seconds, scaled to these bytes). Copied after the kernel
  // instead, in buffers the kernel had just pulled into the caches, the
  // copy ran 2-3x the kernel's speed (k.roof 0.30-0.46 on one-date blocks);
  // paired with another thread's call, 0.88-1.66 (the threads' reads and
  // writes share the memory unevenly; docs/benchmarks.md). Elsewhere (a
  // tile or compute set that a transpose or a copy in has just filled; a
  // plan of fewer than two blocks a thread) the copy follows the sampled
  // call (roof_sampled): its cv into its consumed discount. A host
  // LayoutRight block's copy, whatever the strategy, walks the block in
  // flat's walk and reads multBy's rows beside it, where and as flat's
  // kernel reads them (roof::copy_in_walk_here, the overlapped pipeline's
  // direct path roof::copy_in_walk): read after the copy instead, the
  // kernel ran 1.05-1.11x the copy on one-date blocks, its reads of multBy
  // overlapping its reads of discount and the copy's not.
  struct RoofCall {
    double bytes, kernel_s, copy_s;
  };
  std::vector<RoofCall> roof;
  // The kernel calls that ran right after a roof copy of their own block
  // (host LayoutRight, the copy in the kernel's place): from the caches the
  // copy filled, up to 1.6x faster than the rest (cold 24 GB run: kernel
  // busy 1.72 s as run, 2.6-2.7 s before the copy moved). Counted in
  // seconds[kernel] and bytes[kernel] as they ran, and here.
  double kernel_after_roof_s = 0, kernel_after_roof_bytes = 0;
  // Every thread read its next block ahead (PipelineOptions::read_ahead:
  // asked for, more blocks than threads, discount read from the file, a
  // helper thread for each).
  bool read_ahead = false;
  // The kernel's busy seconds had every call run as those no roof copy
  // preceded (their seconds per byte over all its bytes); seconds[kernel]
  // where there are none of one kind or the other.
  double kernel_seconds_unwarmed() const;
  // The median over sampled calls of the kernel's GB/s over its own copy's
  // (pairs meet the same moment of a machine whose bandwidth swings), and
  // the copies' median GB/s; 0 where none was timed (roof_pairs: the same
  // over any set of pairs, e.g. a job's runs together).
  double kernel_roof_fraction() const;
  double roof_GBps() const;
};

// A set of roof pairs (PipelineStats::roof), e.g. every run's of a job: the
// kernel's GB/s over its copy's, pair by pair (copy seconds over kernel
// seconds: the same bytes both ways); their median, the interval that
// holds it with 95% confidence (core/Median.hpp), and the copies' median GB/s.
namespace roof_pairs {
std::vector<double> kernel_fractions(const std::vector<PipelineStats::RoofCall>& pairs);
double kernel_fraction(const std::vector<PipelineStats::RoofCall>& pairs);
MedianInterval kernel_fraction_interval(const std::vector<PipelineStats::RoofCall>& pairs);
double copy_GBps(const std::vector<PipelineStats::RoofCall>& pairs);
}  // namespace roof_pairs

// Whether block b of n has its copy roof timed: every other block, and the
// only block of a one-block plan.
inline bool roof_sampled(int b, int n) { return b % 2 == 1 || n == 1; }

struct PipelineOptions {
  Strategy strategy = Strategy::flat;
  bool progress = true;         // a progress line per block on `progress_out`
  std::string label;            // names the job in progress lines
  // The job's last run: in a log its last block's line is written whatever
  // the time (earlier runs of a job leave theirs to the 10 s clock).
  bool ends_job = true;
  // 0: the overlapped pipeline. N > 0: the per-thread pipeline on N threads
  // (see per_thread_threads; run_pipeline throws std::invalid_argument
  // where it does not apply).
  int threads = 0;
  // Host spaces: stage through separate compute buffers even where the
  // kernel could work in the staging slots, so the device path's staging
  // is exercised (and tested) on machines without a device.
  bool force_staging = false;
  // The per-thread pipeline: each thread reads its next block on a helper
  // thread while it computes and writes the one before (core/pipeline/
  // ReadAhead.hpp), two requests at the disk a thread instead of one; for
  // inputs read past the page cache, whose reads wait on the device. Holds
  // per_thread_read_ahead_bytes more a thread. Ignored elsewhere.
  bool read_ahead = false;
  // Where buffers come from: kept from the last run (see BufferCache), or,
  // when null, allocated for this run alone.
  BufferCache* buffers = nullptr;
  // Test hook: called by the I/O threads before each read/write, so tests can
  // make a stage slow and check that blocks still land in order.
  std::function<void(Phase, int block)> before_io;
};

// Bytes the per-thread pipeline holds for each of its threads: a discount
// and a cv block (LayoutLeft: the discount's read buffer, which the cv is
// transposed back into, and two compute cubes of a tile each), one more
// where its blocks are checked against an earlier job's output, and its
// multBy rows (twice for LayoutLeft); reading ahead, what that adds.
double per_thread_buffer_bytes(const BlockPlan& plan, LayoutKind layout, bool read_ahead = false);
// What reading ahead (PipelineOptions::read_ahead) adds a thread: a second
// discount block and, unless multBy is resident, multBy rows.
double per_thread_read_ahead_bytes(const BlockPlan& plan);

// A LayoutLeft block in the per-thread pipeline is transposed in, computed
// and transposed out tile by tile, so a tile's two compute cubes stay in the
// core's L2 cache from its transpose in to its transpose out: a tile's cube
// is at most left_tile_bytes (two of them half of a 1 MiB L2). The block
// itself stays as large as the plan makes it, so the file is still read and
// written in long runs. Whole 2 MiB blocks went through L3 and memory three
// times over; tiles made the layout deck's transposes and kernel 1.3x faster.
inline constexpr std::size_t left_tile_bytes = std::size_t(256) << 10;

// Ids per kernel call: a tile's for LayoutLeft in the per-thread pipeline
// (`per_thread_threads` > 0; sized for the plan's dates, so a block with
// fewer dates keeps its id range's tiles; a multiple of the transposes'
// 16-id tiles where it can be), else the plan's block ids.
Index kernel_ids(const BlockPlan& plan, LayoutKind layout, int per_thread_threads);

// How many threads the per-thread pipeline runs for this plan: every thread
// of the host OpenMP space, as far as `budget_bytes` holds each thread's
// block buffers beside a resident multBy. 0, with the reason in `why_not`,
// where it does not apply: another execution space, the `team` strategy
// (teams cannot launch inside a thread's block), BlockIO calls that are not
// `concurrent`, or fewer than two threads. `read_ahead`: each thread's
// buffers include what reading ahead adds (per_thread_read_ahead_bytes).
int per_thread_threads(const BlockPlan& plan, std::size_t budget_bytes, Strategy strategy, LayoutKind layout,
                       bool concurrent_io, std::string& why_not, bool read_ahead = false);

// Runs the plan. Throws whatever BlockIO throws (from any thread), after the
// other threads have stopped.
template <class Scalar, class Layout>
PipelineStats run_pipeline(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                           std::ostream& progress_out);

// The element types and layouts the pipelines are compiled for: M(Scalar, Layout) each.
#define CVEST_FOR_EACH_PIPELINE_TYPE(M) \
  M(double, Kokkos::LayoutRight)        \
  M(double, Kokkos::LayoutLeft)         \
  M(float, Kokkos::LayoutRight)         \
  M(float, Kokkos::LayoutLeft)

}  // namespace cvest
