// The overlapped pipeline (every space): see Pipeline.hpp; run_pipeline
// (Pipeline.cpp) hands it a plan where options.threads is 0.
#include "core/pipeline/Pipeline.hpp"

#include "core/Multiply.hpp"
#include "core/Policies.hpp"
#include "core/pipeline/Channel.hpp"
#include "core/Roof.hpp"
#include "core/Threads.hpp"
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

namespace pipeline_detail {

// The overlapped pipeline over one plan: a reader thread fills host
// staging slots, the calling thread computes (in place, or staged through
// two compute-space sets), a writer thread drains cv slots in block order.
template <class Scalar, class Layout>
class Overlapped {
 public:
  using Space = ExecSpace;
  using Mem = Space::memory_space;
  using HostCube = Cube<Scalar, Kokkos::LayoutRight, Kokkos::HostSpace>;
  using HostCubeC = Cube<const Scalar, Kokkos::LayoutRight, Kokkos::HostSpace>;
  using Flat = Kokkos::View<Scalar*, StagingSpace>;
  using FlatC = Kokkos::View<Scalar*, Mem>;

  Overlapped(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options, std::ostream& out)
      : plan_(plan), io_(io), options_(options), nblocks_(int(plan.blocks.size())), K_(plan.K),
        // On host spaces a LayoutRight run computes straight in the staging
        // slots, unless the staging path is forced (to test it where there
        // is no device).
        direct_(policy::on_host<Space> && std::is_same_v<Layout, Kokkos::LayoutRight> && !options.force_staging),
        buf_(plan, io, options, direct_), progress_(plan, options, rec_, out, esize) {}

  PipelineStats run() {
    for (int s = 0; s < 2; ++s) {
      in_free_.push(s);
      out_free_.push(s);
    }
    std::thread reader = start_thread("the pipeline's reader thread", [&] {
      unpin_this_thread();
      guarded([&] { read_blocks(); });
    });
    std::thread writer;
    guarded([&] {  // where it cannot start, the reader is stopped and the run fails
      writer = start_thread("the pipeline's writer thread", [&] {
        unpin_this_thread();
        guarded([&] { write_blocks(); });
      });
    });
    if (writer.joinable()) guarded([&] {
      if (direct_) run_direct();
      else run_staged();
    });
    reader.join();
    if (writer.joinable()) writer.join();
    return finish_run(progress_, stats_, rec_, failure_);
  }

 private:
  static constexpr double esize = sizeof(Scalar);

  // The staged path computes in two sets of compute-space buffers, so block
  // k+1 can be copied in while block k computes and block k-1 is copied out.
  struct ComputeSet {
    FlatC d, cv, m;
    Index m_ids = -1;  // which id block `m` holds
  };
  // Work the staged path issued and has not retired: which block, and its cv slot.
  struct Pending {
    int block = -1;
    int slot = -1;
  };
  struct Staged {
    explicit Staged(Recorder& rec) : clock(rec, inst) {}
    Instances<Space> inst;
    StepClock<Space> clock;
    Pending kernel, copy_out;
  };

  // Buffers, allocated once for the largest block and viewed per block; none
  // for data that BlockIO hands over in place. Host staging is pinned when
  // the compute space is a Cuda device (StagingSpace). Allocated before the
  // run's clock starts.
  struct Buffers {
    Flat d_slot[2], cv_slot[2], m_slot[2];
    ComputeSet sets[2];
    FlatC scratch_in, scratch_out;  // C-order landing zones for device transposes

    Buffers(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options, bool direct) {
      const std::size_t cube = std::size_t(plan.block_dates * plan.block_ids * plan.K),
                        row = std::size_t(plan.block_ids * plan.K);
      const auto alloc = [&](const std::string& label, std::size_t n) {
        if (options.buffers) return options.buffers->get<Scalar, StagingSpace>(label, n);
        return Flat(Kokkos::view_alloc(label, Kokkos::WithoutInitializing), n);
      };
      for (int s = 0; s < 2; ++s) {
        const std::string tag = std::to_string(s);
        d_slot[s] = alloc("cvest::pipeline::discount_slot" + tag, io.discount_at ? 0 : cube);
        cv_slot[s] = alloc("cvest::pipeline::cv_slot" + tag, io.cv_at ? 0 : cube);
        m_slot[s] = alloc("cvest::pipeline::multBy_slot" + tag, io.multby_at ? 0 : row);
      }
      if (!direct) allocate_compute_sets(options, cube, row);
    }

