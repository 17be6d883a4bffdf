#pragma once
// The kernels behind each Strategy. Included by core/Multiply.cpp only, which
// instantiates them for every execution space of the build.
#include "core/Multiply.hpp"
#include "core/FlatRun.hpp"
#include "core/Policies.hpp"
#include "core/StreamingStores.hpp"

#include <KokkosBlas1_mult.hpp>

#include <stdexcept>
#include <string>

namespace cvest {

namespace detail {

template <class Layout>
inline constexpr bool is_right = std::is_same_v<Layout, Kokkos::LayoutRight>;

// Shorthands the functors share.
template <class Scalar, class Layout, class MemSpace>
struct Kernel {
  Operands<Scalar, Layout, MemSpace> ops;
  Index T, N, K;
  explicit Kernel(const Operands<Scalar, Layout, MemSpace>& o)
      : ops(o), T(o.d.extent(0)), N(o.d.extent(1)), K(o.d.extent(2)) {}
};

// --- one_worker: a single work item walks the cube in storage order -------
template <class Scalar, class Layout, class MemSpace>
struct OneWorker : Kernel<Scalar, Layout, MemSpace> {
  using Kernel<Scalar, Layout, MemSpace>::Kernel;
  KOKKOS_INLINE_FUNCTION void operator()(Index) const {
    const auto& m = this->ops.m;
    const auto& d = this->ops.d;
    const auto& cv = this->ops.cv;
    if constexpr (is_right<Layout>) {
      for (Index t = 0; t < this->T; ++t)
        for (Index i = 0; i < this->N; ++i)
          for (Index k = 0; k < this->K; ++k) cv(t, i, k) = m(i, k) * d(t, i, k);
    } else {
      for (Index k = 0; k < this->K; ++k)
        for (Index i = 0; i < this->N; ++i)
          for (Index t = 0; t < this->T; ++t) cv(t, i, k) = m(i, k) * d(t, i, k);
    }
  }
};

// --- per_date: one work item per date, its (N, K) slice --------------------
template <class Scalar, class Layout, class MemSpace>
struct PerDate : Kernel<Scalar, Layout, MemSpace> {
  using Kernel<Scalar, Layout, MemSpace>::Kernel;
  KOKKOS_INLINE_FUNCTION void operator()(Index t) const {
    const auto& m = this->ops.m;
    const auto& d = this->ops.d;
    const auto& cv = this->ops.cv;
    if constexpr (is_right<Layout>) {
      for (Index i = 0; i < this->N; ++i)
        for (Index k = 0; k < this->K; ++k) cv(t, i, k) = m(i, k) * d(t, i, k);
    } else {  // the slice is strided by T: no layout makes it contiguous
      for (Index k = 0; k < this->K; ++k)
        for (Index i = 0; i < this->N; ++i) cv(t, i, k) = m(i, k) * d(t, i, k);
    }
  }
};

// Host path, LayoutRight: a date's slice is one contiguous run of N*K.
template <class Scalar, class Layout, class MemSpace>
struct PerDateStreaming : Kernel<Scalar, Layout, MemSpace> {
  using Kernel<Scalar, Layout, MemSpace>::Kernel;
  void operator()(Index t) const {
    const auto& m = this->ops.m;
    const auto& d = this->ops.d;
    const auto& cv = this->ops.cv;
    streaming::multiply_run(&cv(t, 0, 0), m.data(), &d(t, 0, 0), std::size_t(this->N * this->K));
    streaming::fence_this_thread();
  }
};

// --- per_id: one work item per id, its (T, K) columns ----------------------
template <class Scalar, class Layout, class MemSpace>
struct PerId : Kernel<Scalar, Layout, MemSpace> {
  using Kernel<Scalar, Layout, MemSpace>::Kernel;
  KOKKOS_INLINE_FUNCTION void operator()(Index i) const {
    const auto& m = this->ops.m;
    const auto& d = this->ops.d;
    const auto& cv = this->ops.cv;
    if constexpr (is_right<Layout>) {  // K contiguous values per date, dates N*K apart
      for (Index t = 0; t < this->T; ++t)
        for (Index k = 0; k < this->K; ++k) cv(t, i, k) = m(i, k) * d(t, i, k);
    } else {  // T contiguous values per column
      for (Index k = 0; k < this->K; ++k)
        for (Index t = 0; t < this->T; ++t) cv(t, i, k) = m(i, k) * d(t, i, k);
    }
  }
};

// Host path, LayoutLeft: each of the id's K columns is a run of T dates.
template <class Scalar, class Layout, class MemSpace>
struct PerIdStreaming : Kernel<Scalar, Layout, MemSpace> {
  using Kernel<Scalar, Layout, MemSpace>::Kernel;
  void operator()(Index i) const {
    const auto& m = this->ops.m;
    const auto& d = this->ops.d;
    const auto& cv = this->ops.cv;
    for (Index k = 0; k < this->K; ++k)
      streaming::scale_run(&cv(0, i, k), m(i, k), &d(0, i, k), std::size_t(this->T));
    streaming::fence_this_thread();
  }
};

// --- elementwise: MDRange over (T, N, K), one element per work item --------
// Regular stores: on the host, Kokkos' tile loop calls this once per element
// and GCC vectorises that loop only for plain stores (a scalar MOVNTI per
// element measured 3x slower than the vector loop it prevents).
template <class Scalar, class Layout, class MemSpace>
struct Elementwise : Kernel<Scalar, Layout, MemSpace> {
  using Kernel<Scalar, Layout, MemSpace>::Kernel;
  KOKKOS_INLINE_FUNCTION void operator()(Index t, Index i, Index k) const {
    this->ops.cv(t, i, k) = this->ops.m(i, k) * this->ops.d(t, i, k);
  }
};

// e / d for 0 <= e < 2^50 without a 64-bit integer division, which GPUs
// emulate in some 70 instructions: at 16 bytes per element that alone would
// keep `flat` below HBM bandwidth. The double reciprocal gives the quotient
// to within one (relative error 2^-52 on a quotient below 2^50); one step
// corrects it.
struct Divider {
  Index d = 1;
  double inverse = 1;
  Divider() = default;
  explicit Divider(Index divisor) : d(divisor), inverse(1.0 / double(divisor)) {}
  KOKKOS_INLINE_FUNCTION Index quotient(Index e) const {
    Index q = static_cast<Index>(double(e) * inverse);
    const Index r = e - q * d;
    if (r < 0) --q;
    else if (r >= d) ++q;
    return q;
  }
};

// --- flat: RangePolicy over the T*N*K elements in storage order -----------
// Element e of cv/d pairs with multBy element e % (N*K) (LayoutRight) or
// e / T (LayoutLeft), m stored in the same layout.
template <class Scalar, class Layout, class MemSpace>
struct Flat : Kernel<Scalar, Layout, MemSpace> {
  Divider by;  // N*K (LayoutRight) or T (LayoutLeft)
  explicit Flat(const Operands<Scalar, Layout, MemSpace>& o)
      : Kernel<Scalar, Layout, MemSpace>(o), by(is_right<Layout> ? this->N * this->K : this->T) {}
  KOKKOS_INLINE_FUNCTION void operator()(Index e) const {
    const Index q = by.quotient(e);
    const Index j = is_right<Layout> ? e - q * by.d : q;
    this->ops.cv.data()[e] = this->ops.m.data()[j] * this->ops.d.data()[e];
  }
};

// Host path: each work item owns a run of up to `per` contiguous elements
// (policy::flat_run_elements: from a thread's L2, core/FlatRun.hpp) and
// streams it with a vector loop.
//  - LayoutRight: multBy's slice in tiles of `tile` elements (whole runs
//    leaving room in a thread's L2 share for the dates at once:
//    policy::flat_tile_bytes), each tile walked
//    date by date and a date's part of it run by run, in storage order, up
//    to policy::flat_dates_most() dates at once (1, 2 or 4: the stated 2 or
//    what cvest tune measured here) where their streams allow
//    (policy::flat_dates):
//    chunk c is run s of tile b in date group g, c = (b * G + g) * S + s. Threads
//    take contiguous ranges of chunks, so a thread streams long stretches
//    (as a copy does) and its tiles' multBy comes from memory once, then
//    from the caches for the other dates. One tile may hold the whole
//    slice; a tile of one run keeps a run's multBy in L2.
//  - LayoutLeft: storage order already reuses each multBy value T times in a
//    row; chunks are contiguous and walked as runs of one multBy value, in
//    stretches of runs at once (policy::flat_left_streams).
// Stream = false: the same runs with regular stores (CvNext::cache).
template <class Scalar, class Layout, class MemSpace, bool Stream = true>
struct FlatStreaming : Kernel<Scalar, Layout, MemSpace> {
  explicit FlatStreaming(const Operands<Scalar, Layout, MemSpace>& o)
      : Kernel<Scalar, Layout, MemSpace>(o), per(policy::flat_run_elements(sizeof(Scalar))) {
    if constexpr (is_right<Layout>)
      walk = policy::FlatWalk(this->T, this->N * this->K, sizeof(Scalar), o.d.data(), o.cv.data());
    else if constexpr (Stream)  // regular stores walk one stream
      streams = policy::flat_left_streams(o.d.data(), o.cv.data(), this->T, sizeof(Scalar));
  }
  Index per;
  policy::FlatWalk walk;        // LayoutRight
  policy::FlatStreams streams;  // LayoutLeft
  Index chunks() const {
    return is_right<Layout> ? walk.chunks() : (this->T * this->N * this->K + per - 1) / per;
  }
  void operator()(Index c) const {
    const auto& m = this->ops.m;
    Scalar* out = this->ops.cv.data();
    const Scalar* in = this->ops.d.data();
    if constexpr (is_right<Layout>) {
      const policy::FlatWalk::Piece p = walk.piece(c);
      streaming::rows_at_once<Stream>(p.dates, out + p.e, in + p.e, std::size_t(p.n), p.stride,
                                      streaming::RowOf<Scalar>{m.data() + p.j});
    } else if (this->T == 1) {  // a one-date block: multBy pairs element for element
      const Index e = c * per, end = std::min(this->N * this->K, e + per);
      streaming::multiply_run<Stream>(out + e, m.data() + e, in + e, std::size_t(end - e));
    } else {
      // One division per work item, not per run: blocks of few dates make
      // many short runs.
      const Index T = this->T, e = c * per, end = std::min(T * this->N * this->K, e + per), j = e / T;
      streaming::scaled_runs<Stream>(out + e, in + e, std::size_t(end - e), std::size_t(T), std::size_t(e - j * T),
                                     m.data() + j, streams.streams, std::size_t(streams.runs_apart));
    }
    if constexpr (Stream) streaming::fence_this_thread();
  }
};

// --- team: a team per date (LayoutRight) or per id (LayoutLeft) -----------
// Threads take the middle loop, vector lanes the contiguous one.
template <class Scalar, class Layout, class MemSpace, class Member>
struct Team : Kernel<Scalar, Layout, MemSpace> {
  using Kernel<Scalar, Layout, MemSpace>::Kernel;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const auto& ops = this->ops;
    const Index outer = team.league_rank();
    auto put = [&](Index t, Index i, Index k) { ops.cv(t, i, k) = ops.m(i, k) * ops.d(t, i, k); };
    if constexpr (is_right<Layout>) {
      const Index t = outer;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, this->N), [&](Index i) {
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, this->K), [&](Index k) { put(t, i, k); });
      });
    } else {
      const Index i = outer;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, this->K), [&](Index k) {
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, this->T), [&](Index t) { put(t, i, k); });
      });
    }
  }
};

