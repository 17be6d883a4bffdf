#include "core/Pipeline.hpp"

#include "core/Multiply.hpp"
#include "core/Policies.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <iostream>
#include <mutex>
#include <optional>
#include <ostream>
#include <thread>
#include <utility>
#include <unistd.h>
#ifdef KOKKOS_ENABLE_OPENMP
#include <omp.h>
#endif
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
    span(block, phase, bytes, b, now());
  }
  // A phase with nothing to do for this block (a host LayoutRight block is
  // computed where it was read): a span of no length, so timelines show none.
  void nothing(int block, Phase phase) {
    const double t = now();
    span(block, phase, 0.0, t, t);
  }
  // A phase that ran asynchronously, from when it was issued to when a fence
  // saw it finish.
  void span(int block, Phase phase, double bytes, double begin, double end) {
    std::lock_guard lock(m_);
    stats_.seconds[int(phase)] += end - begin;
    stats_.bytes[int(phase)] += bytes;
    stats_.timeline.push_back({block, phase, begin, end});
  }

 private:
  PipelineStats& stats_;
  Clock::time_point start_;
  std::mutex m_;
};

// What a block's kernel moves: discount in, cv out, its multBy rows in.
inline double block_kernel_bytes(const Block& blk, Index K, double esize) {
  return double(2 * blk.dates.size() * blk.ids.size() * K + blk.ids.size() * K) * esize;
}

// A progress line as blocks finish, safe to call from several threads: on a
// terminal one line rewritten at most twice a second; in a log (a batch
// job's stderr) a line every 10 s, so an hour's job writes hundreds of lines,
// not thousands. The last block always prints.
class ProgressLine {
 public:
  ProgressLine(const BlockPlan& plan, const PipelineOptions& options, Recorder& rec, std::ostream& out, double esize)
      : plan_(plan), options_(options), rec_(rec), out_(out), esize_(esize),
        tty_((&out == &std::cerr || &out == &std::clog) && isatty(STDERR_FILENO)) {}
  void block_done(int blocks_done) {
    if (!options_.progress) return;
    std::lock_guard lock(m_);
    const int nblocks = int(plan_.blocks.size());
    const double elapsed = rec_.now();
    if (elapsed - last_ < (tty_ ? 0.5 : 10.0) && blocks_done != nblocks) return;
    last_ = elapsed;
    const double done = double(blocks_done) / nblocks;
    const double gbps = double(plan_.T * plan_.N * plan_.K) * esize_ * done / elapsed / 1e9;
    fmt::print(out_, "{}{} block {}/{}  {:.2f} GB/s in  {:.1f} s left{}", tty_ ? "\r" : "", options_.label,
               blocks_done, nblocks, gbps, elapsed / done - elapsed, tty_ ? "   " : "\n");
    out_.flush();
  }
  void finish() {
    if (options_.progress && tty_) fmt::print(out_, "\n");
  }

