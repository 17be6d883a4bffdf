#include "app/Bench.hpp"

#include "app/FirstUse.hpp"
#include "core/Errors.hpp"
#include "core/FlatRun.hpp"
#include "core/Topology.hpp"
#include "core/Interrupt.hpp"
#include "core/Multiply.hpp"
#include "core/Roof.hpp"
#include "core/StreamingStores.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <istream>
#include <ostream>
#include <sstream>
#include <stdexcept>

namespace cvest::app::bench {

namespace detail {

using Space = ExecSpace;
using Mem = Space::memory_space;

// Host arrays on huge pages, as NumPy's are (core/Spaces.hpp says why).
template <class View>
void huge_pages(const View& v) {
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename View::memory_space>::accessible)
    advise_huge_pages(v.data(), v.span() * sizeof(typename View::value_type));
}

template <class Scalar, class Layout>
Operands<Scalar, Layout, Mem> make_operands(Space const& space, Index T, Index N, Index K) {
  const std::string tag = std::string(to_string(layout_kind<Layout>())) + "_" +
                          std::string(sizeof(Scalar) == 8 ? "double" : "float");
  Table<Scalar, Layout, Mem> m(Kokkos::view_alloc("cvest::bench::multBy_" + tag, Kokkos::WithoutInitializing), N, K);
  Cube<Scalar, Layout, Mem> d(Kokkos::view_alloc("cvest::bench::discount_" + tag, Kokkos::WithoutInitializing), T, N, K);
  Cube<Scalar, Layout, Mem> cv(Kokkos::view_alloc("cvest::bench::cv_" + tag, Kokkos::WithoutInitializing), T, N, K);
  huge_pages(d), huge_pages(cv);
  // First touch by the same policy shape the kernels use.
  Kokkos::parallel_for("cvest::bench::fill_multBy", Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>>(space, {0, 0}, {N, K}),
                       KOKKOS_LAMBDA(Index i, Index k) { m(i, k) = multby_value<Scalar>(i, k); });
  policy::for_cube_elements<Space, Layout>("cvest::bench::fill_discount", space, T, N, K,
                                           KOKKOS_LAMBDA(Index t, Index i, Index k) {
                                             d(t, i, k) = discount_value<Scalar>(t, i, k);
                                             cv(t, i, k) = Scalar(0);
                                           });
  space.fence();
  return {m, d, cv};
}

template <class Scalar, class Layout>
Index count_mismatches(Space const& space, const Operands<Scalar, Layout, Mem>& ops) {
  const auto m = ops.m;
  const auto d = ops.d;
  const auto cv = ops.cv;
  Index bad = 0;
  Kokkos::parallel_reduce(
      "cvest::bench::check", policy::cube_elements<Space, Layout>(space, d.extent(0), d.extent(1), d.extent(2)),
      KOKKOS_LAMBDA(Index t, Index i, Index k, Index & sum) { sum += cv(t, i, k) != m(i, k) * d(t, i, k) ? 1 : 0; },
      bad);
  return bad;
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
};

template <class Scalar, class Layout>
Variant make_variant(Space const& space, Index T, Index N, Index K) {
  auto ops = std::make_shared<Operands<Scalar, Layout, Mem>>(make_operands<Scalar, Layout>(space, T, N, K));
  Variant v;
  v.layout = layout_kind<Layout>();
  v.precision = sizeof(Scalar) == 8 ? Precision::f64 : Precision::f32;
  v.time_once = [space, ops](Strategy s) {
    space.fence();
    Kokkos::Timer timer;
    multiply(s, space, *ops);
    space.fence();
    return timer.seconds();
  };
  v.mismatches = [space, ops] { return count_mismatches(space, *ops); };
  v.clear_output = [space, ops] {
    Kokkos::deep_copy(space, ops->cv, Scalar(0));
    space.fence();
  };
  v.walked = [ops, T, N, K] {
    if constexpr (!policy::on_host<Space> || !streaming::used_on<Space>())  // the plain Flat kernel: one of each
      return 1;
    else if constexpr (std::is_same_v<Layout, Kokkos::LayoutLeft>)
      return policy::flat_left_streams(ops->d.data(), ops->cv.data(), T, sizeof(Scalar)).streams;
    else
      return policy::FlatWalk(T, N * K, sizeof(Scalar), ops->d.data(), ops->cv.data()).together.dates;
  };
  v.streaming = [layout = v.layout, T, N, K](Strategy s) {
    return writes_streaming<Space>(s, layout, T, N, K, sizeof(Scalar));
  };
  v.copy_once = [space, ops](roof::Stores stores) {
    return roof::copy_and_read<Space, Scalar>(space, ops->cv.data(), ops->d.data(), Index(ops->d.span()),
                                              ops->m.data(), Index(ops->m.span()), stores);
  };
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutRight> && policy::on_host<Space>) {
    // flat's own walk on these arrays (as the kernel builds it): what it says
    // of its dates is what the kernel does.
    const policy::FlatWalk walk(T, N * K, sizeof(Scalar), ops->d.data(), ops->cv.data());
    v.flat_dates = policy::flat_walk_dates_text(walk);
    if (walk.together.dates > 1)  // one date at a time: flat's runs, as copy_once walks them
      v.copy_in_runs = [space, ops, walk] {
        return roof::copy_in_walk<Space, Scalar>(space, ops->cv.data(), ops->d.data(), walk, ops->m.data());
      };
  }
  // T = 1: flat walks a one-date block as one run, as the other copies do.
  if (std::is_same_v<Layout, Kokkos::LayoutLeft> && policy::on_host<Space> && T > 1 &&
      T < policy::flat_run_elements(sizeof(Scalar))) {
    v.flat_streams =
        policy::flat_streams_text(policy::flat_left_streams(ops->d.data(), ops->cv.data(), T, sizeof(Scalar)), sizeof(Scalar));
    v.copy_in_runs = [space, ops, T] {
      return roof::copy_and_read<Space, Scalar>(space, ops->cv.data(), ops->d.data(), Index(ops->d.span()),
                                                ops->m.data(), Index(ops->m.span()), roof::Stores::streaming, T);
    };
  }
  return v;
}