// KokkosBlas::mult takes rank-1 views: a date's N*K slice flattened, with the
// stride the layout gives it (1 for LayoutRight, T for LayoutLeft).
template <class Scalar, class MemSpace>
using Strided = Kokkos::View<Scalar*, Kokkos::LayoutStride, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class Scalar, class Layout, class MemSpace>
void blas_per_date(const Operands<Scalar, Layout, MemSpace>& ops) {
  const Index T = ops.d.extent(0), NK = ops.d.extent(1) * ops.d.extent(2);
  const Index stride = is_right<Layout> ? 1 : T;
  const Strided<const Scalar, MemSpace> m(ops.m.data(), Kokkos::LayoutStride(NK, 1));
  for (Index t = 0; t < T; ++t) {
    const Index origin = is_right<Layout> ? t * NK : t;
    const Strided<const Scalar, MemSpace> d(ops.d.data() + origin, Kokkos::LayoutStride(NK, stride));
    const Strided<Scalar, MemSpace> cv(ops.cv.data() + origin, Kokkos::LayoutStride(NK, stride));
    KokkosBlas::mult(Scalar(0), cv, Scalar(1), m, d);  // cv = 0*cv + 1*m.*d; exact
  }
}

}  // namespace detail

template <class ExecSpace, class Scalar, class Layout>
void multiply(Strategy strategy, ExecSpace const& space,
              const Operands<Scalar, Layout, typename ExecSpace::memory_space>& ops, CvNext next) {
  using MemSpace = typename ExecSpace::memory_space;
  using namespace detail;
  check_operands(ops);
  const Index T = ops.d.extent(0), N = ops.d.extent(1), K = ops.d.extent(2);
  if (T == 0 || N == 0 || K == 0) return;
  constexpr bool stream = streaming::used_on<ExecSpace>();
  const bool streams_here = writes_streaming<ExecSpace>(strategy, layout_kind<Layout>(), T, N, K, sizeof(Scalar), next);
  const std::string label = "cvest::kernel::" + std::string(to_string(strategy));
  policy::clear_launch_errors<ExecSpace>();

  switch (strategy) {
    case Strategy::one_worker:
      Kokkos::parallel_for(label, policy::range(space, 1), OneWorker<Scalar, Layout, MemSpace>(ops));
      break;
    case Strategy::per_date:
      if constexpr (stream && is_right<Layout>)
        if (streams_here) {
          Kokkos::parallel_for(label, policy::range(space, T), PerDateStreaming<Scalar, Layout, MemSpace>(ops));
          break;
        }
      Kokkos::parallel_for(label, policy::range(space, T), PerDate<Scalar, Layout, MemSpace>(ops));
      break;
    case Strategy::per_id:
      if constexpr (stream && !is_right<Layout>)
        if (streams_here) {
          Kokkos::parallel_for(label, policy::range(space, N), PerIdStreaming<Scalar, Layout, MemSpace>(ops));
          break;
        }
      Kokkos::parallel_for(label, policy::range(space, N), PerId<Scalar, Layout, MemSpace>(ops));
      break;
    case Strategy::elementwise:
      policy::for_cube_elements<ExecSpace, Layout>(label, space, T, N, K, Elementwise<Scalar, Layout, MemSpace>(ops));
      break;
    case Strategy::flat: {
      // The host walks chunks of runs whatever its stores (a build without
      // streaming stores, or regular ones measured faster here): one work
      // item per element with its index arithmetic ran at 0.22-0.66 of the
      // roof there (docs/benchmarks.md). Devices take an element each.
      if constexpr (policy::on_host<ExecSpace>) {
        if (streams_here) {
          const FlatStreaming<Scalar, Layout, MemSpace, true> body(ops);
          Kokkos::parallel_for(label, policy::range(space, body.chunks()), body);
        } else {
          const FlatStreaming<Scalar, Layout, MemSpace, false> body(ops);
          Kokkos::parallel_for(label, policy::range(space, body.chunks()), body);
        }
      } else {
        Kokkos::parallel_for(label, policy::range(space, T * N * K), Flat<Scalar, Layout, MemSpace>(ops));
      }
      break;
    }
    case Strategy::team: {
      using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
      Kokkos::parallel_for(label, policy::teams(space, is_right<Layout> ? T : N),
                           Team<Scalar, Layout, MemSpace, Member>(ops));
      break;
    }
    case Strategy::kokkos_kernels:
      // KokkosBlas::mult runs on the default instance of the views' space and
      // labels its own kernels; the region names it for Kokkos Tools.
      space.fence();
      Kokkos::Profiling::pushRegion(label);
      blas_per_date(ops);
      // It ran on the default instance: done before the caller's instance
      // (maybe another stream) is fenced and the result is read.
      Kokkos::fence();
      Kokkos::Profiling::popRegion();
      break;
  }
  policy::check_launched<ExecSpace>(label);
}

template <class ExecSpace>
bool writes_streaming(Strategy strategy, LayoutKind layout, Index T, Index N, Index K, std::size_t element_size,
                      CvNext next) {
  if (!streaming::used_on<ExecSpace>() || next == CvNext::cache) return false;
  const auto& entry = info(strategy);
  if (!(layout == LayoutKind::right ? entry.streams_right : entry.streams_left)) return false;
  if (strategy == Strategy::flat && !policy::flat_streaming_stores(element_size)) return false;  // measured here
  // the contiguous run one work item writes: per_id an id's T dates
  // (LayoutLeft), per_date a date's N*K values (LayoutRight); flat's runs
  // are its own fixed chunks
  const Index run = strategy == Strategy::per_id ? T : strategy == Strategy::per_date ? N * K : 0;
  return run == 0 || std::size_t(run) * element_size >= streaming::min_run_bytes;
}

}  // namespace cvest
