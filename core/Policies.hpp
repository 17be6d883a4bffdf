#pragma once
// The one place where execution policies are built: iteration order, tiling
// and index types are decided here, not scattered over the kernels.
// Index ranges are half-open [begin, end).
#include "core/Types.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace cvest::policy {

// Kernels on host spaces may use host-only code paths (streaming stores).
template <class ExecSpace>
inline constexpr bool on_host = Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;

// Default cap on one pipeline block's discount buffer: 2 MiB on host spaces
// (a block stays in cache from the read through the kernel to the write),
// 64 MiB on devices (enough blocks for copies, kernels and I/O to overlap,
// each copy still long enough to run at the link's speed).
template <class ExecSpace>
inline constexpr std::size_t default_block_bytes = on_host<ExecSpace> ? std::size_t(2) << 20 : std::size_t(64) << 20;

// Iterate the fastest-varying index of the layout innermost:
// LayoutRight -> k fastest, LayoutLeft -> t fastest.
template <class Layout>
using Iterate = std::conditional_t<std::is_same_v<Layout, Kokkos::LayoutRight>,
                                   Kokkos::Rank<3, Kokkos::Iterate::Right, Kokkos::Iterate::Right>,
                                   Kokkos::Rank<3, Kokkos::Iterate::Left, Kokkos::Iterate::Left>>;

template <class ExecSpace, class Layout>
using CubeMDRange = Kokkos::MDRangePolicy<ExecSpace, Iterate<Layout>, Kokkos::IndexType<Index>>;

template <class ExecSpace>
using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<Index>>;

template <class ExecSpace>
Range<ExecSpace> range(ExecSpace const& space, Index end) {
  return Range<ExecSpace>(space, 0, end);
}

// One work item per element of the (T, N, K) cube. On the host a tile walks
// a long contiguous run (a date's ids x cols, or an id's dates) so the
// innermost loop is long; on devices Kokkos chooses tiles that fit a block.
template <class ExecSpace, class Layout>
CubeMDRange<ExecSpace, Layout> cube_elements(ExecSpace const& space, Index T, Index N, Index K) {
  using Policy = CubeMDRange<ExecSpace, Layout>;
  using tile_type = typename Policy::tile_type;
  if constexpr (on_host<ExecSpace>) {
    constexpr Index run = 4096;
    tile_type tile;
    if constexpr (std::is_same_v<Layout, Kokkos::LayoutRight>) {
      tile = {1, std::max<Index>(1, std::min(N, run / std::max<Index>(K, 1))), K};
    } else {
      tile = {T, std::max<Index>(1, std::min(N, run / std::max<Index>(T, 1))), 1};
    }
    return Policy(space, {0, 0, 0}, {T, N, K}, tile);
  } else {
    return Policy(space, {0, 0, 0}, {T, N, K});
  }
}

// Kokkos 3.4 does not check a Cuda launch in a release build: a launch the
// device refused computed nothing and said nothing (elementwise read
// 600x a copy of its bytes on an H200). Throws on any Cuda error since the
// last check on this thread; nothing elsewhere.
template <class ExecSpace>
void check_launched(const std::string& label) {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) {
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
      throw std::runtime_error(label + ": the Cuda launch failed: " + cudaGetErrorString(e));
  }
#else
  (void)label;
#endif
}

// How a device launch over the (T, N, K) cube is cut. A grid has at most
// 65,535 blocks in its second and third dimensions, and Kokkos 3.4 sized a
// rank-3 MDRange's grid past that (100 x 1,000,000 x 5 failed to launch on
// an H200); so each launch covers a slab of at most `dates` x `ids`, in
// tiles of tile[0] dates x tile[1] ids x tile[2] columns: LayoutRight an
// id's K columns (up to 16) by ~256 / K ids, LayoutLeft 32 dates by 8 ids
// (the fastest index across neighbouring threads, whichever of the two
// Kokkos maps to x).
struct DeviceSlabs {
  static constexpr Index max_grid = 65535;
  Index tile[3] = {1, 1, 1};
  Index dates = 0, ids = 0;
};
template <class Layout>
DeviceSlabs device_slabs(Index T, Index K) {
  DeviceSlabs s;
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutRight>) {
    s.tile[2] = std::clamp<Index>(K, 1, 16);
    s.tile[1] = std::max<Index>(1, 256 / s.tile[2]);
  } else {
    s.tile[0] = std::clamp<Index>(T, 1, 32);
    s.tile[1] = 8;
  }
  s.dates = DeviceSlabs::max_grid * s.tile[0];
  s.ids = DeviceSlabs::max_grid * s.tile[1];
  return s;
}

// f(t, i, k) for every element of the (T, N, K) cube: on the host one
// launch (cube_elements), on devices slab by slab (device_slabs).
template <class ExecSpace, class Layout, class F>
void for_cube_elements(const std::string& label, ExecSpace const& space, Index T, Index N, Index K, const F& f) {
  if constexpr (on_host<ExecSpace>) {
    Kokkos::parallel_for(label, cube_elements<ExecSpace, Layout>(space, T, N, K), f);
  } else {
    using Policy = CubeMDRange<ExecSpace, Layout>;
    const DeviceSlabs s = device_slabs<Layout>(T, K);
    for (Index t0 = 0; t0 < T; t0 += s.dates)
      for (Index i0 = 0; i0 < N; i0 += s.ids)
        Kokkos::parallel_for(label,
                             Policy(space, {t0, i0, 0}, {std::min(T, t0 + s.dates), std::min(N, i0 + s.ids), K},
                                    typename Policy::tile_type{s.tile[0], s.tile[1], s.tile[2]}),
                             f);
    check_launched<ExecSpace>(label);
  }
}

// One team per `league` item (a date or an id); threads and vector lanes
// share the inner loops.
template <class ExecSpace>
Kokkos::TeamPolicy<ExecSpace> teams(ExecSpace const& space, Index league) {
  return Kokkos::TeamPolicy<ExecSpace>(space, static_cast<int>(league), Kokkos::AUTO);
}

}  // namespace cvest::policy
