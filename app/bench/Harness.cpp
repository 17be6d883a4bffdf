#include "app/bench/Harness.hpp"

#include "app/FirstUse.hpp"
#include "app/bench/RoofStats.hpp"
#include "app/bench/Variants.hpp"
#include "core/Errors.hpp"
#include "core/Interrupt.hpp"
#include "core/Roof.hpp"
#include "core/Spaces.hpp"

#include <Kokkos_Core.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <array>
#include <ostream>
#include <vector>

namespace cvest::app::bench {

namespace detail {

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

namespace {

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

}  // namespace

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

}  // namespace cvest::app::bench
