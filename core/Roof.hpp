#pragma once
// The machine's limits, measured by the same program in the same run as the
// kernels they judge: copy with regular stores, copy with streaming stores,
// and STREAM's triad. Each call times one fenced pass over `n` elements.
#include "core/Policies.hpp"
#include "core/StreamingStores.hpp"
#include "core/Types.hpp"

#include <Kokkos_Timer.hpp>

namespace cvest::roof {

template <class Scalar, class MemSpace>
using Flat = Kokkos::View<Scalar*, MemSpace>;

enum class Stores { regular, streaming };

// dst[0, n) = src[0, n) on the calling host thread: a copy roof's pass over
// one thread's share.
template <class Scalar>
inline void copy_here(Scalar* dst, const Scalar* src, std::size_t n, Stores stores) {
  if (stores == Stores::streaming) {
    streaming::copy_run(dst, src, n);
    streaming::fence_this_thread();
  } else {
    for (std::size_t j = 0; j < n; ++j) dst[j] = src[j];
  }
}

// dst = src. Returns seconds.
template <class ExecSpace, class Scalar>
double copy(ExecSpace const& space, Flat<Scalar, typename ExecSpace::memory_space> dst,
            Flat<const Scalar, typename ExecSpace::memory_space> src, Stores stores) {
  const Index n = dst.extent(0);
  space.fence();
  Kokkos::Timer timer;
  if constexpr (policy::on_host<ExecSpace>) {
    const Index chunks = (n + policy::host_flat_chunk - 1) / policy::host_flat_chunk;
    Kokkos::parallel_for(
        stores == Stores::streaming ? "cvest::roof::copy_streaming" : "cvest::roof::copy",
        policy::range(space, chunks), [=](Index c) {
          const Index b = c * policy::host_flat_chunk, e = std::min(n, b + policy::host_flat_chunk);
          copy_here(dst.data() + b, src.data() + b, std::size_t(e - b), stores);
        });
  } else {
    Kokkos::parallel_for("cvest::roof::copy", policy::range(space, n),
                         KOKKOS_LAMBDA(Index j) { dst(j) = src(j); });
  }
  space.fence();
  return timer.seconds();
}

// a = b + s * c (STREAM triad). Returns seconds.
template <class ExecSpace, class Scalar>
double triad(ExecSpace const& space, Flat<Scalar, typename ExecSpace::memory_space> a,
             Flat<const Scalar, typename ExecSpace::memory_space> b,
             Flat<const Scalar, typename ExecSpace::memory_space> c) {
  const Index n = a.extent(0);
  const Scalar s = 3;
  space.fence();
  Kokkos::Timer timer;
  Kokkos::parallel_for("cvest::roof::triad", policy::range(space, n),
                       KOKKOS_LAMBDA(Index j) { a(j) = b(j) + s * c(j); });
  space.fence();
  return timer.seconds();
}

}  // namespace cvest::roof
