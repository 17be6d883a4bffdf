#pragma once
// The benchmark's data sets: one per layout and precision, filled and first
// touched as the kernels walk them, with the passes over them (each
// strategy, copies of their bytes) type-erased so the harness can interleave
// them all; and the values filled in.
#include "app/bench/Report.hpp"
#include "core/Roof.hpp"
#include "core/Spaces.hpp"
#include "core/Strategy.hpp"
#include "core/Types.hpp"

#include <Kokkos_Core.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cvest::app::bench {

// The values the in-memory benchmarks fill in: reproducible, non-trivial,
// every element's product distinct enough that one written to the wrong
// place is caught.
template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar multby_value(Index i, Index k) {
  return Scalar(1) + Scalar((i * 7 + k * 3) % 61) / Scalar(64);
}
template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar discount_value(Index t, Index i, Index k) {
  return Scalar(1) / Scalar(1 + t) - Scalar((i + 5 * k) % 97) / Scalar(1024);
}

// One layout and precision's arrays at config's shape (on huge pages, filled
// and first touched as the benchmark's are): `pass(s)` times one fenced pass
// of strategy s over them, `mismatches()` counts cv's elements other than
// multBy * discount after it, `clear()` zeroes cv, `walked()` says how many
// streams (LayoutLeft) or dates at once (LayoutRight) flat walks on them now
// (cvest tune's walks, app/tune/TuneWalks.hpp).
struct Arrays {
  std::function<double(Strategy)> pass;
  std::function<Index()> mismatches;
  std::function<void()> clear;
  std::function<int()> walked;
  const void* d = nullptr;  // where discount and cv lie (flat's walk hangs on their places in a page)
  const void* cv = nullptr;
};
Arrays arrays(const Config& config, LayoutKind layout, Precision precision);

namespace detail {

using Space = ExecSpace;
using Mem = Space::memory_space;

// Host arrays on huge pages, as NumPy's are (core/Spaces.hpp says why).
template <class View>
void huge_pages(const View& v) {
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename View::memory_space>::accessible)
    advise_huge_pages(v.data(), v.span() * sizeof(typename View::value_type));
}

// One (layout, precision) data set and the passes over it, type-erased so the
// benchmark loop can interleave all of them.
struct Variant {
  LayoutKind layout;
  Precision precision;
  std::function<double(Strategy)> time_once;       // seconds for one fenced pass
  std::function<Index()> mismatches;               // after a pass
  std::function<bool(Strategy)> streaming;
  // Seconds for the roof on these arrays: the kernel's own bytes (discount
  // copied into cv, multBy read once) in flat's runs (core/Roof.hpp).
  std::function<double(roof::Stores)> copy_once;
  // The same with streaming stores in flat's own walk with the multiply
  // removed: on LayoutLeft runs of T elements (empty where T >= flat's run),
  // on LayoutRight its tiles with its dates at once (empty where it takes
  // one date at a time: then its runs are flat's runs already).
  std::function<double()> copy_in_runs;
  // LayoutRight on the host: how flat groups dates on these arrays (policy::flat_dates).
  std::string flat_dates;
  // LayoutLeft on the host: how many streams flat walks at once (policy::flat_left_streams).
  std::string flat_streams;
  // flat's streams (LayoutLeft) or dates at once (the first group's, LayoutRight)
  // on the host as they are now (1 elsewhere).
  std::function<int()> walked;
  std::function<void()> clear_output;  // cv all zero
  const void* d = nullptr;              // discount's and cv's first elements
  const void* cv = nullptr;
};

Variant make_variant(Space const& space, const Config& c, LayoutKind layout, Precision precision);
// The configuration with its defaults filled in (every strategy), checked.
Config completed(const Config& config_in);
// Every layout x precision data set, each strategy run once on it and its
// output checked against m * d (std::runtime_error naming the first wrong).
std::vector<Variant> checked_variants(Space const& space, const Config& config,
                                      const std::vector<Precision>& precisions);

}  // namespace detail

}  // namespace cvest::app::bench
