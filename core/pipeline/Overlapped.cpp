// The overlapped pipeline (every space): see Pipeline.hpp.
#include "core/pipeline/Pipeline.hpp"

#include "core/Multiply.hpp"
#include "core/Policies.hpp"
#include "core/pipeline/Channel.hpp"
#include "core/Roof.hpp"
#include "core/pipeline/Recording.hpp"
#include "core/pipeline/Staging.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
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

std::string_view to_string(Phase phase) {
  switch (phase) {
    case Phase::read: return "read";
    case Phase::h2d: return "h2d";
    case Phase::kernel: return "kernel";
    case Phase::d2h: return "d2h";
    case Phase::write: return "write";
  }
  return "?";
}

double PipelineStats::kernel_roof_fraction() const {
  std::vector<double> ratios;  // the same bytes both ways: GB/s over GB/s is copy seconds over kernel seconds
  for (const RoofCall& c : roof)
    if (c.kernel_s > 0 && c.copy_s > 0) ratios.push_back(c.copy_s / c.kernel_s);
  return roof::median(std::move(ratios));
}

double PipelineStats::roof_GBps() const {
  std::vector<double> rates;
  for (const RoofCall& c : roof)
    if (c.copy_s > 0) rates.push_back(c.bytes / c.copy_s / 1e9);
  return roof::median(std::move(rates));
}

namespace pipeline_detail {

// The per-thread pipeline (PerThread.cpp), which run_pipeline hands a plan to
// when options.threads > 0.
template <class Scalar, class Layout>
PipelineStats run_per_thread(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                             std::ostream& progress_out);

}  // namespace pipeline_detail

