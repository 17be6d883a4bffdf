#include "core/Pipeline.hpp"

#include "core/Multiply.hpp"
#include "core/Policies.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <ostream>
#include <thread>
#include <unistd.h>
#ifdef __linux__
#include <pthread.h>
#include <sched.h>
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

namespace pipeline_detail {

using Clock = std::chrono::steady_clock;

// Lets the calling I/O thread run on any CPU. OpenMP binding
// (OMP_PROC_BIND) pins the main thread to one core as libgomp loads, and
// threads it starts inherit that pin, which would put both I/O threads on
// the core that also runs compute thread 0. The kernel narrows the mask to
// the CPUs the process's cgroup allows.
void unpin_this_thread() {
#ifdef __linux__
  cpu_set_t all;
  CPU_ZERO(&all);
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  for (long c = 0; c < cpus && c < CPU_SETSIZE; ++c) CPU_SET(int(c), &all);
  pthread_setaffinity_np(pthread_self(), sizeof all, &all);
#endif
}

// A blocking queue of slot numbers; close() wakes everyone for shutdown.
class Channel {
 public:
  void push(int v) {
    { std::lock_guard lock(m_); q_.push_back(v); }
    cv_.notify_one();
  }
  std::optional<int> pop() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return closed_ || !q_.empty(); });
    if (q_.empty()) return std::nullopt;
    int v = q_.front();
    q_.pop_front();
    return v;
  }
  void close() {
    { std::lock_guard lock(m_); closed_ = true; }
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<int> q_;
  bool closed_ = false;
};

// Records phase spans from several threads.
class Recorder {
 public:
  explicit Recorder(PipelineStats& stats) : stats_(stats), start_(Clock::now()) {}
  double now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  template <class F>
  void time(int block, Phase phase, double bytes, F&& f) {
    const double b = now();
    f();
    const double e = now();
    std::lock_guard lock(m_);
    stats_.seconds[int(phase)] += e - b;
    stats_.bytes[int(phase)] += bytes;
    stats_.timeline.push_back({block, phase, b, e});
  }

 private:
  PipelineStats& stats_;
  Clock::time_point start_;
  std::mutex m_;
};

// First exception wins; everyone else stops.
class Failure {
 public:
  void set(std::exception_ptr e) {
    std::lock_guard lock(m_);
    if (!first_) first_ = e;
  }
  void rethrow() {
    if (first_) std::rethrow_exception(first_);
  }
  bool failed() {
    std::lock_guard lock(m_);
    return bool(first_);
  }

 private:
  std::mutex m_;
  std::exception_ptr first_;
};

template <class Scalar, class Layout, class Mem>
using BlockCube = Cube<Scalar, Layout, Mem>;

// C-order host staging <-> the compute view (layouts may differ). On host
// spaces a tiled MDRange transposes in place of a copy; on devices the block
// is copied as C order and transposed by a device kernel.
// to(t, i, k) = from(t, i, k) between layouts, iterating in `to`'s order.
template <class Space, class From, class To>
void transpose(Space const& space, const From& from, const To& to, const char* label) {
  using Layout = typename To::array_layout;
  Kokkos::parallel_for(label, policy::cube_elements<Space, Layout>(space, to.extent(0), to.extent(1), to.extent(2)),
                       KOKKOS_LAMBDA(Index t, Index i, Index k) { to(t, i, k) = from(t, i, k); });
}

template <class Space, class Scalar, class Layout>
void stage(Space const& space, const Cube<const Scalar, Kokkos::LayoutRight, Kokkos::HostSpace>& from_host,
           const Cube<Scalar, Layout, typename Space::memory_space>& to,
           const Cube<Scalar, Kokkos::LayoutRight, typename Space::memory_space>& scratch) {
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutRight>) {
    Kokkos::deep_copy(space, to, from_host);
  } else if constexpr (policy::on_host<Space>) {
    transpose(space, from_host, to, "cvest::pipeline::transpose_in");
  } else {
    Kokkos::deep_copy(space, scratch, from_host);
    transpose(space, scratch, to, "cvest::pipeline::transpose_in");
  }
}

