#pragma once
// Every array type cvest uses, named once, with its layout and memory space
// spelled out. The layout is always a template parameter: comparing
// LayoutRight against LayoutLeft is one of the things cvest measures.
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace cvest {

using ExecSpace = Kokkos::DefaultExecutionSpace;

// discount and cv: (dates T, ids N, cols K).
template <class Scalar, class Layout, class MemSpace = ExecSpace::memory_space>
using Cube = Kokkos::View<Scalar***, Layout, MemSpace>;

// multBy: (ids N, cols K), in the same layout as the cube it multiplies.
template <class Scalar, class Layout, class MemSpace = ExecSpace::memory_space>
using Table = Kokkos::View<Scalar**, Layout, MemSpace>;

// 64-bit indices everywhere a T*N*K count can pass 2^32 (200 x 10M x 5 does).
using Index = std::int64_t;

// Run-time names for the compile-time choices, as decks and flags spell them.
enum class LayoutKind { right, left };
enum class Precision { f64, f32 };

template <class Layout> constexpr LayoutKind layout_kind();
template <> constexpr LayoutKind layout_kind<Kokkos::LayoutRight>() { return LayoutKind::right; }
template <> constexpr LayoutKind layout_kind<Kokkos::LayoutLeft>() { return LayoutKind::left; }

std::string_view to_string(LayoutKind layout);
std::string_view to_string(Precision precision);
LayoutKind layout_from_name(std::string_view name);     // throws std::invalid_argument
Precision precision_from_name(std::string_view name);   // throws std::invalid_argument

}  // namespace cvest