template <class Scalar, class Layout>
PipelineStats run_pipeline(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                           std::ostream& progress_out) {
  using namespace pipeline_detail;
  if (options.threads > 0) return run_per_thread<Scalar, Layout>(plan, io, options, progress_out);
  using Space = ExecSpace;
  using Mem = Space::memory_space;
  using HostCube = Cube<Scalar, Kokkos::LayoutRight, Kokkos::HostSpace>;
  using HostCubeC = Cube<const Scalar, Kokkos::LayoutRight, Kokkos::HostSpace>;
  // On host spaces a LayoutRight run computes straight in the staging slots,
  // unless the staging path is forced (to test it where there is no device).
  const bool direct = policy::on_host<Space> && std::is_same_v<Layout, Kokkos::LayoutRight> && !options.force_staging;

  PipelineStats stats;
  const int nblocks = int(plan.blocks.size());
  if (nblocks == 0) return stats;
  const Index TB = plan.block_dates, NB = plan.block_ids, K = plan.K;
  const std::size_t cube_elems = std::size_t(TB * NB * K), row_elems = std::size_t(NB * K);
  const double esize = sizeof(Scalar);

  // Buffers, allocated once for the largest block and viewed per block; none
  // for data that BlockIO hands over in place. Host staging is pinned when
  // the compute space is a Cuda device (StagingSpace).
  using Flat = Kokkos::View<Scalar*, StagingSpace>;
  using FlatC = Kokkos::View<Scalar*, Mem>;
  const auto alloc = [&](const std::string& label, std::size_t n) {
    if (options.buffers) return options.buffers->get<Scalar, StagingSpace>(label, n);
    return Flat(Kokkos::view_alloc(label, Kokkos::WithoutInitializing), n);
  };
  const std::size_t d_elems = io.discount_at ? 0 : cube_elems, cv_elems = io.cv_at ? 0 : cube_elems,
                    m_elems = io.multby_at ? 0 : row_elems;
  Flat d_slot[2] = {alloc("cvest::pipeline::discount_slot0", d_elems), alloc("cvest::pipeline::discount_slot1", d_elems)};
  Flat cv_slot[2] = {alloc("cvest::pipeline::cv_slot0", cv_elems), alloc("cvest::pipeline::cv_slot1", cv_elems)};
  Flat m_slot[2] = {alloc("cvest::pipeline::multBy_slot0", m_elems), alloc("cvest::pipeline::multBy_slot1", m_elems)};
  // Where block b's data is on the host: in place, or in the slot the I/O
  // thread filled (or the writer will drain).
  const auto discount_of = [&](int b, int slot) -> const Scalar* {
    return io.discount_at ? io.discount_at(plan.blocks[b]) : d_slot[slot].data();
  };
  const auto multby_of = [&](int b, int slot) -> const Scalar* {
    return io.multby_at ? io.multby_at(plan.blocks[b].ids) : m_slot[slot].data();
  };
  const auto cv_of = [&](int b, int slot) -> Scalar* {
    return io.cv_at ? io.cv_at(plan.blocks[b]) : cv_slot[slot].data();
  };

  // The staged path computes in two sets of compute-space buffers, so block
  // k+1 can be copied in while block k computes and block k-1 is copied out.
  struct ComputeSet {
    FlatC d, cv, m;
    Index m_ids = -1;  // which id block `m` holds
  };
  ComputeSet sets[2];
  FlatC scratch_in, scratch_out;  // C-order landing zones for device transposes
  const auto alloc_c = [&](const std::string& label, std::size_t n) {
    if (options.buffers) return options.buffers->get<Scalar, Mem>(label, n);
    return FlatC(Kokkos::view_alloc(label, Kokkos::WithoutInitializing), n);
  };
  if (!direct) {
    for (int s = 0; s < 2; ++s) {
      const std::string tag = std::to_string(s);
      sets[s].d = alloc_c("cvest::pipeline::discount" + tag, cube_elems);
      sets[s].cv = alloc_c("cvest::pipeline::cv" + tag, cube_elems);
      sets[s].m = alloc_c("cvest::pipeline::multBy" + tag, row_elems);
    }
    if constexpr (!policy::on_host<Space>) {
      if constexpr (!std::is_same_v<Layout, Kokkos::LayoutRight>) {
        scratch_in = alloc_c("cvest::pipeline::transpose_in", cube_elems);
        scratch_out = alloc_c("cvest::pipeline::transpose_out", cube_elems);
      }
    }
  }

  Channel in_free, in_full, out_free, out_full;
  for (int s = 0; s < 2; ++s) {
    in_free.push(s);
    out_free.push(s);
  }
  Failure failure;
  Recorder rec(stats);
  const auto stop_all = [&] {
    in_free.close(); in_full.close(); out_free.close(); out_full.close();
  };
  const auto guarded = [&](auto&& body) {
    try {
      body();
    } catch (...) {
      failure.set(std::current_exception());
      stop_all();
    }
  };

  // Reader: fills discount (and, when the id block changes, multBy) slots.
  std::thread reader([&] {
    unpin_this_thread();
    guarded([&] {
      Index m_ids[2] = {-1, -1};
      for (int b = 0; b < nblocks; ++b) {
        const auto slot = in_free.pop();
        if (!slot) return;
        const Block& blk = plan.blocks[b];
        if (options.before_io) options.before_io(Phase::read, b);
        const bool read_m = !io.multby_at && m_ids[*slot] != blk.ids.begin, read_d = !io.discount_at;
        const double bytes = (read_d ? double(blk.dates.size() * blk.ids.size() * K) * esize : 0.0) +
                             (read_m ? double(blk.ids.size() * K) * esize : 0.0);
        rec.time(b, Phase::read, bytes, [&] {
          if (read_m) {
            io.read_multby(blk.ids, m_slot[*slot].data());
            m_ids[*slot] = blk.ids.begin;
          }
          if (read_d) io.read_discount(blk, d_slot[*slot].data());
        });
        in_full.push(*slot);
      }
    });
  });

  // Writer: drains cv slots in block order.
  std::thread writer([&] {
    unpin_this_thread();
    guarded([&] {
      for (int b = 0; b < nblocks; ++b) {
        const auto slot = out_full.pop();
        if (!slot) return;
        const Block& blk = plan.blocks[b];
        if (options.before_io) options.before_io(Phase::write, b);
        if (!io.cv_at)
          rec.time(b, Phase::write, double(blk.dates.size() * blk.ids.size() * K) * esize,
                   [&] { io.write_cv(blk, cv_slot[*slot].data()); });
        out_free.push(*slot);
      }
    });
  });

  ProgressLine progress(plan, options, rec, progress_out, esize);
  const auto report_progress = [&](int b) { progress.block_done(b + 1); };
  const auto block_bytes = [&](int b) {
    return double(plan.blocks[b].dates.size() * plan.blocks[b].ids.size() * K) * esize;
  };
  const auto kernel_bytes = [&](int b) { return block_kernel_bytes(plan.blocks[b], K, esize); };

  // Direct path (host spaces, LayoutRight): the kernel reads and writes the
  // staging slots (or the in-place memory) themselves; h2d and d2h are empty.
  const auto run_direct = [&] {
    Space space;
    for (int b = 0; b < nblocks; ++b) {
      const auto in = in_full.pop();
      if (!in) return;
      const Block& blk = plan.blocks[b];
      const Index tb = blk.dates.size(), nb = blk.ids.size();
      rec.nothing(b, Phase::h2d);
      const auto out = out_free.pop();
      if (!out) return;
      const Operands<Scalar, Layout, Mem> ops{Table<const Scalar, Layout, Mem>(multby_of(b, *in), nb, K),
                                              Cube<const Scalar, Layout, Mem>(discount_of(b, *in), tb, nb, K),
                                              Cube<Scalar, Layout, Mem>(cv_of(b, *out), tb, nb, K)};
      const double kernel_begin = rec.now();
      // A slot is written to the file next, in-place memory is the result.
      multiply(options.strategy, space, ops, io.cv_at ? CvNext::memory : CvNext::cache);
      space.fence();
      const double kernel_end = rec.now();
      rec.span(b, Phase::kernel, kernel_bytes(b), kernel_begin, kernel_end);
      // The roof: this block's cv copied into its discount slot, which the
      // kernel has consumed (not where the discount is the caller's memory).
      if (roof_sampled(b, nblocks) && !io.discount_at) {
        const Index n = tb * nb * K;
        rec.roof(kernel_bytes(b), kernel_end - kernel_begin, [&] {
          roof::copy_and_read(space, const_cast<Scalar*>(discount_of(b, *in)), cv_of(b, *out), n, multby_of(b, *in),
                              nb * K, io.cv_at ? roof::Stores::streaming : roof::Stores::regular);
        });
      }
      in_free.push(*in);
      rec.nothing(b, Phase::d2h);
      out_full.push(*out);
      report_progress(b);
    }
  };

  // Staged path (devices, LayoutLeft, or forced): software-pipelined over two
  // compute sets. Iteration b issues block b's copy in, retires block b-1's
  // kernel and block b-2's copy out, issues block b-1's copy out, and launches
  // block b's kernel. A set is reused only after the fences that retire its
  // previous block.
  const auto run_staged = [&] {
    Instances<Space> inst;
    StepClock<Space> clock(rec, inst);
    // Work issued and not yet retired: which block, and its cv slot.
    struct Pending {
      int block = -1;
      int slot = -1;
    } kernel, copy_out;
    const auto issue_copy_out = [&](int blk_index) {
      const auto out = out_free.pop();
      if (!out) return false;
      const Block& blk = plan.blocks[blk_index];
      const Index tb = blk.dates.size(), nb = blk.ids.size();
      const ComputeSet& set = sets[blk_index % 2];
      copy_out = {blk_index, *out};
      clock.begin(Step::d2h, inst.d2h);
      unstage<Space, Scalar, Layout>(inst.d2h, Cube<const Scalar, Layout, Mem>(set.cv.data(), tb, nb, K),
                                     HostCube(cv_of(blk_index, *out), tb, nb, K),
                                     Cube<Scalar, Kokkos::LayoutRight, Mem>(scratch_out.data(), tb, nb, K));
      clock.end(Step::d2h, inst.d2h);
      return true;
    };
    const auto retire_copy_out = [&] {
      if (copy_out.block < 0) return;
      inst.d2h.fence();
      const auto [begin, end] = clock.span(Step::d2h);
      rec.span(copy_out.block, Phase::d2h, block_bytes(copy_out.block), begin, end);
      out_full.push(copy_out.slot);
      copy_out = {};
    };
    // Returns the block whose kernel finished, or -1. A sampled block's
    // roof follows: its cv copied into its discount, both in the compute
    // set (the discount is consumed; the next use of the set is block
    // done + 2's copy in, issued later), on the kernel's instance.
    const auto retire_kernel = [&] {
      const int done = kernel.block;
      if (done < 0) return done;
      inst.compute.fence();
      const auto [begin, end] = clock.span(Step::kernel);
      rec.span(done, Phase::kernel, kernel_bytes(done), begin, end);
      kernel = {};
      if (roof_sampled(done, nblocks)) {
        const ComputeSet& set = sets[done % 2];
        const Index n = plan.blocks[done].dates.size() * plan.blocks[done].ids.size() * K;
        rec.roof(kernel_bytes(done), end - begin, [&] {
          roof::copy_and_read(inst.compute, set.d.data(), set.cv.data(), n, set.m.data(),
                              plan.blocks[done].ids.size() * K, roof::Stores::regular);
        });
      }
      return done;
    };

    for (int b = 0; b < nblocks; ++b) {
      const auto in = in_full.pop();
      if (!in) return;
      const Block& blk = plan.blocks[b];
      const Index tb = blk.dates.size(), nb = blk.ids.size();
      ComputeSet& set = sets[b % 2];

      // Block b in: discount, and multBy when this set holds other ids.
      double h2d_bytes = block_bytes(b);
      clock.begin(Step::h2d, inst.h2d);
      stage<Space, Scalar, Layout>(inst.h2d, HostCubeC(discount_of(b, *in), tb, nb, K),
                                   Cube<Scalar, Layout, Mem>(set.d.data(), tb, nb, K),
                                   Cube<Scalar, Kokkos::LayoutRight, Mem>(scratch_in.data(), tb, nb, K));
      if (set.m_ids != blk.ids.begin) {
        // multBy travels as a (1, ids, K) cube: the same bytes as the (ids, K)
        // table. Same instance as the discount copy, so scratch_in is reused
        // in order.
        stage<Space, Scalar, Layout>(inst.h2d, HostCubeC(multby_of(b, *in), 1, nb, K),
                                     Cube<Scalar, Layout, Mem>(set.m.data(), 1, nb, K),
                                     Cube<Scalar, Kokkos::LayoutRight, Mem>(scratch_in.data(), 1, nb, K));
        set.m_ids = blk.ids.begin;
        h2d_bytes += double(nb * K) * esize;
      }
      clock.end(Step::h2d, inst.h2d);

      // Block b-1's kernel and block b-2's copy out finish; b-1 goes out.
      const int computed = retire_kernel();
      retire_copy_out();
      if (computed >= 0 && !issue_copy_out(computed)) return;

      inst.h2d.fence();
      const auto [h2d_begin, h2d_end] = clock.span(Step::h2d);
      rec.span(b, Phase::h2d, h2d_bytes, h2d_begin, h2d_end);
      in_free.push(*in);

      kernel = {b, -1};
      clock.begin(Step::kernel, inst.compute);
      // Copied or transposed out next (on host spaces, from cache).
      multiply(options.strategy, inst.compute,
               Operands<Scalar, Layout, Mem>{Table<const Scalar, Layout, Mem>(set.m.data(), nb, K),
                                             Cube<const Scalar, Layout, Mem>(set.d.data(), tb, nb, K),
                                             Cube<Scalar, Layout, Mem>(set.cv.data(), tb, nb, K)},
               CvNext::cache);
      clock.end(Step::kernel, inst.compute);
      report_progress(b);
    }
    // Drain: the last kernel, the copy out in flight, the last copy out.
    const int last = retire_kernel();
    retire_copy_out();
    if (last >= 0 && issue_copy_out(last)) retire_copy_out();
  };

  guarded([&] {
    if (direct) run_direct();
    else run_staged();
  });
  reader.join();
  writer.join();
  progress.finish();
  stats.total_s = rec.now();
  failure.rethrow();
  return stats;
}

#define CVEST_INSTANTIATE(SCALAR, LAYOUT)                                                                   \
  template PipelineStats run_pipeline<SCALAR, LAYOUT>(const BlockPlan&, const BlockIO<SCALAR>&, const PipelineOptions&, \
                                                std::ostream&);
CVEST_FOR_EACH_PIPELINE_TYPE(CVEST_INSTANTIATE)
#undef CVEST_INSTANTIATE

}  // namespace cvest