Variant make_variant(Space const& space, const Config& c, LayoutKind layout, Precision precision) {
  return with_types(precision, layout, [&](auto scalar, auto layout_tag) {
    return make_variant<decltype(scalar), decltype(layout_tag)>(space, c.dates, c.ids, c.cols);
  });
}

// The configuration with its defaults filled in (every strategy), checked.
Config completed(const Config& config_in) {
  Config config = config_in;
  if (config.strategies.empty())
    for (const auto& entry : strategy_table) config.strategies.push_back(entry.id);
  if (config.dates <= 0 || config.ids <= 0 || config.cols <= 0)
    throw std::invalid_argument(fmt::format("bench needs positive dates, ids and cols (got {} x {} x {})",
                                            config.dates, config.ids, config.cols));
  if (config.repeats < 1) throw std::invalid_argument("bench needs --repeats >= 1");
  if (config.layouts.empty() || config.precisions.empty())
    throw std::invalid_argument("bench needs at least one layout and one precision");
  return config;
}

// Every layout x precision data set, each strategy run once on it and its
// output checked against m * d (std::runtime_error naming the first wrong).
std::vector<Variant> checked_variants(Space const& space, const Config& config,
                                      const std::vector<Precision>& precisions) {
  std::vector<Variant> variants;
  for (auto p : precisions)
    for (auto l : config.layouts) variants.push_back(make_variant(space, config, l, p));
  const Index elements = config.dates * config.ids * config.cols;
  for (auto& v : variants)
    for (auto s : config.strategies) {
      v.time_once(s);
      if (const Index bad = v.mismatches(); bad != 0)
        throw std::runtime_error(fmt::format("strategy {} ({}, {}) wrote {} of {} elements wrong", to_string(s),
                                             to_string(v.layout), to_string(v.precision), bad, elements));
    }
  return variants;
}

