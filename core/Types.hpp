#pragma once
// Every array type cvest uses, named once, with its layout and memory space
// spelled out. The layout is always a template parameter: comparing
// LayoutRight against LayoutLeft is one of the things cvest measures.
#include "core/Names.hpp"

#include <Kokkos_Core.hpp>

namespace cvest {

using ExecSpace = Kokkos::DefaultExecutionSpace;

// discount and cv: (dates T, ids N, cols K).
template <class Scalar, class Layout, class MemSpace = ExecSpace::memory_space>
using Cube = Kokkos::View<Scalar***, Layout, MemSpace>;

// multBy: (ids N, cols K), in the same layout as the cube it multiplies.
template <class Scalar, class Layout, class MemSpace = ExecSpace::memory_space>
using Table = Kokkos::View<Scalar**, Layout, MemSpace>;

template <class Layout> constexpr LayoutKind layout_kind();
template <> constexpr LayoutKind layout_kind<Kokkos::LayoutRight>() { return LayoutKind::right; }
template <> constexpr LayoutKind layout_kind<Kokkos::LayoutLeft>() { return LayoutKind::left; }

}  // namespace cvest
