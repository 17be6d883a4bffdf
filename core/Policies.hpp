#pragma once
// The one place where execution policies are built: iteration order, tiling
// and index types are decided here, not scattered over the kernels.
// Index ranges are half-open [begin, end).
#include "core/Types.hpp"

#include <algorithm>
#include <cstddef>
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

// One team per `league` item (a date or an id); threads and vector lanes
// share the inner loops.
template <class ExecSpace>
Kokkos::TeamPolicy<ExecSpace> teams(ExecSpace const& space, Index league) {
  return Kokkos::TeamPolicy<ExecSpace>(space, static_cast<int>(league), Kokkos::AUTO);
}

}  // namespace cvest::policy