// First touch of the roof's arrays (a free function: nvcc takes no device
// lambda inside a constructor).
void fill_roof(Space const& space, const roof::Flat<double, Mem>& a, const roof::Flat<double, Mem>& b,
               const roof::Flat<double, Mem>& c) {
  Kokkos::parallel_for("cvest::bench::fill_roof", policy::range(space, a.extent(0)), KOKKOS_LAMBDA(Index j) {
    a(j) = 0;
    b(j) = double(j % 1000);
    c(j) = double(j % 77);
  });
  space.fence();
}

// The machine's roof arrays: the cube's element count, in double; `c` is
// the triad's third.
struct RoofArrays {
  roof::Flat<double, Mem> a, b, c;
  RoofArrays(Space const& space, Index elements)
      : a(Kokkos::view_alloc("cvest::bench::roof_a", Kokkos::WithoutInitializing), elements),
        b(Kokkos::view_alloc("cvest::bench::roof_b", Kokkos::WithoutInitializing), elements),
        c(Kokkos::view_alloc("cvest::bench::roof_c", Kokkos::WithoutInitializing), elements) {
    huge_pages(a), huge_pages(b), huge_pages(c);
    fill_roof(space, a, b, c);
  }
  double copy(Space const& space, roof::Stores stores) const { return roof::copy<Space, double>(space, a, b, stores); }
  double triad(Space const& space) const { return roof::triad<Space, double>(space, a, b, c); }
};

}  // namespace detail
using namespace detail;

std::string unsteady_roof(const std::vector<double>& regular_s, const std::vector<double>& streaming_s, double bytes,
                          bool beyond_caches) {
  // In cache a pass takes microseconds, launch overheads and all: no roof
  // for memory bandwidth, and too noisy to judge.
  if (regular_s.empty() || streaming_s.empty() || !beyond_caches) return "";
  // One slow repeat is noise on a shared VM (it moves no median); a third of
  // them at under half the best, or the two kinds of copy more than 2x apart
  // on arrays beyond the caches (streaming stores save at most a third of
  // the traffic), is not.
  const auto slow_share = [](const std::vector<double>& t) {
    const double fastest = *std::min_element(t.begin(), t.end());
    return double(std::count_if(t.begin(), t.end(), [&](double x) { return x > 2.0 * fastest; })) / double(t.size());
  };
  const auto range = [&](const std::vector<double>& t) {
    const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
    return fmt::format("{:.1f}-{:.1f} GB/s (median {:.1f})", bytes / *hi / 1e9, bytes / *lo / 1e9,
                       bytes / median(t) / 1e9);
  };
  const double kinds = median(regular_s) / median(streaming_s);  // streaming GB/s over regular GB/s
  if (std::max(slow_share(regular_s), slow_share(streaming_s)) > 1.0 / 3.0 || kinds > 2.0 || kinds < 0.5)
    return fmt::format("the copy roof disagreed with itself: copy {}, with streaming stores {}, over {} repeats",
                       range(regular_s), range(streaming_s), regular_s.size());
  return "";
}

namespace {

// The copy kinds timed for a row: regular, streaming, and the copy in
// flat's walk where there is one.
std::vector<const std::vector<double>*> copy_kinds(const std::vector<double>& regular_s,
                                                   const std::vector<double>& streaming_s,
                                                   const std::vector<double>& runs_s) {
  std::vector<const std::vector<double>*> kinds{&regular_s, &streaming_s};
  if (!runs_s.empty()) kinds.push_back(&runs_s);
  return kinds;
}

}  // namespace

