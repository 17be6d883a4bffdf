// The per-thread pipeline (host OpenMP): see Pipeline.hpp.
#include "core/pipeline/Pipeline.hpp"

#include "core/Multiply.hpp"
#include "core/Policies.hpp"
#include "core/pipeline/Channel.hpp"
#include "core/Roof.hpp"
#include "core/pipeline/Recording.hpp"
#include "core/pipeline/Staging.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <ostream>
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

double per_thread_buffer_bytes(const BlockPlan& plan, LayoutKind layout) {
  const double element = double(plan.element_size);
  const double block = double(plan.block_dates * plan.block_ids * plan.K) * element;
  const double row = double(plan.block_ids * plan.K) * element;
  if (layout == LayoutKind::right) return 3 * block + row;
  // LayoutLeft: the transposed-back result goes where the block was read;
  // the compute cubes hold one tile each.
  const double tile = double(plan.block_dates * kernel_ids(plan, layout, 1) * plan.K) * element;
  return 2 * block + 2 * tile + 2 * row;
}

int per_thread_threads(const BlockPlan& plan, std::size_t budget_bytes, Strategy strategy, LayoutKind layout,
                       bool concurrent_io, std::string& why_not) {
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
  const double resident = plan.multby_resident ? 2.0 * double(plan.N * plan.K) * double(plan.element_size) : 0.0;
  const int fit = int(std::max(0.0, double(budget_bytes) - resident) / per_thread_buffer_bytes(plan, layout));
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
// seconds per phase add up across threads.
template <class Scalar, class Layout>
PipelineStats run_per_thread(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                             std::ostream& progress_out) {
  using Space = ExecSpace;
  using Mem = Space::memory_space;
  constexpr bool right = std::is_same_v<Layout, Kokkos::LayoutRight>;
  if constexpr (!policy::on_host<Space>) {
    throw std::invalid_argument("cvest: the per-thread pipeline runs on host spaces only");
  } else {
    if (!io.concurrent) throw std::invalid_argument("cvest: the per-thread pipeline needs concurrent BlockIO calls");
    if (options.strategy == Strategy::team)
      throw std::invalid_argument("cvest: strategy team cannot run in the per-thread pipeline");
    PipelineStats stats;
    const int nblocks = int(plan.blocks.size());
    if (nblocks == 0) return stats;
    const Index K = plan.K;
    const std::size_t cube_elems = std::size_t(plan.block_dates * plan.block_ids * K),
                      row_elems = std::size_t(plan.block_ids * K);
    // LayoutLeft blocks are computed a tile of ids at a time (see left_tile_bytes).
    const Index tile = kernel_ids(plan, layout_kind<Layout>(), options.threads);
    const std::size_t tile_elems = std::size_t(plan.block_dates * tile * K);
    const double esize = sizeof(Scalar);
    const int threads = std::min(options.threads, nblocks);
    Recorder rec(stats);
    ProgressLine progress(plan, options, rec, progress_out, esize);
    Failure failure;
    std::atomic<int> next{0}, done{0};
    // Kokkos Tools expect one kernel at a time (the kernel timer keeps the
    // running kernel in a global, space-time-stack one stack of frames), so
    // with a tool loaded the threads launch their kernels one at a time;
    // reads and writes still overlap them. Without a tool, no lock.
    std::mutex launch_mutex;
    const bool one_launch_at_a_time = Kokkos::Tools::profileLibraryLoaded();
    const auto launch = [&](auto&& timed_step) {
      if (!one_launch_at_a_time) return timed_step();
      const std::lock_guard<std::mutex> lock(launch_mutex);
      timed_step();
    };

    // One thread's loop; its buffers are allocated before the parallel
    // region (no allocation inside it) and reused for every block it takes.
    struct Buffers {
      Kokkos::View<Scalar*, Mem> d, cv, m, d_compute, cv_compute, m_compute;
      Index m_ids = -1, m_compute_ids = -1;
    };
    std::vector<Buffers> buffers(static_cast<std::size_t>(threads));
    // A LayoutLeft block is transposed out of its compute buffers into the
    // buffer it was read into (free once transposed in): one block buffer
    // less per thread, and one less for the caches to hold.
    const bool transpose_out_to_read_buffer = !right && !io.discount_at && !io.cv_at;
    const auto alloc = [&](const std::string& label, std::size_t n) {
      if (options.buffers) return options.buffers->get<Scalar, Mem>(label, n);
      return Kokkos::View<Scalar*, Mem>(Kokkos::view_alloc(label, Kokkos::WithoutInitializing), n);
    };
    for (int w = 0; w < threads; ++w) {
      const std::string tag = std::to_string(w);
      Buffers& buf = buffers[std::size_t(w)];
      buf.d = alloc("cvest::per_thread::discount" + tag, io.discount_at ? 0 : cube_elems);
      buf.cv = alloc("cvest::per_thread::cv" + tag, io.cv_at || transpose_out_to_read_buffer ? 0 : cube_elems);
      buf.m = alloc("cvest::per_thread::multBy" + tag, io.multby_at ? 0 : row_elems);
      buf.d_compute = alloc("cvest::per_thread::discount_left" + tag, right ? 0 : tile_elems);
      buf.cv_compute = alloc("cvest::per_thread::cv_left" + tag, right ? 0 : tile_elems);
      buf.m_compute = alloc("cvest::per_thread::multBy_left" + tag, right ? 0 : row_elems);
    }
    const auto work = [&](int w) {
      Buffers& buf = buffers[std::size_t(w)];
      const Space space;
      try {
        for (int b = next++; b < nblocks && !failure.failed(); b = next++) {
          const Block& blk = plan.blocks[b];
          const Index tb = blk.dates.size(), nb = blk.ids.size();
          const double bytes = double(tb * nb * K) * esize;
          if (options.before_io) options.before_io(Phase::read, b);
          const bool read_m = !io.multby_at && buf.m_ids != blk.ids.begin;
          rec.time(b, Phase::read, (io.discount_at ? 0.0 : bytes) + (read_m ? double(nb * K) * esize : 0.0), [&] {
            if (read_m) {
              io.read_multby(blk.ids, buf.m.data());
              buf.m_ids = blk.ids.begin;
            }
            if (!io.discount_at) io.read_discount(blk, buf.d.data());
          });
          const Scalar* m = io.multby_at ? io.multby_at(blk.ids) : buf.m.data();
          const Scalar* d = io.discount_at ? io.discount_at(blk) : buf.d.data();
          Scalar* cv = io.cv_at ? io.cv_at(blk) : transpose_out_to_read_buffer ? buf.d.data() : buf.cv.data();
          const double kernel_bytes = block_kernel_bytes(blk, K, esize);
          const bool sampled = roof_sampled(b, nblocks);
          if constexpr (right) {  // computes in the I/O buffers: h2d and d2h are empty
            rec.nothing(b, Phase::h2d);
            launch([&] {
              const double kernel_begin = rec.now();
              multiply(options.strategy, space,
                       Operands<Scalar, Layout, Mem>{Table<const Scalar, Layout, Mem>(m, nb, K),
                                                     Cube<const Scalar, Layout, Mem>(d, tb, nb, K),
                                                     Cube<Scalar, Layout, Mem>(cv, tb, nb, K)},
                       io.cv_at ? CvNext::memory : CvNext::cache);  // the block is written next
              const double kernel_end = rec.now();
              rec.span(b, Phase::kernel, kernel_bytes, kernel_begin, kernel_end);
              // The roof: the block's cv copied into its discount buffer,
              // which the kernel has consumed (own buffers only).
              if (sampled && !io.discount_at)
                rec.roof(kernel_bytes, kernel_end - kernel_begin, [&] {
                  roof::copy_here(buf.d.data(), cv, std::size_t(tb * nb * K),
                                  io.cv_at ? roof::Stores::streaming : roof::Stores::regular);
                  roof::read_here(m, std::size_t(nb * K));
                });
            });
            rec.nothing(b, Phase::d2h);
          } else {
            // C-order file data <-> LayoutLeft compute buffers, a tile of
            // ids at a time (see left_tile_bytes): each tile's slice of the
            // block is transposed in, computed and transposed back. multBy's
            // rows are transposed once per id range, tile by tile, each as a
            // (1, tile ids, K) cube at its tile's offset, reused by the id
            // range's later blocks: tiles are sized for the plan's dates, so
            // a shorter last date block has the same tiles.
            const bool stage_m = buf.m_compute_ids != blk.ids.begin;
            double h2d_s = 0, kernel_s = 0, d2h_s = 0, h2d_begin = -1, kernel_begin = -1, d2h_begin = -1;
            const auto timed = [&](double& sum, double& first, auto&& step) {
              const double t0 = rec.now();
              step();
              if (first < 0) first = t0;
              sum += rec.now() - t0;
            };
            for (Index s0 = 0; s0 < nb; s0 += tile) {
              const Index ns = std::min(tile, nb - s0);
              Cube<Scalar, Layout, Mem> d_left(buf.d_compute.data(), tb, ns, K), cv_left(buf.cv_compute.data(), tb, ns, K);
              Scalar* m_left = buf.m_compute.data() + s0 * K;
              launch([&] {
                timed(h2d_s, h2d_begin, [&] {
                  transpose_host<true>(space, const_cast<Scalar*>(d) + s0 * K, nb * K, d_left.data(), tb, ns, K,
                                       "cvest::per_thread::transpose_in");
                  if (stage_m)
                    transpose_host<true>(space, const_cast<Scalar*>(m) + s0 * K, nb * K, m_left, 1, ns, K,
                                         "cvest::per_thread::transpose_in");
                });
              });
              launch([&] {
                const double tile_kernel_s = kernel_s;
                timed(kernel_s, kernel_begin, [&] {
                  multiply(options.strategy, space,
                           Operands<Scalar, Layout, Mem>{Table<const Scalar, Layout, Mem>(m_left, ns, K), d_left, cv_left},
                           CvNext::cache);
                });
                // The roof, tile by tile as the kernel: the tile's cv copied
                // into its consumed discount cube, before it is transposed out.
                if (sampled)
                  rec.roof(kernel_call_bytes(tb, ns, K, esize), kernel_s - tile_kernel_s, [&] {
                    roof::copy_here(d_left.data(), cv_left.data(), std::size_t(tb * ns * K), roof::Stores::regular);
                    roof::read_here(m_left, std::size_t(ns * K));
                  });
              });
              launch([&] {
                timed(d2h_s, d2h_begin, [&] {
                  transpose_host<false>(space, cv + s0 * K, nb * K, cv_left.data(), tb, ns, K,
                                        "cvest::per_thread::transpose_out");
                });
              });
            }
            buf.m_compute_ids = blk.ids.begin;
            // One span per phase: from its first tile's start, as long as its
            // tiles took together (the phases alternate tile by tile).
            rec.span(b, Phase::h2d, bytes + (stage_m ? double(nb * K) * esize : 0.0), h2d_begin, h2d_begin + h2d_s);
            rec.span(b, Phase::kernel, kernel_bytes, kernel_begin, kernel_begin + kernel_s);
            rec.span(b, Phase::d2h, bytes, d2h_begin, d2h_begin + d2h_s);
          }
          if (options.before_io) options.before_io(Phase::write, b);
          if (!io.cv_at) rec.time(b, Phase::write, bytes, [&] { io.write_cv(blk, cv); });
          progress.block_done(++done);
        }
      } catch (...) {
        failure.set(std::current_exception());
      }
    };
#ifdef KOKKOS_ENABLE_OPENMP
#pragma omp parallel num_threads(threads)
    work(omp_get_thread_num());
#else
    work(0);
#endif
    progress.finish();
    stats.total_s = rec.now();
    failure.rethrow();
    return stats;
  }
}

#define CVEST_INSTANTIATE(SCALAR, LAYOUT)                                                                   \
  template PipelineStats run_per_thread<SCALAR, LAYOUT>(const BlockPlan&, const BlockIO<SCALAR>&, const PipelineOptions&, \
                                                std::ostream&);
CVEST_FOR_EACH_PIPELINE_TYPE(CVEST_INSTANTIATE)
#undef CVEST_INSTANTIATE

}  // namespace pipeline_detail

}  // namespace cvest