    // The staged path's: two sets, and transposes' landing zones on a device.
    void allocate_compute_sets(const PipelineOptions& options, std::size_t cube, std::size_t row) {
      const auto alloc_c = [&](const std::string& label, std::size_t n) {
        if (options.buffers) return options.buffers->get<Scalar, Mem>(label, n);
        return FlatC(Kokkos::view_alloc(label, Kokkos::WithoutInitializing), n);
      };
      for (int s = 0; s < 2; ++s) {
        const std::string tag = std::to_string(s);
        sets[s].d = alloc_c("cvest::pipeline::discount" + tag, cube);
        sets[s].cv = alloc_c("cvest::pipeline::cv" + tag, cube);
        sets[s].m = alloc_c("cvest::pipeline::multBy" + tag, row);
      }
      if constexpr (!policy::on_host<Space> && !std::is_same_v<Layout, Kokkos::LayoutRight>) {
        scratch_in = alloc_c("cvest::pipeline::transpose_in", cube);
        scratch_out = alloc_c("cvest::pipeline::transpose_out", cube);
      }
    }
  };

  // Where block b's data is on the host: in place, or in the slot the I/O
  // thread filled (or the writer will drain).
  const Scalar* discount_of(int b, int slot) const {
    return io_.discount_at ? io_.discount_at(plan_.blocks[b]) : buf_.d_slot[slot].data();
  }
  const Scalar* multby_of(int b, int slot) const {
    return io_.multby_at ? io_.multby_at(plan_.blocks[b].ids) : buf_.m_slot[slot].data();
  }
  Scalar* cv_of(int b, int slot) const { return io_.cv_at ? io_.cv_at(plan_.blocks[b]) : buf_.cv_slot[slot].data(); }
  double block_bytes(int b) const {
    return double(plan_.blocks[b].dates.size() * plan_.blocks[b].ids.size() * K_) * esize;
  }
  double kernel_bytes(int b) const { return block_kernel_bytes(plan_.blocks[b], K_, esize); }

  void stop_all() {
    in_free_.close();
    in_full_.close();
    out_free_.close();
    out_full_.close();
  }
  template <class Body>
  void guarded(Body&& body) {
    try {
      body();
    } catch (...) {
      failure_.set(std::current_exception());
      stop_all();
    }
  }

  // The reader thread: fills discount (and, when the id block changes,
  // multBy) slots.
  void read_blocks() {
    Index m_ids[2] = {-1, -1};
    for (int b = 0; b < nblocks_; ++b) {
      const auto slot = in_free_.pop();
      if (!slot) return;
      const Block& blk = plan_.blocks[b];
      if (options_.before_io) options_.before_io(Phase::read, b);
      const bool read_m = !io_.multby_at && m_ids[*slot] != blk.ids.begin, read_d = !io_.discount_at;
      const double bytes = (read_d ? block_bytes(b) : 0.0) + (read_m ? double(blk.ids.size() * K_) * esize : 0.0);
      rec_.time(b, Phase::read, bytes, [&] {
        if (read_m) {
          io_.read_multby(blk.ids, buf_.m_slot[*slot].data());
          m_ids[*slot] = blk.ids.begin;
        }
        if (read_d) io_.read_discount(blk, buf_.d_slot[*slot].data());
      });
      in_full_.push(*slot);
    }
  }

  // The writer thread: drains cv slots in block order.
  void write_blocks() {
    for (int b = 0; b < nblocks_; ++b) {
      const auto slot = out_full_.pop();
      if (!slot) return;
      const Block& blk = plan_.blocks[b];
      if (options_.before_io) options_.before_io(Phase::write, b);
      if (!io_.cv_at) rec_.time(b, Phase::write, block_bytes(b), [&] { io_.write_cv(blk, buf_.cv_slot[*slot].data()); });
      out_free_.push(*slot);
    }
  }

  // The direct path's copy roof of a tb x nb block: `src` copied into `dst`
  // in flat's walk, multBy's rows read beside the copy where the kernel
  // reads them (roof::copy_in_walk). Host spaces only take this path.
  void copy_roof(Space const& space, Scalar* dst, const Scalar* src, Index tb, Index nb, const Scalar* m,
                 roof::Stores stores) {
    if constexpr (policy::on_host<Space>)
      roof::copy_in_walk(space, dst, src, policy::FlatWalk(tb, nb * K_, sizeof(Scalar), src, dst), m, stores);
    else
      roof::copy_and_read(space, dst, src, tb * nb * K_, m, nb * K_, stores);
  }