std::vector<double> roof_fractions(const std::vector<double>& kernel_s, double moved,
                                   const std::vector<double>& regular_s, const std::vector<double>& streaming_s,
                                   double copied, const std::vector<double>& runs_s) {
  // The roof is the kind of copy fastest over the repeats (by median), and
  // each repeat pairs the kernel's pass with that kind's pass beside it. Not
  // the faster of the kinds in each repeat: of two kinds equally fast, the
  // faster of two noisy passes beats either kind's own pace, and the kernel
  // has one pass (3-5% lower fractions on this VM, docs/benchmarks.md).
  const auto kinds = copy_kinds(regular_s, streaming_s, runs_s);
  const std::vector<double>* roof = nullptr;
  for (const auto* kind : kinds)
    if (!kind->empty() && (!roof || median(*kind) < median(*roof))) roof = kind;
  std::vector<double> fractions;
  for (std::size_t r = 0; roof && r < kernel_s.size() && r < roof->size(); ++r)
    fractions.push_back((moved / kernel_s[r]) / (copied / (*roof)[r]));
  return fractions;
}

double roof_fraction(const std::vector<double>& kernel_s, double moved, const std::vector<double>& regular_s,
                     const std::vector<double>& streaming_s, double copied, const std::vector<double>& runs_s) {
  return median(roof_fractions(kernel_s, moved, regular_s, streaming_s, copied, runs_s));
}

double best_fraction(const std::vector<double>& kernel_s, double moved, const std::vector<double>& regular_s,
                     const std::vector<double>& streaming_s, double copied, const std::vector<double>& runs_s) {
  double fastest_copy = 0;
  for (const auto* kind : copy_kinds(regular_s, streaming_s, runs_s))
    for (const double s : *kind)
      if (s > 0 && (fastest_copy == 0 || s < fastest_copy)) fastest_copy = s;
  if (kernel_s.empty() || fastest_copy == 0) return 0;
  return (moved / *std::min_element(kernel_s.begin(), kernel_s.end())) / (copied / fastest_copy);
}

std::array<double, 2> quartiles(std::vector<double> v) {
  if (v.empty()) return {0, 0};
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {  // linear between the closest ranks
    const double x = q * double(v.size() - 1);
    const std::size_t lo = std::size_t(x), hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (x - double(lo)) * (v[hi] - v[lo]);
  };
  return {at(0.25), at(0.75)};
}

bool above_roof(const Result& res) {
  // Strict: faster than every copy beside it (each repeat's fastest) in
  // every repeat; a repeat without a copy of some kind clears it.
  const auto kinds = copy_kinds(res.roof_regular_s, res.roof_streaming_s, res.roof_runs_s);
  for (std::size_t r = 0; r < res.kernel_s.size(); ++r)
    for (const auto* kind : kinds)
      if (r >= kind->size() || res.kernel_s[r] >= (*kind)[r]) return false;
  return res.kernel_s.size() >= 5;
}

double bytes_copied(Index elements, Precision precision) {
  return 2.0 * double(elements) * double(element_size(precision));
}

double bytes_moved(Index T, Index N, Index K, Precision precision) {
  return (2.0 * double(T) * double(N) * double(K) + double(N) * double(K)) * double(element_size(precision));
}

// Every variant's timings over the repeats, and the roof's (regular copy,
// streaming copy, triad), and each variant's own copy of its arrays.
struct Timings {
  std::vector<std::vector<double>> roof{3};
  std::vector<std::vector<double>> kernels;  // variant by variant, strategy by strategy
  // Row by row as kernels: regular, streaming, streaming in runs of T (Variant::copy_in_runs).
  std::vector<std::array<std::vector<double>, 3>> own_roof;
};

double time_roof(const Space& space, const RoofArrays& roof_arrays, int which) {
  switch (which) {
    case 0: return roof_arrays.copy(space, roof::Stores::regular);
    case 1: return roof_arrays.copy(space, roof::Stores::streaming);
    default: return roof_arrays.triad(space);
  }
}

// Everything in turn until warm_seconds have passed, so no variant (nor the
// roof) meets memory the process has only just touched.
void warm_up(const Space& space, const Config& config, std::vector<Variant>& variants, const RoofArrays& roof_arrays,
             std::ostream& progress) {
  for (int w = 0; w < 3; ++w) time_roof(space, roof_arrays, w);
  Kokkos::Timer warm;
  while (warm.seconds() < config.warm_seconds) {
    throw_if_interrupted();
    for (int w = 0; w < 2; ++w) time_roof(space, roof_arrays, w);
    for (auto& v : variants) {
      for (auto stores : {roof::Stores::regular, roof::Stores::streaming}) v.copy_once(stores);
      if (v.copy_in_runs) v.copy_in_runs();
      for (auto s : config.strategies) v.time_once(s);
    }
  }
  fmt::print(progress, "  warmed {:.1f} s\n", warm.seconds());
}

