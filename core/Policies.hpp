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
// 600x a copy of its bytes on an H200). clear_launch_errors() before the
// launches drops an error left by an earlier call that was not about them;
// check_launched() after them throws on any Cuda error since. Nothing on
// other spaces.
template <class ExecSpace>
void clear_launch_errors() {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) (void)cudaGetLastError();
#endif
}
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
// an H200: 3.4 maps dates to x, ids to y, columns to z); so each launch
// covers a slab of at most slab[0] dates x slab[1] ids x slab[2] columns, in
// tiles of tile[0] x tile[1] x tile[2]: LayoutRight an id's K columns (up to
// 16) by ~256 / K ids, LayoutLeft up to 32 dates by enough ids for ~256
// threads (the contiguous index across neighbouring threads wherever Kokkos
// maps it to x; 3.4 maps dates there).
struct DeviceSlabs {
  static constexpr Index max_grid = 65535;
  Index tile[3] = {1, 1, 1};
  Index slab[3] = {0, 0, 0};
};
template <class Layout>
DeviceSlabs device_slabs(Index T, Index K) {
  DeviceSlabs s;
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutRight>) {
    s.tile[2] = std::clamp<Index>(K, 1, 16);
    s.tile[1] = std::max<Index>(1, 256 / s.tile[2]);
  } else {
    s.tile[0] = std::clamp<Index>(T, 1, 32);
    s.tile[1] = std::max<Index>(8, 256 / s.tile[0]);
  }
  for (int d = 0; d < 3; ++d) s.slab[d] = DeviceSlabs::max_grid * s.tile[d];
  return s;
}

// f(lower, upper) for each slab of the (T, N, K) cube, in order.
template <class F>
void for_each_slab(const DeviceSlabs& s, Index T, Index N, Index K, F&& f) {
  const Index extent[3] = {T, N, K};
  for (Index t0 = 0; t0 < T; t0 += s.slab[0])
    for (Index i0 = 0; i0 < N; i0 += s.slab[1])
      for (Index k0 = 0; k0 < K; k0 += s.slab[2]) {
        const Index lower[3] = {t0, i0, k0};
        Index upper[3];
        for (int d = 0; d < 3; ++d) upper[d] = std::min(extent[d], lower[d] + s.slab[d]);
        f(lower, upper);
      }
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
    clear_launch_errors<ExecSpace>();
    for_each_slab(s, T, N, K, [&](const Index* lower, const Index* upper) {
      Kokkos::parallel_for(label,
                           Policy(space, {lower[0], lower[1], lower[2]}, {upper[0], upper[1], upper[2]},
                                  typename Policy::tile_type{s.tile[0], s.tile[1], s.tile[2]}),
                           f);
    });
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