 private:
  const BlockPlan& plan_;
  const PipelineOptions& options_;
  Recorder& rec_;
  std::ostream& out_;
  double esize_;
  bool tty_;
  std::mutex m_;
  double last_ = -1;
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

// C-order host staging <-> the compute view (layouts may differ): on host
// spaces transposed in place of a copy, on devices copied as C order and
// transposed by a device kernel. to(t, i, k) = from(t, i, k) between layouts.
// On the host each work item takes a tile of `tile` ids over all dates: the
// C-order side of a tile is T runs of tile*K values, the LayoutLeft side K
// runs of tile*T; with tile*K values to a few cache lines per date, one
// tile's lines stay in L1 while every value in them is moved (an
// element-wise MDRange moved 1.3 GB/s on one-date blocks; 256-id items
// swept a megabyte per column, 5-10 GB/s).
template <class Space, class From, class To>
void transpose(Space const& space, const From& from, const To& to, const char* label) {
  using Layout = typename To::array_layout;
  const Index T = to.extent(0), N = to.extent(1), K = to.extent(2);
  if constexpr (policy::on_host<Space>) {
    // Both views are contiguous: index them directly, so the inner loops are
    // plain strided copies (a one-date block, T = 1, is a (N, K) <-> (K, N)
    // transpose).
    const auto* in = from.data();
    auto* out = to.data();
    const Index tile = T == 1 ? 1024 : 16;
    Kokkos::parallel_for(label, policy::range(space, (N + tile - 1) / tile), [=](Index c) {
      const Index i0 = c * tile, i1 = std::min(N, i0 + tile);
      if constexpr (std::is_same_v<Layout, Kokkos::LayoutLeft>) {  // out[t + T*(i + N*k)] = in[(t*N + i)*K + k]
        if (T == 1) {
          for (Index k = 0; k < K; ++k)
            for (Index i = i0; i < i1; ++i) out[i + N * k] = in[i * K + k];
        } else {
          for (Index i = i0; i < i1; ++i)
            for (Index k = 0; k < K; ++k) {
              auto* o = out + T * (i + N * k);
              const auto* src = in + i * K + k;
              for (Index t = 0; t < T; ++t) o[t] = src[t * N * K];
            }
        }
      } else {  // out[(t*N + i)*K + k] = in[t + T*(i + N*k)]
        for (Index t = 0; t < T; ++t) {
          auto* o = out + (t * N) * K;
          for (Index i = i0; i < i1; ++i)
            for (Index k = 0; k < K; ++k) o[i * K + k] = in[t + T * (i + N * k)];
        }
      }
    });
  } else {
    Kokkos::parallel_for(label, policy::cube_elements<Space, Layout>(space, T, N, K),
                         KOKKOS_LAMBDA(Index t, Index i, Index k) { to(t, i, k) = from(t, i, k); });
  }
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

// The execution-space instances the staged path issues work to: copies in
// (h2d), kernels, copies out (d2h). On Cuda each is its own stream, so block
// k+1's copy in and block k-1's copy out overlap block k's kernel; on host
// spaces all three are the one instance and every step is synchronous.
template <class Space>
struct Instances {
  Space h2d, compute, d2h;
};

#ifdef KOKKOS_ENABLE_CUDA
template <>
struct Instances<Kokkos::Cuda> {
  // Streams made here and instances made from them (works on 3.4 and 4.x);
  // the instances go before the streams.
  struct Streams {
    cudaStream_t s[3] = {};
    Streams() {
      for (auto& st : s)
        if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess)
          throw std::runtime_error("cvest: cannot create a Cuda stream");
    }
    ~Streams() {
      for (auto st : s)
        if (st) cudaStreamDestroy(st);
    }
  } streams;
  Kokkos::Cuda h2d{streams.s[0]}, compute{streams.s[1]}, d2h{streams.s[2]};
};
#endif

// When the staged path's steps ran, per step kind (h2d, kernel, d2h; one of
// each is in flight at a time). On host spaces every step has finished when
// its call returns, so a mark is the host clock after a fence. On Cuda a mark
// is an event recorded on the step's stream and read once the fence that
// retires the step has returned: h2d, kernel and d2h are timed on the device's
// own clock, not by when the host thread happened to look.
enum class Step { h2d, kernel, d2h };

template <class Space>
class StepClock {
 public:
  StepClock(Recorder& rec, Instances<Space>&) : rec_(rec) {}
  void begin(Step s, Space const&) { begin_[int(s)] = rec_.now(); }
  void end(Step s, Space const& space) {
    space.fence();
    end_[int(s)] = rec_.now();
  }
  // Seconds since the pipeline started; call after the step's fence.
  std::pair<double, double> span(Step s) { return {begin_[int(s)], end_[int(s)]}; }

 private:
  Recorder& rec_;
  double begin_[3] = {}, end_[3] = {};
};

#ifdef KOKKOS_ENABLE_CUDA
template <>
class StepClock<Kokkos::Cuda> {
 public:
  // `origin_` is recorded and waited for now, so device times map onto the
  // host clock at this point.
  StepClock(Recorder& rec, Instances<Kokkos::Cuda>& inst) {
    check(cudaEventCreate(&origin_));
    for (int i = 0; i < 3; ++i) {
      check(cudaEventCreate(&begin_[i]));
      check(cudaEventCreate(&end_[i]));
    }
    check(cudaEventRecord(origin_, inst.h2d.cuda_stream()));
    check(cudaEventSynchronize(origin_));
    origin_s_ = rec.now();
  }
  ~StepClock() {
    for (auto e : {origin_, begin_[0], begin_[1], begin_[2], end_[0], end_[1], end_[2]})
      if (e) cudaEventDestroy(e);
  }
  StepClock(const StepClock&) = delete;
  StepClock& operator=(const StepClock&) = delete;
  void begin(Step s, Kokkos::Cuda const& space) { check(cudaEventRecord(begin_[int(s)], space.cuda_stream())); }
  void end(Step s, Kokkos::Cuda const& space) { check(cudaEventRecord(end_[int(s)], space.cuda_stream())); }
  std::pair<double, double> span(Step s) { return {at(begin_[int(s)]), at(end_[int(s)])}; }

 private:
  static void check(cudaError_t e) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("cvest: Cuda event: ") + cudaGetErrorString(e));
  }
  double at(cudaEvent_t e) const {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, origin_, e));
    return origin_s_ + double(ms) * 1e-3;
  }
  cudaEvent_t origin_ = nullptr, begin_[3] = {}, end_[3] = {};
  double origin_s_ = 0;
};
#endif

}  // namespace pipeline_detail