// Timed passes, interleaved so that bandwidth swings hit every variant alike.
// Each row's own roof too, beside each of its passes: its bytes copied and
// read on its own arrays, both kinds of store. Its pages are the kernel's
// pages: the roof's arrays, allocated last, got half as many huge pages on
// this machine, and a kernel then ran at 1.12-1.23 of their copy. Next to
// it in time: this VM's bandwidth swings between about 45 and 70 GB/s
// within seconds, and a kernel paired with copies a few passes away read
// 1.04-1.11 of them over 9 repeats where, alternated pass by pass, it read
// 0.98-0.99 over 200 (docs/benchmarks.md). The passes start one later in
// each repeat, so each takes every place in turn (in a cycle: the kernel
// comes after the streaming copy but where it is first).
Timings timed_passes(const Space& space, const Config& config, std::vector<Variant>& variants,
                     const RoofArrays& roof_arrays, std::ostream& progress) {
  Timings t;
  t.kernels.resize(variants.size() * config.strategies.size());
  t.own_roof.resize(t.kernels.size());
  for (int r = 0; r < config.repeats; ++r) {
    throw_if_interrupted();
    for (int w = 0; w < 3; ++w) t.roof[w].push_back(time_roof(space, roof_arrays, w));
    for (std::size_t vi = 0; vi < variants.size(); ++vi)
      for (std::size_t si = 0; si < config.strategies.size(); ++si) {
        const std::size_t row = vi * config.strategies.size() + si;
        const std::size_t passes = variants[vi].copy_in_runs ? 4 : 3;
        for (std::size_t p = 0; p < passes; ++p)
          switch ((p + std::size_t(r)) % passes) {
            case 0: t.own_roof[row][0].push_back(variants[vi].copy_once(roof::Stores::regular)); break;
            case 1: t.own_roof[row][1].push_back(variants[vi].copy_once(roof::Stores::streaming)); break;
            case 2: t.kernels[row].push_back(variants[vi].time_once(config.strategies[si])); break;
            default: t.own_roof[row][2].push_back(variants[vi].copy_in_runs());
          }
      }
    fmt::print(progress, "  pass {}/{} done\n", r + 1, config.repeats);
  }
  return t;
}

// The roof's figures; UnsteadyRoof where they disagree beyond noise: the
// roof judges everything else, and fractions of such a roof would mislead.
void roof_figures(const Timings& t, Index elements, Report& report) {
  const double roof_bytes = 2.0 * double(elements) * 8, triad_bytes = 3.0 * double(elements) * 8;
  report.roof.copy_GBps = roof_bytes / median(t.roof[0]) / 1e9;
  report.roof.copy_streaming_GBps = roof_bytes / median(t.roof[1]) / 1e9;
  report.roof.triad_GBps = triad_bytes / median(t.roof[2]) / 1e9;
  const auto [c0, c1] = std::minmax_element(t.roof[0].begin(), t.roof[0].end());
  const auto [s0, s1] = std::minmax_element(t.roof[1].begin(), t.roof[1].end());
  report.roof.copy_min_GBps = roof_bytes / *c1 / 1e9;
  report.roof.copy_max_GBps = roof_bytes / *c0 / 1e9;
  report.roof.copy_streaming_min_GBps = roof_bytes / *s1 / 1e9;
  report.roof.copy_streaming_max_GBps = roof_bytes / *s0 / 1e9;
  if (const auto problem = unsteady_roof(t.roof[0], t.roof[1], roof_bytes, elements * 8 >= (Index(64) << 20));
      !problem.empty())
    throw UnsteadyRoof(problem + "; the machine was busy or its memory still cold, and fractions of such a roof would "
                                 "mislead; run again (a longer --warm helps)");
}