  // Direct path (host spaces, LayoutRight): the kernel reads and writes the
  // staging slots (or the in-place memory) themselves; h2d and d2h are empty.
  void run_direct() {
    Space space;
    for (int b = 0; b < nblocks_; ++b) {
      const auto in = in_full_.pop();
      if (!in) return;
      const Block& blk = plan_.blocks[b];
      const Index tb = blk.dates.size(), nb = blk.ids.size();
      rec_.nothing(b, Phase::h2d);
      const auto out = out_free_.pop();
      if (!out) return;
      const Operands<Scalar, Layout, Mem> ops{Table<const Scalar, Layout, Mem>(multby_of(b, *in), nb, K_),
                                              Cube<const Scalar, Layout, Mem>(discount_of(b, *in), tb, nb, K_),
                                              Cube<Scalar, Layout, Mem>(cv_of(b, *out), tb, nb, K_)};
      // A slot is written to the file next, in-place memory is the result.
      const CvNext next = io_.cv_at ? CvNext::memory : CvNext::cache;
      const auto stores = roof::kernel_stores<Space>(options_.strategy, layout_kind<Layout>(), tb, nb, K_,
                                                     sizeof(Scalar), next);
      // The roof (PipelineStats::roof): a sampled block's discount copied
      // into its cv in the kernel's place, paired with the block before's
      // kernel (not sampled); a one-block plan's after its kernel, its cv
      // into its consumed discount slot (not the caller's memory).
      const bool sampled = roof_sampled(b, nblocks_), in_place = sampled && b > 0;
      if (in_place) rec_.roof(kernel_bytes(b), last_kernel_s_ * kernel_bytes(b) / kernel_bytes(b - 1), [&] {
        copy_roof(space, cv_of(b, *out), discount_of(b, *in), tb, nb, multby_of(b, *in), stores);
      });
      const double kernel_begin = rec_.now();
      multiply(options_.strategy, space, ops, next);
      space.fence();
      const double kernel_end = rec_.now();
      rec_.span(b, Phase::kernel, kernel_bytes(b), kernel_begin, kernel_end);
      if (in_place) rec_.after_roof(kernel_end - kernel_begin, kernel_bytes(b));
      last_kernel_s_ = kernel_end - kernel_begin;
      if (sampled && !in_place && !io_.discount_at) {
        rec_.roof(kernel_bytes(b), kernel_end - kernel_begin, [&] {
          copy_roof(space, const_cast<Scalar*>(discount_of(b, *in)), cv_of(b, *out), tb, nb, multby_of(b, *in), stores);
        });
      }
      in_free_.push(*in);
      rec_.nothing(b, Phase::d2h);
      out_full_.push(*out);
      progress_.block_done(b + 1);
    }
  }

  // Staged path (devices, LayoutLeft, or forced): software-pipelined over
  // two compute sets. Iteration b issues block b's copy in, retires block
  // b-1's kernel and block b-2's copy out, issues block b-1's copy out, and
  // launches block b's kernel. A set is reused only after the fences that
  // retire its previous block.
  void run_staged() {
    Staged st(rec_);
    for (int b = 0; b < nblocks_; ++b) {
      const auto in = in_full_.pop();
      if (!in) return;
      const double h2d_bytes = issue_copy_in(st, b, *in);
      // Block b-1's kernel and block b-2's copy out finish; b-1 goes out.
      const int computed = retire_kernel(st);
      retire_copy_out(st);
      if (computed >= 0 && !issue_copy_out(st, computed)) return;
      st.inst.h2d.fence();
      const auto [h2d_begin, h2d_end] = st.clock.span(Step::h2d);
      rec_.span(b, Phase::h2d, h2d_bytes, h2d_begin, h2d_end);
      in_free_.push(*in);
      launch_kernel(st, b);
      progress_.block_done(b + 1);
    }
    // Drain: the last kernel, the copy out in flight, the last copy out.
    const int last = retire_kernel(st);
    retire_copy_out(st);
    if (last >= 0 && issue_copy_out(st, last)) retire_copy_out(st);
  }

  // Block b in: discount, and multBy when this set holds other ids. Returns
  // the bytes copied.
  double issue_copy_in(Staged& st, int b, int slot) {
    const Block& blk = plan_.blocks[b];
    const Index tb = blk.dates.size(), nb = blk.ids.size();
    ComputeSet& set = buf_.sets[b % 2];
    double h2d_bytes = block_bytes(b);
    st.clock.begin(Step::h2d, st.inst.h2d);
    stage<Space, Scalar, Layout>(st.inst.h2d, HostCubeC(discount_of(b, slot), tb, nb, K_),
                                 Cube<Scalar, Layout, Mem>(set.d.data(), tb, nb, K_),
                                 Cube<Scalar, Kokkos::LayoutRight, Mem>(buf_.scratch_in.data(), tb, nb, K_));
    if (set.m_ids != blk.ids.begin) {
      // multBy travels as a (1, ids, K) cube: the same bytes as the (ids, K)
      // table. Same instance as the discount copy, so scratch_in is reused
      // in order.
      stage<Space, Scalar, Layout>(st.inst.h2d, HostCubeC(multby_of(b, slot), 1, nb, K_),
                                   Cube<Scalar, Layout, Mem>(set.m.data(), 1, nb, K_),
                                   Cube<Scalar, Kokkos::LayoutRight, Mem>(buf_.scratch_in.data(), 1, nb, K_));
      set.m_ids = blk.ids.begin;
      h2d_bytes += double(nb * K_) * esize;
    }
    st.clock.end(Step::h2d, st.inst.h2d);
    return h2d_bytes;
  }