double per_thread_buffer_bytes(const BlockPlan& plan, LayoutKind layout) {
  const double block = double(plan.block_dates * plan.block_ids * plan.K) * double(plan.element_size);
  const double row = double(plan.block_ids * plan.K) * double(plan.element_size);
  const bool left = layout == LayoutKind::left;
  return (left ? 5 : 3) * block + (left ? 2 : 1) * row;
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
    const auto alloc = [&](const std::string& label, std::size_t n) {
      if (options.buffers) return options.buffers->get<Scalar, Mem>(label, n);
      return Kokkos::View<Scalar*, Mem>(Kokkos::view_alloc(label, Kokkos::WithoutInitializing), n);
    };
    for (int w = 0; w < threads; ++w) {
      const std::string tag = std::to_string(w);
      Buffers& buf = buffers[std::size_t(w)];
      buf.d = alloc("cvest::per_thread::discount" + tag, io.discount_at ? 0 : cube_elems);
      buf.cv = alloc("cvest::per_thread::cv" + tag, io.cv_at ? 0 : cube_elems);
      buf.m = alloc("cvest::per_thread::multBy" + tag, io.multby_at ? 0 : row_elems);
      buf.d_compute = alloc("cvest::per_thread::discount_left" + tag, right ? 0 : cube_elems);
      buf.cv_compute = alloc("cvest::per_thread::cv_left" + tag, right ? 0 : cube_elems);
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
          Scalar* cv = io.cv_at ? io.cv_at(blk) : buf.cv.data();
          const double kernel_bytes = block_kernel_bytes(blk, K, esize);
          if constexpr (right) {  // computes in the I/O buffers: h2d and d2h are empty
            rec.nothing(b, Phase::h2d);
            launch([&] {
              rec.time(b, Phase::kernel, kernel_bytes, [&] {
                multiply(options.strategy, space,
                         Operands<Scalar, Layout, Mem>{Table<const Scalar, Layout, Mem>(m, nb, K),
                                                       Cube<const Scalar, Layout, Mem>(d, tb, nb, K),
                                                       Cube<Scalar, Layout, Mem>(cv, tb, nb, K)},
                         io.cv_at ? CvNext::memory : CvNext::cache);  // the block is written next
              });
            });
            rec.nothing(b, Phase::d2h);
          } else {
            // C-order file data <-> LayoutLeft compute buffers. multBy is
            // transposed as a (1, ids, K) cube: the bytes of the (ids, K) table.
            Cube<Scalar, Layout, Mem> d_left(buf.d_compute.data(), tb, nb, K), cv_left(buf.cv_compute.data(), tb, nb, K);
            const bool stage_m = buf.m_compute_ids != blk.ids.begin;
            launch([&] {
              rec.time(b, Phase::h2d, bytes + (stage_m ? double(nb * K) * esize : 0.0), [&] {
                transpose(space, Cube<const Scalar, Kokkos::LayoutRight, Mem>(d, tb, nb, K), d_left,
                          "cvest::per_thread::transpose_in");
                if (stage_m) {
                  transpose(space, Cube<const Scalar, Kokkos::LayoutRight, Mem>(m, 1, nb, K),
                            Cube<Scalar, Layout, Mem>(buf.m_compute.data(), 1, nb, K),
                            "cvest::per_thread::transpose_in");
                  buf.m_compute_ids = blk.ids.begin;
                }
              });
            });
            launch([&] {
              rec.time(b, Phase::kernel, kernel_bytes, [&] {
                multiply(options.strategy, space,
                         Operands<Scalar, Layout, Mem>{Table<const Scalar, Layout, Mem>(buf.m_compute.data(), nb, K),
                                                       d_left, cv_left},
                         CvNext::cache);
              });
            });
            launch([&] {
              rec.time(b, Phase::d2h, bytes, [&] {
                transpose(space, Cube<const Scalar, Layout, Mem>(cv_left.data(), tb, nb, K),
                          Cube<Scalar, Kokkos::LayoutRight, Mem>(cv, tb, nb, K), "cvest::per_thread::transpose_out");
              });
            });
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
      rec.time(b, Phase::kernel, kernel_bytes(b), [&] {
        // A slot is written to the file next, in-place memory is the result.
        multiply(options.strategy, space, ops, io.cv_at ? CvNext::memory : CvNext::cache);
        space.fence();
      });
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
    // Returns the block whose kernel finished, or -1.
    const auto retire_kernel = [&] {
      const int done = kernel.block;
      if (done < 0) return done;
      inst.compute.fence();
      const auto [begin, end] = clock.span(Step::kernel);
      rec.span(done, Phase::kernel, kernel_bytes(done), begin, end);
      kernel = {};
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

#define CVEST_INSTANTIATE_PIPELINE(SCALAR, LAYOUT)                                                         \
  template PipelineStats run_pipeline<SCALAR, LAYOUT>(const BlockPlan&, const BlockIO<SCALAR>&, \
                                                      const PipelineOptions&, std::ostream&);
CVEST_INSTANTIATE_PIPELINE(double, Kokkos::LayoutRight)
CVEST_INSTANTIATE_PIPELINE(double, Kokkos::LayoutLeft)
CVEST_INSTANTIATE_PIPELINE(float, Kokkos::LayoutRight)
CVEST_INSTANTIATE_PIPELINE(float, Kokkos::LayoutLeft)

}  // namespace cvest