void result_figures(const Timings& t, const Config& config, const std::vector<Variant>& variants, Report& report) {
  for (std::size_t vi = 0; vi < variants.size(); ++vi) {
    const Precision precision = variants[vi].precision;
    // The roof moved the kernel's own bytes.
    const double moved = bytes_moved(config.dates, config.ids, config.cols, precision), copied = moved;
    for (std::size_t si = 0; si < config.strategies.size(); ++si) {
      const auto& k = t.kernels[vi * config.strategies.size() + si];
      const auto& [regular_s, streaming_s, runs_s] = t.own_roof[vi * config.strategies.size() + si];
      Result res{config.strategies[si], variants[vi].layout, precision};
      res.roof_copy_GBps = copied / median(regular_s) / 1e9;
      res.roof_copy_streaming_GBps = copied / median(streaming_s) / 1e9;
      res.roof_GBps = std::max(res.roof_copy_GBps, res.roof_copy_streaming_GBps);
      if (!runs_s.empty()) res.roof_GBps = std::max(res.roof_GBps, copied / median(runs_s) / 1e9);
      res.streaming = variants[vi].streaming(res.strategy);
      res.median_s = median(k);
      res.min_s = *std::min_element(k.begin(), k.end());
      res.max_s = *std::max_element(k.begin(), k.end());
      res.GBps = moved / res.median_s / 1e9;
      const std::vector<double> fractions = roof_fractions(k, moved, regular_s, streaming_s, copied, runs_s);
      res.roof_fraction = median(fractions);
      const auto [q1, q3] = quartiles(fractions);
      res.roof_fraction_q1 = q1, res.roof_fraction_q3 = q3;
      res.roof_fraction_best = best_fraction(k, moved, regular_s, streaming_s, copied, runs_s);
      res.kernel_s = k;
      res.roof_regular_s = regular_s;
      res.roof_streaming_s = streaming_s;
      res.roof_runs_s = runs_s;
      report.results.push_back(res);
    }
  }
}

Arrays arrays(const Config& config, LayoutKind layout, Precision precision) {
  const detail::Variant v = detail::make_variant(Kokkos::DefaultExecutionSpace(), config, layout, precision);
  return {v.time_once, v.mismatches, v.clear_output, v.walked};
}

double bench_bytes(const Config& config) {
  const double elements = double(config.dates) * double(config.ids) * double(config.cols);
  double bytes = 3.0 * elements * 8;  // roof arrays
  for (auto p : config.precisions)
    bytes += double(config.layouts.size()) * (2 * elements + double(config.ids * config.cols)) *
             double(element_size(p));
  return bytes;
}

std::string refusal(const Config& config, double available) {
  const double bytes = bench_bytes(config), usable = 0.9 * available;
  if (available <= 0 || bytes <= usable) return "";
  Config one = config;
  one.ids = 1;
  const Index fit = Index(usable / bench_bytes(one));
  const auto counted = [](std::size_t n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); };
  return fmt::format("bench {} x {} x {} ({}, {}) needs {:.1f} GiB of arrays; {:.1f} GiB of memory is available "
                     "(a tenth kept back): at most {} ids fit at {} dates (fewer layouts or precisions fit more)",
                     config.dates, config.ids, config.cols, counted(config.layouts.size(), "layout"),
                     counted(config.precisions.size(), "precision"), bytes / double(1 << 30),
                     available / double(1 << 30), fit, config.dates);
}