  void launch_kernel(Staged& st, int b) {
    const Block& blk = plan_.blocks[b];
    const Index tb = blk.dates.size(), nb = blk.ids.size();
    const ComputeSet& set = buf_.sets[b % 2];
    st.kernel = {b, -1};
    st.clock.begin(Step::kernel, st.inst.compute);
    // Copied or transposed out next (on host spaces, from cache).
    multiply(options_.strategy, st.inst.compute,
             Operands<Scalar, Layout, Mem>{Table<const Scalar, Layout, Mem>(set.m.data(), nb, K_),
                                           Cube<const Scalar, Layout, Mem>(set.d.data(), tb, nb, K_),
                                           Cube<Scalar, Layout, Mem>(set.cv.data(), tb, nb, K_)},
             CvNext::cache);
    st.clock.end(Step::kernel, st.inst.compute);
  }

  bool issue_copy_out(Staged& st, int b) {
    const auto out = out_free_.pop();
    if (!out) return false;
    const Block& blk = plan_.blocks[b];
    const Index tb = blk.dates.size(), nb = blk.ids.size();
    const ComputeSet& set = buf_.sets[b % 2];
    st.copy_out = {b, *out};
    st.clock.begin(Step::d2h, st.inst.d2h);
    unstage<Space, Scalar, Layout>(st.inst.d2h, Cube<const Scalar, Layout, Mem>(set.cv.data(), tb, nb, K_),
                                   HostCube(cv_of(b, *out), tb, nb, K_),
                                   Cube<Scalar, Kokkos::LayoutRight, Mem>(buf_.scratch_out.data(), tb, nb, K_));
    st.clock.end(Step::d2h, st.inst.d2h);
    return true;
  }

  void retire_copy_out(Staged& st) {
    if (st.copy_out.block < 0) return;
    st.inst.d2h.fence();
    const auto [begin, end] = st.clock.span(Step::d2h);
    rec_.span(st.copy_out.block, Phase::d2h, block_bytes(st.copy_out.block), begin, end);
    out_full_.push(st.copy_out.slot);
    st.copy_out = {};
  }

  // Returns the block whose kernel finished, or -1. A sampled block's roof
  // follows: its cv copied into its discount, both in the compute set (the
  // discount is consumed; the next use of the set is block done + 2's copy
  // in, issued later), on the kernel's instance.
  int retire_kernel(Staged& st) {
    const int done = st.kernel.block;
    if (done < 0) return done;
    st.inst.compute.fence();
    const auto [begin, end] = st.clock.span(Step::kernel);
    rec_.span(done, Phase::kernel, kernel_bytes(done), begin, end);
    st.kernel = {};
    if (roof_sampled(done, nblocks_)) {
      const ComputeSet& set = buf_.sets[done % 2];
      const Block& blk = plan_.blocks[done];
      rec_.roof(kernel_bytes(done), end - begin, [&] {
        roof::copy_and_read(st.inst.compute, set.d.data(), set.cv.data(), blk.dates.size() * blk.ids.size() * K_,
                            set.m.data(), blk.ids.size() * K_, roof::Stores::regular);
      });
    }
    return done;
  }

  const BlockPlan& plan_;
  const BlockIO<Scalar>& io_;
  const PipelineOptions& options_;
  const int nblocks_;
  const Index K_;
  const bool direct_;
  double last_kernel_s_ = 0;  // the direct path's last kernel call (a sampled block's roof pairs with it)
  Buffers buf_;
  PipelineStats stats_;
  Recorder rec_{stats_};  // the run's clock: from here
  ProgressLine progress_;
  Channel in_free_, in_full_, out_free_, out_full_;
  Failure failure_;
};

template <class Scalar, class Layout>
PipelineStats run_overlapped(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                             std::ostream& progress_out) {
  if (plan.blocks.empty()) return {};
  return Overlapped<Scalar, Layout>(plan, io, options, progress_out).run();
}

#define CVEST_INSTANTIATE(SCALAR, LAYOUT)                                                                       \
  template PipelineStats run_overlapped<SCALAR, LAYOUT>(const BlockPlan&, const BlockIO<SCALAR>&, const PipelineOptions&, \
                                                        std::ostream&);
CVEST_FOR_EACH_PIPELINE_TYPE(CVEST_INSTANTIATE)
#undef CVEST_INSTANTIATE

}  // namespace pipeline_detail

}  // namespace cvest
