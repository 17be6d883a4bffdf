// The per-thread pipeline (host OpenMP): see Pipeline.hpp.
#include "core/pipeline/Pipeline.hpp"

#include "core/Multiply.hpp"
#include "core/Policies.hpp"
#include "core/pipeline/BlockRuns.hpp"
#include "core/pipeline/Channel.hpp"
#include "core/pipeline/ReadAhead.hpp"
#include "core/Roof.hpp"
#include "core/pipeline/Recording.hpp"
#include "core/pipeline/Staging.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <ostream>
#include <system_error>
#include <thread>
#include <utility>
#ifdef KOKKOS_ENABLE_OPENMP
#include <omp.h>
#endif

namespace cvest {

Index kernel_ids(const BlockPlan& plan, LayoutKind layout, int per_thread_threads) {
  if (layout != LayoutKind::left || per_thread_threads <= 0) return plan.block_ids;
  const double id_bytes = double(std::max<Index>(plan.block_dates, 1) * plan.K) * double(plan.element_size);
  Index ids = std::max<Index>(1, Index(double(left_tile_bytes) / id_bytes));
  if (ids > 16) ids -= ids % 16;
  return std::min(ids, plan.block_ids);
}

double per_thread_read_ahead_bytes(const BlockPlan& plan) {
  const Index rows = plan.multby_resident ? 0 : 1;  // a resident multBy is not read
  return double((plan.block_dates + rows) * plan.block_ids * plan.K) * double(plan.element_size);
}

double per_thread_buffer_bytes(const BlockPlan& plan, LayoutKind layout, bool read_ahead) {
  const double element = double(plan.element_size);
  const double block = double(plan.block_dates * plan.block_ids * plan.K) * element;
  const double row = double(plan.block_ids * plan.K) * element;
  const double ahead = read_ahead ? per_thread_read_ahead_bytes(plan) : 0.0;
  if (layout == LayoutKind::right) return 3 * block + row + ahead;
  // LayoutLeft: the transposed-back result goes where the block was read;
  // the compute cubes hold one tile each.
  const double tile = double(plan.block_dates * kernel_ids(plan, layout, 1) * plan.K) * element;
  return 2 * block + 2 * tile + 2 * row + ahead;
}

int per_thread_threads(const BlockPlan& plan, std::size_t budget_bytes, Strategy strategy, LayoutKind layout,
                       bool concurrent_io, std::string& why_not, bool read_ahead) {
#ifdef KOKKOS_ENABLE_OPENMP
  if (!std::is_same_v<ExecSpace, Kokkos::OpenMP>) {
#else
  {
#endif
    why_not = std::string("the execution space is ") + ExecSpace::name() + ", not host OpenMP threads";
    return 0;
  }
  if (strategy == Strategy::team) {
    why_not = "strategy team launches teams, which cannot run inside one thread's block";
    return 0;
  }
  if (!concurrent_io) {
    why_not = "the output's blocks cannot be written from several threads at once";
    return 0;
  }
  const double resident = plan.multby_resident && !plan.multby_reserved
                              ? 2.0 * double(plan.N * plan.K) * double(plan.element_size)
                              : 0.0;
  const int fit =
      int(std::max(0.0, double(budget_bytes) - resident) / per_thread_buffer_bytes(plan, layout, read_ahead));
  const int threads = std::min(ExecSpace().concurrency(), fit);
  if (threads < 2) {
    why_not = threads == ExecSpace().concurrency() ? "one thread: no block runs beside another"
                                                   : "memory_budget holds one thread's blocks";
    return 0;
  }
  return threads;
}

namespace pipeline_detail {

// The per-thread pipeline (see Pipeline.hpp): options.threads OpenMP threads
// each take the next block, read it, compute it with the strategy's kernel
// (Kokkos runs a kernel launched inside a parallel region inline, on the
// launching thread), and write it. Phases are timed per block, so the
// seconds per phase add up across threads. Host spaces only.
template <class Scalar, class Layout>
class PerThread {
 public:
  using Space = ExecSpace;
  using Mem = Space::memory_space;
  using Flat = Kokkos::View<Scalar*, Mem>;
  static constexpr bool right = std::is_same_v<Layout, Kokkos::LayoutRight>;

  PerThread(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options, std::ostream& out)
      : plan_(plan), io_(io), options_(options), nblocks_(int(plan.blocks.size())), K_(plan.K),
        threads_(std::min(options.threads, nblocks_)),
        // LayoutLeft blocks are computed a tile of ids at a time (see left_tile_bytes).
        tile_(kernel_ids(plan, layout_kind<Layout>(), options.threads)),
        // A LayoutLeft block is transposed out of its compute buffers into
        // the buffer it was read into (free once transposed in): one block
        // buffer less per thread, and one less for the caches to hold.
        transpose_out_to_read_buffer_(!right && !io.discount_at && !io.cv_at),
        // Only where there is a next block to read (more blocks than threads).
        reads_ahead_(options.read_ahead && !io.discount_at && nblocks_ > threads_),
        progress_(plan, options, rec_, out, esize),
        // Kokkos Tools expect one kernel at a time (the kernel timer keeps
        // the running kernel in a global, space-time-stack one stack of
        // frames), so with a tool loaded the threads launch their kernels
        // one at a time; reads and writes still overlap them. Without a
        // tool, no lock.
        one_launch_at_a_time_(Kokkos::Tools::profileLibraryLoaded()),
        runs_(block_runs(plan.blocks, plan.id_ranges_together && !io.multby_at, threads_)) {
    allocate();
  }

  PipelineStats run() {
#ifdef KOKKOS_ENABLE_OPENMP
#pragma omp parallel num_threads(threads_)
    work(omp_get_thread_num());
#else
    work(0);
#endif
    stats_.read_ahead = reads_ahead_ && !helper_refused_;
    return finish_run(progress_, stats_, rec_, failure_);
  }

 private:
  static constexpr double esize = sizeof(Scalar);

  // What a block is read into: its discount and its id range's multBy
  // rows (m_ids: their first id; -1: none yet).
  struct Reads {
    Flat d, m;
    Index m_ids = -1;
  };
  // One thread's; allocated before the parallel region (no allocation inside
  // it) and reused for every block it takes.
  struct Buffers {
    // `in`: the block being computed; `ahead`: the next block's, read
    // meanwhile (options.read_ahead; swapped with `in` once read).
    Reads in, ahead;
    Flat cv, d_compute, cv_compute, m_compute;
    Index m_compute_ids = -1;
    // The kernel call of this thread's last block, where no roof preceded
    // it: the pair of its next block's roof (PipelineStats::roof).
    bool fresh = false;
    double fresh_s = 0, fresh_bytes = 0;
    // cv (LayoutLeft: the tiles' cv) mapped for this run and not yet
    // written: faulted in by its thread before its first block, or the
    // kernel call that first wrote it paid the faults and its pair with the
    // next block's roof read 0.17-0.26 against 0.7-0.9 for the run's others
    // (seed deck, first run).
    bool cv_unwritten = false, cv_compute_unwritten = false;
  };

  void allocate() {
    const auto alloc = [&](const std::string& label, std::size_t n, bool* fresh = nullptr) {
      if (fresh) *fresh = true;
      if (options_.buffers) return options_.buffers->get<Scalar, Mem>(label, n, fresh);
      return Flat(Kokkos::view_alloc(label, Kokkos::WithoutInitializing), n);
    };
    const std::size_t cube = std::size_t(plan_.block_dates * plan_.block_ids * K_),
                      row = std::size_t(plan_.block_ids * K_), tile = std::size_t(plan_.block_dates * tile_ * K_);
    buffers_.resize(static_cast<std::size_t>(threads_));
    for (int w = 0; w < threads_; ++w) {
      const std::string tag = std::to_string(w);
      Buffers& buf = buffers_[std::size_t(w)];
      buf.in.d = alloc("cvest::per_thread::discount" + tag, io_.discount_at ? 0 : cube);
      buf.cv = alloc("cvest::per_thread::cv" + tag, io_.cv_at || transpose_out_to_read_buffer_ ? 0 : cube,
                     &buf.cv_unwritten);
      buf.in.m = alloc("cvest::per_thread::multBy" + tag, io_.multby_at ? 0 : row);
      buf.ahead.d = alloc("cvest::per_thread::discount_ahead" + tag, reads_ahead_ ? cube : 0);
      buf.ahead.m = alloc("cvest::per_thread::multBy_ahead" + tag, reads_ahead_ && !io_.multby_at ? row : 0);
      buf.d_compute = alloc("cvest::per_thread::discount_left" + tag, right ? 0 : tile);
      buf.cv_compute = alloc("cvest::per_thread::cv_left" + tag, right ? 0 : tile, &buf.cv_compute_unwritten);
      buf.m_compute = alloc("cvest::per_thread::multBy_left" + tag, right ? 0 : row);
    }
  }

  template <class Step>
  void launch(Step&& timed_step) {
    if (!one_launch_at_a_time_) return timed_step();
    const std::lock_guard<std::mutex> lock(launch_mutex_);
    timed_step();
  }

  // Thread w's loop: the next block read, computed and written, until none
  // is left or another thread failed (blocks taken a run at a time:
  // BlockRuns.hpp). Reading ahead, the block after is
  // taken and read by the thread's helper while this one is computed and
  // written.
  void work(int w) {
    Buffers& buf = buffers_[std::size_t(w)];
    // Outside the try: a failure is set before the helper's read under way
    // is waited for, so the other threads stop taking blocks at once.
    std::optional<ReadAhead> helper;
    try {
      if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible) {
        if (buf.cv_unwritten) fault_in(buf.cv.data(), buf.cv.size() * sizeof(Scalar));
        if (buf.cv_compute_unwritten) fault_in(buf.cv_compute.data(), buf.cv_compute.size() * sizeof(Scalar));
      }
      buf.cv_unwritten = buf.cv_compute_unwritten = false;
      if (reads_ahead_) start_helper(helper);
      const auto read_ahead = [&](int b) {
        if (b < nblocks_ && !failure_.failed()) helper->start([this, b, &buf] { read(b, buf.ahead, &buf.in); });
      };
      RunTaker::Cursor mine;
      int b = runs_.take(mine), after = -1;
      if (helper) read_ahead(b);
      for (; b < nblocks_ && !failure_.failed(); b = helper ? after : runs_.take(mine)) {
        const Block& blk = plan_.blocks[b];
        const double bytes = double(blk.dates.size() * blk.ids.size() * K_) * esize;
        if (helper) {
          helper->wait();
          std::swap(buf.in, buf.ahead);
          read_ahead(after = runs_.take(mine));
        } else {
          read(b, buf.in, nullptr);
        }
        const Scalar* m = io_.multby_at ? io_.multby_at(blk.ids) : buf.in.m.data();
        const Scalar* d = io_.discount_at ? io_.discount_at(blk) : buf.in.d.data();
        Scalar* cv = io_.cv_at ? io_.cv_at(blk) : transpose_out_to_read_buffer_ ? buf.in.d.data() : buf.cv.data();
        if constexpr (right) compute_in_place(b, buf, m, d, cv);
        else compute_in_tiles(b, buf, m, d, cv);
        if (options_.before_io) options_.before_io(Phase::write, b);
        if (!io_.cv_at) rec_.time(b, Phase::write, bytes, [&] { io_.write_cv(blk, cv); });
        progress_.block_done(++done_);
      }
    } catch (...) {
      failure_.set(std::current_exception());
    }
  }

  // A thread the system refuses (a process or cgroup thread limit): this
  // thread reads its blocks itself, and the run says not every thread read ahead.
  void start_helper(std::optional<ReadAhead>& helper) {
    try {
      helper.emplace();
    } catch (const std::system_error&) {
      helper_refused_ = true;
    }
  }

  // Block b's discount and multBy rows into `into`. `beside`: the reads of
  // the block being computed meanwhile (read ahead), whose multBy rows are
  // copied where they are the ones b needs (a copy from memory, not the disk).
  void read(int b, Reads& into, const Reads* beside) {
    const Block& blk = plan_.blocks[b];
    const Index nb = blk.ids.size();
    if (options_.before_io) options_.before_io(Phase::read, b);
    const bool read_m = !io_.multby_at && into.m_ids != blk.ids.begin;
    const bool copy_m = read_m && beside && beside->m_ids == blk.ids.begin;
    const double bytes = io_.discount_at ? 0.0 : double(blk.dates.size() * nb * K_) * esize;
    rec_.time(b, Phase::read, bytes + (read_m && !copy_m ? double(nb * K_) * esize : 0.0), [&] {
      if (copy_m) std::memcpy(into.m.data(), beside->m.data(), std::size_t(nb * K_) * sizeof(Scalar));
      else if (read_m) io_.read_multby(blk.ids, into.m.data());
      if (read_m) into.m_ids = blk.ids.begin;
      if (!io_.discount_at) io_.read_discount(blk, into.d.data());
    });
  }

  // LayoutRight: computed in the I/O buffers; h2d and d2h are empty.
  void compute_in_place(int b, Buffers& buf, const Scalar* m, const Scalar* d, Scalar* cv) {
    const Block& blk = plan_.blocks[b];
    const Index tb = blk.dates.size(), nb = blk.ids.size();
    const double kernel_bytes = block_kernel_bytes(blk, K_, esize);
    const CvNext next = io_.cv_at ? CvNext::memory : CvNext::cache;  // else the block is written next
    const auto stores =
        roof::kernel_stores<Space>(options_.strategy, layout_kind<Layout>(), tb, nb, K_, sizeof(Scalar), next);
    rec_.nothing(b, Phase::h2d);
    launch([&] {
      // The roof (PipelineStats::roof): after a fresh call, this block's
      // discount copied into its cv in the kernel's place. With fewer than
      // two blocks a thread (a thread may take one), a sampled block's
      // (roof_sampled) after its kernel, its cv into its consumed discount.
      const bool few = nblocks_ < 2 * threads_, in_place = !few && buf.fresh;
      if (in_place) rec_.roof(kernel_bytes, buf.fresh_s * kernel_bytes / buf.fresh_bytes, [&] {
        roof::copy_in_walk_here(cv, d, policy::FlatWalk(tb, nb * K_, sizeof(Scalar), d, cv), m, stores);
      });
      const double kernel_begin = rec_.now();
      multiply(options_.strategy, Space(),
               Operands<Scalar, Layout, Mem>{Table<const Scalar, Layout, Mem>(m, nb, K_),
                                             Cube<const Scalar, Layout, Mem>(d, tb, nb, K_),
                                             Cube<Scalar, Layout, Mem>(cv, tb, nb, K_)},
               next);
      const double kernel_end = rec_.now();
      rec_.span(b, Phase::kernel, kernel_bytes, kernel_begin, kernel_end);
      if (in_place) rec_.after_roof(kernel_end - kernel_begin, kernel_bytes);
      buf.fresh = !in_place;
      buf.fresh_s = kernel_end - kernel_begin;
      buf.fresh_bytes = kernel_bytes;
      if (few && roof_sampled(b, nblocks_) && !io_.discount_at)
        rec_.roof(kernel_bytes, kernel_end - kernel_begin, [&] {
          const policy::FlatWalk walk(tb, nb * K_, sizeof(Scalar), cv, buf.in.d.data());
          roof::copy_in_walk_here(buf.in.d.data(), cv, walk, m, stores);
        });
    });
    rec_.nothing(b, Phase::d2h);
  }

  // What a LayoutLeft block's tiles took, phase by phase: the first tile's
  // start and the tiles' seconds together (the phases alternate tile by tile).
  struct TileTimes {
    double h2d_s = 0, kernel_s = 0, d2h_s = 0, h2d_begin = -1, kernel_begin = -1, d2h_begin = -1;
  };
  template <class Step>
  void timed(double& sum, double& first, Step&& step) {
    const double t0 = rec_.now();
    step();
    if (first < 0) first = t0;
    sum += rec_.now() - t0;
  }

  // LayoutLeft: C-order file data <-> LayoutLeft compute buffers, a tile of
  // ids at a time (see left_tile_bytes): each tile's slice of the block is
  // transposed in, computed and transposed back. multBy's rows are
  // transposed once per id range, tile by tile, each as a (1, tile ids, K)
  // cube at its tile's offset, reused by the id range's later blocks: tiles
  // are sized for the plan's dates, so a shorter last date block has the
  // same tiles.
  void compute_in_tiles(int b, Buffers& buf, const Scalar* m, const Scalar* d, Scalar* cv) {
    const Block& blk = plan_.blocks[b];
    const Index tb = blk.dates.size(), nb = blk.ids.size();
    const bool stage_m = buf.m_compute_ids != blk.ids.begin;
    TileTimes t;
    for (Index s0 = 0; s0 < nb; s0 += tile_) compute_tile(b, buf, m, d, cv, s0, stage_m, t);
    buf.m_compute_ids = blk.ids.begin;
    // One span per phase: from its first tile's start, as long as its tiles
    // took together.
    const double bytes = double(tb * nb * K_) * esize;
    rec_.span(b, Phase::h2d, bytes + (stage_m ? double(nb * K_) * esize : 0.0), t.h2d_begin, t.h2d_begin + t.h2d_s);
    rec_.span(b, Phase::kernel, block_kernel_bytes(blk, K_, esize), t.kernel_begin, t.kernel_begin + t.kernel_s);
    rec_.span(b, Phase::d2h, bytes, t.d2h_begin, t.d2h_begin + t.d2h_s);
  }

  void compute_tile(int b, Buffers& buf, const Scalar* m, const Scalar* d, Scalar* cv, Index s0, bool stage_m,
                    TileTimes& t) {
    const Space space;
    const Block& blk = plan_.blocks[b];
    const Index tb = blk.dates.size(), nb = blk.ids.size(), ns = std::min(tile_, nb - s0);
    Cube<Scalar, Layout, Mem> d_left(buf.d_compute.data(), tb, ns, K_), cv_left(buf.cv_compute.data(), tb, ns, K_);
    Scalar* m_left = buf.m_compute.data() + s0 * K_;
    launch([&] {
      timed(t.h2d_s, t.h2d_begin, [&] {
        transpose_host<true>(space, const_cast<Scalar*>(d) + s0 * K_, nb * K_, d_left.data(), tb, ns, K_,
                             "cvest::per_thread::transpose_in");
        if (stage_m)
          transpose_host<true>(space, const_cast<Scalar*>(m) + s0 * K_, nb * K_, m_left, 1, ns, K_,
                               "cvest::per_thread::transpose_in");
      });
    });
    launch([&] {
      const double tile_kernel_s = t.kernel_s;
      timed(t.kernel_s, t.kernel_begin, [&] {
        multiply(options_.strategy, space,
                 Operands<Scalar, Layout, Mem>{Table<const Scalar, Layout, Mem>(m_left, ns, K_), d_left, cv_left},
                 CvNext::cache);
      });
      // The roof, tile by tile as the kernel: the tile's cv copied into its
      // consumed discount cube, before it is transposed out.
      if (roof_sampled(b, nblocks_))
        rec_.roof(kernel_call_bytes(tb, ns, K_, esize), t.kernel_s - tile_kernel_s, [&] {
          roof::copy_here(d_left.data(), cv_left.data(), std::size_t(tb * ns * K_), roof::Stores::regular);
          roof::read_here(m_left, std::size_t(ns * K_));
        });
    });
    launch([&] {
      timed(t.d2h_s, t.d2h_begin, [&] {
        transpose_host<false>(space, cv + s0 * K_, nb * K_, cv_left.data(), tb, ns, K_,
                              "cvest::per_thread::transpose_out");
      });
    });
  }

  const BlockPlan& plan_;
  const BlockIO<Scalar>& io_;
  const PipelineOptions& options_;
  const int nblocks_;
  const Index K_;
  const int threads_;
  const Index tile_;
  const bool transpose_out_to_read_buffer_;
  const bool reads_ahead_;
  PipelineStats stats_;
  Recorder rec_{stats_};  // the run's clock: from here
  ProgressLine progress_;
  Failure failure_;
  std::atomic<int> done_{0};
  std::atomic<bool> helper_refused_{false};
  std::mutex launch_mutex_;
  const bool one_launch_at_a_time_;
  RunTaker runs_;  // which blocks a thread takes together
  std::vector<Buffers> buffers_;
};

template <class Scalar, class Layout>
PipelineStats run_per_thread(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                             std::ostream& progress_out) {
  if constexpr (!policy::on_host<ExecSpace>) {
    throw std::invalid_argument("cvest: the per-thread pipeline runs on host spaces only");
  } else {
    if (!io.concurrent) throw std::invalid_argument("cvest: the per-thread pipeline needs concurrent BlockIO calls");
    if (options.strategy == Strategy::team)
      throw std::invalid_argument("cvest: strategy team cannot run in the per-thread pipeline");
    if (plan.blocks.empty()) return {};
    return PerThread<Scalar, Layout>(plan, io, options, progress_out).run();
  }
}

#define CVEST_INSTANTIATE(SCALAR, LAYOUT)                                                                   \
  template PipelineStats run_per_thread<SCALAR, LAYOUT>(const BlockPlan&, const BlockIO<SCALAR>&, const PipelineOptions&, \
                                                std::ostream&);
CVEST_FOR_EACH_PIPELINE_TYPE(CVEST_INSTANTIATE)
#undef CVEST_INSTANTIATE

}  // namespace pipeline_detail

}  // namespace cvest