Report run(const Config& config_in, std::ostream& progress) {
  const Config config = completed(config_in);
  Space space;
  Report report;
  report.build = build_facts();
  report.config = config;

  const Index elements = config.dates * config.ids * config.cols;
  const double bytes = bench_bytes(config);
  // Refused before any allocation: a plan past memory allocated 26.8 GiB
  // on a 24 GiB host and swapped, or was killed (issue 59).
  if (policy::on_host<Space>)
    if (const std::string no = refusal(config, available_memory_bytes()); !no.empty()) throw InputError(no);
  fmt::print(progress, "cvest bench: {} x {} x {} on {} ({} threads), {:.2f} GiB of arrays\n", config.dates,
             config.ids, config.cols, report.build.backend, report.build.threads, bytes / double(1 << 30));
  if (std::find(config.strategies.begin(), config.strategies.end(), Strategy::flat) != config.strategies.end())
    for (auto p : config.precisions)
      if (std::string said = measure_on_first_use(p, progress); !said.empty())
        report.first_use += (report.first_use.empty() ? "" : "; ") + said;

  // Warm-up: one pass of everything, each output checked against m * d.
  std::vector<Variant> variants = checked_variants(space, config, config.precisions);
  const RoofArrays roof_arrays(space, elements);
  warm_up(space, config, variants, roof_arrays, progress);
  const Timings timings = timed_passes(space, config, variants, roof_arrays, progress);
  roof_figures(timings, elements, report);
  result_figures(timings, config, variants, report);
  const auto add = [](std::string& to, const Variant& v, const std::string& text) {
    if (!text.empty()) to += fmt::format("{}{}: {}", to.empty() ? "" : " | ", to_string(v.precision), text);
  };
  for (const auto& v : variants) {
    add(report.flat_dates, v, v.flat_dates);
    add(report.flat_streams, v, v.flat_streams);
  }
  return report;
}

struct Server::State {
  Config config;
  Precision precision;
  Space space;
  std::vector<Variant> variants;
  double moved;  // by a kernel pass and by a roof pass alike

  explicit State(const Config& c)
      : config(completed(c)), precision(config.precisions.front()),
        variants(checked_variants(space, config, {precision})),
        moved(bytes_moved(config.dates, config.ids, config.cols, precision)) {}

  // On the first layout's own arrays (its discount copied into its cv, its
  // multBy read: a kernel's bytes), as run()'s rows are judged: separate
  // arrays allocated after the variants got half their pages as huge pages,
  // and cost 2 arrays more memory.
  nlohmann::json roof_pass() const {
    const Variant& v = variants.front();
    const double regular = v.copy_once(roof::Stores::regular);
    const double streaming = v.copy_once(roof::Stores::streaming);
    nlohmann::json j{{"copy_GBps", moved / regular / 1e9}, {"copy_streaming_GBps", moved / streaming / 1e9},
                     {"arrays", fmt::format("discount into cv, multBy read, {}, {}", to_string(v.layout),
                                            to_string(precision))}};
    // The copy in flat's own walk too, where the bench's rows have it.
    if (v.copy_in_runs) j["copy_walk_GBps"] = moved / v.copy_in_runs() / 1e9;
    return j;
  }
};

Server::Server(const Config& config) : state_(std::make_unique<State>(config)) {}
Server::~Server() = default;

std::string Server::describe() const {
  const auto& c = state_->config;
  return fmt::format("{} x {} x {} {}, {} strategies x {} layouts, checked", c.dates, c.ids, c.cols,
                     to_string(state_->precision), c.strategies.size(), state_->variants.size());
}