template <class Space, class Scalar, class Layout>
void unstage(Space const& space, const Cube<const Scalar, Layout, typename Space::memory_space>& from,
             const Cube<Scalar, Kokkos::LayoutRight, Kokkos::HostSpace>& to_host,
             const Cube<Scalar, Kokkos::LayoutRight, typename Space::memory_space>& scratch) {
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutRight>) {
    Kokkos::deep_copy(space, to_host, from);
  } else if constexpr (policy::on_host<Space>) {
    transpose(space, from, to_host, "cvest::pipeline::transpose_out");
  } else {
    transpose(space, from, scratch, "cvest::pipeline::transpose_out");
    Kokkos::deep_copy(space, to_host, scratch);
  }
}

}  // namespace pipeline_detail

template <class Scalar, class Layout>
PipelineStats run_pipeline(const BlockPlan& plan, const BlockIO<Scalar>& io, const PipelineOptions& options,
                           std::ostream& progress_out) {
  using namespace pipeline_detail;
  using Space = ExecSpace;
  using Mem = Space::memory_space;
  using HostCube = Cube<Scalar, Kokkos::LayoutRight, Kokkos::HostSpace>;
  // On host spaces a LayoutRight run computes straight in the staging slots,
  // unless the staging path is forced (to test it where there is no device).
  const bool direct = policy::on_host<Space> && std::is_same_v<Layout, Kokkos::LayoutRight> && !options.force_staging;

  PipelineStats stats;
  const int nblocks = int(plan.blocks.size());
  if (nblocks == 0) return stats;
  const Index TB = plan.block_dates, NB = plan.block_ids, K = plan.K;
  const std::size_t cube_elems = std::size_t(TB * NB * K), row_elems = std::size_t(NB * K);
  const double esize = sizeof(Scalar);

  // Buffers, allocated once for the largest block and viewed per block.
  // Host staging is pinned when the compute space is a Cuda device, so the
  // copies run at full link speed and can be asynchronous.
#ifdef KOKKOS_ENABLE_CUDA
  using StagingSpace = std::conditional_t<policy::on_host<Space>, Kokkos::HostSpace, Kokkos::CudaHostPinnedSpace>;
#else
  using StagingSpace = Kokkos::HostSpace;
#endif
  using Flat = Kokkos::View<Scalar*, StagingSpace>;
  using FlatC = Kokkos::View<Scalar*, Mem>;
  const auto alloc = [](const std::string& label, std::size_t n) {
    return Flat(Kokkos::view_alloc(label, Kokkos::WithoutInitializing), n);
  };
  Flat d_slot[2] = {alloc("cvest::pipeline::discount_slot0", cube_elems), alloc("cvest::pipeline::discount_slot1", cube_elems)};
  Flat cv_slot[2] = {alloc("cvest::pipeline::cv_slot0", cube_elems), alloc("cvest::pipeline::cv_slot1", cube_elems)};
  Flat m_slot[2] = {alloc("cvest::pipeline::multBy_slot0", row_elems), alloc("cvest::pipeline::multBy_slot1", row_elems)};
  FlatC d_c, cv_c, m_c, scratch_c;
  if (!direct) {
    d_c = FlatC(Kokkos::view_alloc("cvest::pipeline::discount", Kokkos::WithoutInitializing), cube_elems);
    cv_c = FlatC(Kokkos::view_alloc("cvest::pipeline::cv", Kokkos::WithoutInitializing), cube_elems);
    m_c = FlatC(Kokkos::view_alloc("cvest::pipeline::multBy", Kokkos::WithoutInitializing), row_elems);
    if constexpr (!policy::on_host<Space>)
      scratch_c = FlatC(Kokkos::view_alloc("cvest::pipeline::transpose_scratch", Kokkos::WithoutInitializing), cube_elems);
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
        const double bytes = double(blk.dates.size() * blk.ids.size() * K) * esize;
        rec.time(b, Phase::read, bytes + (m_ids[*slot] != blk.ids.begin ? double(blk.ids.size() * K) * esize : 0), [&] {
          if (m_ids[*slot] != blk.ids.begin) {
            io.read_multby(blk.ids, m_slot[*slot].data());
            m_ids[*slot] = blk.ids.begin;
          }
          io.read_discount(blk, d_slot[*slot].data());
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
        rec.time(b, Phase::write, double(blk.dates.size() * blk.ids.size() * K) * esize,
                 [&] { io.write_cv(blk, cv_slot[*slot].data()); });
        out_free.push(*slot);
      }
    });
  });

  const bool tty = isatty(STDERR_FILENO);
  guarded([&] {
    Space space;
    Index m_loaded = -1;
    double last_progress = -1;
    for (int b = 0; b < nblocks; ++b) {
      const auto in = in_full.pop();
      if (!in) return;
      const Block& blk = plan.blocks[b];
      const Index tb = blk.dates.size(), nb = blk.ids.size();
      const double block_bytes = double(tb * nb * K) * esize;
      HostCube d_host(d_slot[*in].data(), tb, nb, K);
      Table<const Scalar, Layout, Mem> m;
      Cube<const Scalar, Layout, Mem> d;
      Cube<Scalar, Layout, Mem> cv;

      // h2d: stage discount (and multBy) into the compute space and layout.
      rec.time(b, Phase::h2d, direct ? 0.0 : block_bytes, [&] {
        if (direct) {
          m = Table<const Scalar, Layout, Mem>(m_slot[*in].data(), nb, K);
          d = Cube<const Scalar, Layout, Mem>(d_slot[*in].data(), tb, nb, K);
        } else {
          const Cube<Scalar, Kokkos::LayoutRight, Mem> scratch(scratch_c.data(), tb, nb, K);
          const Cube<Scalar, Layout, Mem> d_dev(d_c.data(), tb, nb, K);
          stage<Space, Scalar, Layout>(space, d_host, d_dev, scratch);
          if (m_loaded != blk.ids.begin) {
            const Cube<Scalar, Layout, Mem> m_dev(m_c.data(), 1, nb, K);
            const Cube<Scalar, Kokkos::LayoutRight, Mem> m_scratch(scratch_c.data(), 1, nb, K);
            stage<Space, Scalar, Layout>(space, HostCube(m_slot[*in].data(), 1, nb, K), m_dev, m_scratch);
            m_loaded = blk.ids.begin;
          }
          m = Table<const Scalar, Layout, Mem>(m_c.data(), nb, K);
          d = d_dev;
          space.fence();
        }
      });
      // The input slot can be refilled as soon as its data is in the compute
      // space; on direct runs the kernel still reads it.
      if (!direct) in_free.push(*in);

      const auto out = out_free.pop();
      if (!out) return;
      HostCube cv_host(cv_slot[*out].data(), tb, nb, K);
      if (direct) cv = Cube<Scalar, Layout, Mem>(cv_slot[*out].data(), tb, nb, K);
      else cv = Cube<Scalar, Layout, Mem>(cv_c.data(), tb, nb, K);

      rec.time(b, Phase::kernel, double(2 * tb * nb * K + nb * K) * esize, [&] {
        multiply(options.strategy, space, Operands<Scalar, Layout, Mem>{m, d, cv});
        space.fence();
      });
      if (direct) in_free.push(*in);

      // d2h: back to C order in host staging.
      rec.time(b, Phase::d2h, direct ? 0.0 : block_bytes, [&] {
        if (!direct) {
          const Cube<Scalar, Kokkos::LayoutRight, Mem> scratch(scratch_c.data(), tb, nb, K);
          unstage<Space, Scalar, Layout>(space, cv, cv_host, scratch);
          space.fence();
        }
      });
      out_full.push(*out);

      // One line per block, at most two a second (and always the last).
      if (options.progress && (rec.now() - last_progress >= 0.5 || b + 1 == nblocks)) {
        const double elapsed = rec.now();
        last_progress = elapsed;
        const double done = double(b + 1) / nblocks;
        const double gbps = double(plan.T * plan.N * K) * esize * done / elapsed / 1e9;
        fmt::print(progress_out, "{}{} block {}/{}  {:.2f} GB/s in  {:.1f} s left{}", tty ? "\r" : "",
                   options.label, b + 1, nblocks, gbps, elapsed / done - elapsed, tty ? "   " : "\n");
        progress_out.flush();
      }
    }
  });
  reader.join();
  writer.join();
  if (options.progress && tty) fmt::print(progress_out, "\n");
  stats.total_s = rec.now();
  failure.rethrow();
  return stats;
}

#define CVEST_INSTANTIATE_PIPELINE(SCALAR, LAYOUT)                                                         \
  template PipelineStats run_pipeline<SCALAR, LAYOUT>(const BlockPlan&, const BlockIO<SCALAR>&, \
                                                      const PipelineOptions&, std::ostream&);
CVEST_INSTANTIATE_PIPELINE(double, Kokkos::LayoutRight)
CVEST_INSTANTIATE_PIPELINE(double, Kokkos::LayoutLeft)
CVEST_INSTANTIATE_PIPELINE(float, Kokkos::LayoutRight)
CVEST_INSTANTIATE_PIPELINE(float, Kokkos::LayoutLeft)

}  // namespace cvest
