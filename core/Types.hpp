#pragma once
// Every array type cvest uses, named once, with its layout and memory space
// spelled out. The layout is always a template parameter: comparing
// LayoutRight against LayoutLeft is one of the things cvest measures.
#include "core/Names.hpp"

#include <Kokkos_Core.hpp>

#include <type_traits>

namespace cvest {

using ExecSpace = Kokkos::DefaultExecutionSpace;

// Host memory that blocks travel through on their way to and from ExecSpace:
// pinned when ExecSpace is a Cuda device, so copies run at the link's speed
// and asynchronously; plain host memory otherwise.
#ifdef KOKKOS_ENABLE_CUDA
using StagingSpace = std::conditional_t<Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible,
                                        Kokkos::HostSpace, Kokkos::CudaHostPinnedSpace>;
#else
using StagingSpace = Kokkos::HostSpace;
#endif

// discount and cv: (dates T, ids N, cols K).
template <class Scalar, class Layout, class MemSpace = ExecSpace::memory_space>
using Cube = Kokkos::View<Scalar***, Layout, MemSpace>;

// multBy: (ids N, cols K), in the same layout as the cube it multiplies.
template <class Scalar, class Layout, class MemSpace = ExecSpace::memory_space>
using Table = Kokkos::View<Scalar**, Layout, MemSpace>;

// Calls f(Scalar{}, Layout{}) with the types the run-time names stand for.
template <class F>
auto with_types(Precision precision, LayoutKind layout, F&& f) {
  const bool right = layout == LayoutKind::right;
  if (precision == Precision::f64)
    return right ? f(double{}, Kokkos::LayoutRight{}) : f(double{}, Kokkos::LayoutLeft{});
  return right ? f(float{}, Kokkos::LayoutRight{}) : f(float{}, Kokkos::LayoutLeft{});
}

template <class Layout> constexpr LayoutKind layout_kind();
template <> constexpr LayoutKind layout_kind<Kokkos::LayoutRight>() { return LayoutKind::right; }
template <> constexpr LayoutKind layout_kind<Kokkos::LayoutLeft>() { return LayoutKind::left; }

}  // namespace cvest