nlohmann::json Server::handle(const std::string& line) {
  auto& st = *state_;
  std::istringstream words(line);
  std::string command;
  words >> command;
  try {
    if (command == "warm") {
      double seconds = 0;
      words >> seconds;
      Kokkos::Timer timer;
      int passes = 0;
      do {
        for (auto& v : st.variants)
          for (auto s : st.config.strategies) v.time_once(s);
        st.roof_pass();
        ++passes;
      } while (timer.seconds() < seconds);
      return {{"warmed_s", timer.seconds()}, {"passes", passes}};
    }
    if (command == "time") {
      std::string strategy_name, layout_name;
      words >> strategy_name >> layout_name;
      const Strategy s = strategy_from_name(strategy_name);
      const LayoutKind l = layout_from_name(layout_name);
      const auto v = std::find_if(st.variants.begin(), st.variants.end(), [&](const Variant& x) { return x.layout == l; });
      if (v == st.variants.end()) throw std::invalid_argument("layout " + layout_name + " was not set up");
      const double seconds = v->time_once(s);
      return {{"strategy", strategy_name}, {"layout", layout_name}, {"seconds", seconds},
              {"GBps", st.moved / seconds / 1e9}, {"streaming_stores", v->streaming(s)}};
    }
    if (command == "roof") return st.roof_pass();
    if (command == "touch") {  // every array once, after this process sat idle
      Kokkos::Timer timer;
      st.roof_pass();
      for (auto& v : st.variants) v.time_once(Strategy::flat);
      return {{"touched_s", timer.seconds()}};
    }
    return {{"error", "unknown command '" + command + "'; valid: warm SECONDS, touch, time STRATEGY LAYOUT, roof, quit"}};
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}

void serve(const Config& config, std::istream& in, std::ostream& out, std::ostream& progress) {
  Server server(config);
  fmt::print(progress, "cvest bench --serve: {}\n", server.describe());
  out << "ready" << std::endl;
  std::string line;
  while (std::getline(in, line)) {
    std::string command;
    std::istringstream(line) >> command;
    if (command == "quit") break;
    out << server.handle(line).dump() << std::endl;
  }
}

nlohmann::json to_json(const Report& report) {
  nlohmann::json j;
  j["backend"] = report.build.backend;
  j["kokkos_version"] = report.build.kokkos_version;
  j["execution_spaces"] = report.build.spaces;
  j["threads"] = report.build.threads;
  j["machine"] = machine_json(report.build);
  j["shape"] = {{"dates", report.config.dates}, {"ids", report.config.ids}, {"cols", report.config.cols}};
  j["repeats"] = report.config.repeats;
  j["warm_seconds"] = report.config.warm_seconds;
  j["first_use"] = report.first_use;
  if (policy::on_host<Kokkos::DefaultExecutionSpace>) {
    j["flat_run_bytes"] = policy::flat_run().bytes;
    j["flat_dates"] = report.flat_dates;
    j["flat_streams"] = report.flat_streams;
    j["flat_tile_bytes"] =
        policy::flat_tile_bytes(std::size_t(report.config.ids * report.config.cols) * 8, 8, policy::flat_dates_most());
    j["caches"] = policy::topology_text(policy::machine_topology());
  }
  j["roof"] = {{"copy_GBps", report.roof.copy_GBps},
               {"copy_streaming_GBps", report.roof.copy_streaming_GBps},
               {"triad_GBps", report.roof.triad_GBps},
               {"copy_min_GBps", report.roof.copy_min_GBps},
               {"copy_max_GBps", report.roof.copy_max_GBps},
               {"copy_streaming_min_GBps", report.roof.copy_streaming_min_GBps},
               {"copy_streaming_max_GBps", report.roof.copy_streaming_max_GBps}};
  j["results"] = nlohmann::json::array();
  for (const auto& res : report.results)
    j["results"].push_back({{"strategy", to_string(res.strategy)},
                            {"layout", to_string(res.layout)},
                            {"precision", to_string(res.precision)},
                            {"streaming_stores", res.streaming},
                            {"median_s", res.median_s},
                            {"min_s", res.min_s},
                            {"max_s", res.max_s},
                            {"GBps", res.GBps},
                            {"roof_GBps", res.roof_GBps},
                            {"roof_copy_GBps", res.roof_copy_GBps},
                            {"roof_copy_streaming_GBps", res.roof_copy_streaming_GBps},
                            {"roof_fraction", res.roof_fraction},
                            {"roof_fraction_quartiles", {res.roof_fraction_q1, res.roof_fraction_q3}},
                            {"roof_fraction_best", res.roof_fraction_best},
                            {"measurement_fault", above_roof(res)},
                            {"seconds", res.kernel_s},
                            {"roof_regular_seconds", res.roof_regular_s},
                            {"roof_streaming_seconds", res.roof_streaming_s},
                            {"roof_streaming_runs_seconds", res.roof_runs_s}});
  return j;
}

}  // namespace cvest::app::bench
