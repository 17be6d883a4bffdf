#include "core/Bench.hpp"

#include "core/Multiply.hpp"
#include "core/Roof.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <ostream>
#include <stdexcept>

namespace cvest::bench {

namespace detail {

using Space = ExecSpace;
using Mem = Space::memory_space;

template <class Scalar, class Layout>
Operands<Scalar, Layout, Mem> make_operands(Space const& space, Index T, Index N, Index K) {
  const std::string tag = std::string(to_string(layout_kind<Layout>())) + "_" +
                          std::string(sizeof(Scalar) == 8 ? "double" : "float");
  Table<Scalar, Layout, Mem> m(Kokkos::view_alloc("cvest::bench::multBy_" + tag, Kokkos::WithoutInitializing), N, K);
  Cube<Scalar, Layout, Mem> d(Kokkos::view_alloc("cvest::bench::discount_" + tag, Kokkos::WithoutInitializing), T, N, K);
  Cube<Scalar, Layout, Mem> cv(Kokkos::view_alloc("cvest::bench::cv_" + tag, Kokkos::WithoutInitializing), T, N, K);
  // First touch by the same policy shape the kernels use.
  Kokkos::parallel_for("cvest::bench::fill_multBy", Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>>(space, {0, 0}, {N, K}),
                       KOKKOS_LAMBDA(Index i, Index k) { m(i, k) = multby_value<Scalar>(i, k); });
  Kokkos::parallel_for("cvest::bench::fill_discount", policy::cube_elements<Space, Layout>(space, T, N, K),
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
  v.streaming = [layout = v.layout, T, N, K](Strategy s) {
    return writes_streaming<Space>(s, layout, T, N, K, sizeof(Scalar));
  };
  return v;
}

Variant make_variant(Space const& space, const Config& c, LayoutKind layout, Precision precision) {
  return with_types(precision, layout, [&](auto scalar, auto layout_tag) {
    return make_variant<decltype(scalar), decltype(layout_tag)>(space, c.dates, c.ids, c.cols);
  });
}

}  // namespace detail
using namespace detail;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bytes_moved(Index T, Index N, Index K, Precision precision) {
  return (2.0 * double(T) * double(N) * double(K) + double(N) * double(K)) * double(element_size(precision));
}

Report run(const Config& config_in, std::ostream& progress) {
  Config config = config_in;
  if (config.strategies.empty())
    for (const auto& entry : strategy_table) config.strategies.push_back(entry.id);
  if (config.dates <= 0 || config.ids <= 0 || config.cols <= 0)
    throw std::invalid_argument(fmt::format("bench needs positive dates, ids and cols (got {} x {} x {})",
                                            config.dates, config.ids, config.cols));
  if (config.repeats < 1) throw std::invalid_argument("bench needs --repeats >= 1");
  if (config.layouts.empty() || config.precisions.empty())
    throw std::invalid_argument("bench needs at least one layout and one precision");

  Space space;
  Report report;
  report.build = build_facts();
  report.config = config;

  const Index elements = config.dates * config.ids * config.cols;
  double bytes = 3.0 * double(elements) * 8;  // roof arrays
  for (auto p : config.precisions) bytes += config.layouts.size() * 2.0 * double(elements) * double(element_size(p));
  fmt::print(progress, "cvest bench: {} x {} x {} on {} ({} threads), {:.2f} GiB of arrays\n", config.dates,
             config.ids, config.cols, report.build.backend, report.build.threads, bytes / double(1 << 30));

  std::vector<Variant> variants;
  for (auto p : config.precisions)
    for (auto l : config.layouts) variants.push_back(make_variant(space, config, l, p));

  // The roof: same element count as the cube, in double.
  roof::Flat<double, Mem> a(Kokkos::view_alloc("cvest::bench::roof_a", Kokkos::WithoutInitializing), elements);
  roof::Flat<double, Mem> b(Kokkos::view_alloc("cvest::bench::roof_b", Kokkos::WithoutInitializing), elements);
  roof::Flat<double, Mem> c(Kokkos::view_alloc("cvest::bench::roof_c", Kokkos::WithoutInitializing), elements);
  Kokkos::parallel_for("cvest::bench::fill_roof", policy::range(space, elements),
                       KOKKOS_LAMBDA(Index j) { a(j) = 0; b(j) = double(j % 1000); c(j) = double(j % 77); });
  space.fence();
  const double roof_bytes = 2.0 * double(elements) * 8, triad_bytes = 3.0 * double(elements) * 8;
  auto time_roof = [&](int which) {
    switch (which) {
      case 0: return roof::copy<Space, double>(space, a, b, roof::Stores::regular);
      case 1: return roof::copy<Space, double>(space, a, b, roof::Stores::streaming);
      default: return roof::triad<Space, double>(space, a, b, c);
    }
  };

  // Warm-up: one pass of everything, each output checked against m * d.
  for (int w = 0; w < 3; ++w) time_roof(w);
  for (auto& v : variants)
    for (auto s : config.strategies) {
      v.time_once(s);
      if (const Index bad = v.mismatches(); bad != 0)
        throw std::runtime_error(fmt::format("strategy {} ({}, {}) wrote {} of {} elements wrong", to_string(s),
                                             to_string(v.layout), to_string(v.precision), bad, elements));
    }

  // Timed passes, interleaved so that bandwidth swings hit every variant alike.
  std::vector<std::vector<double>> roof_times(3), times(variants.size() * config.strategies.size());
  for (int r = 0; r < config.repeats; ++r) {
    for (int w = 0; w < 3; ++w) roof_times[w].push_back(time_roof(w));
    for (std::size_t vi = 0; vi < variants.size(); ++vi)
      for (std::size_t si = 0; si < config.strategies.size(); ++si)
        times[vi * config.strategies.size() + si].push_back(variants[vi].time_once(config.strategies[si]));
    fmt::print(progress, "  pass {}/{} done\n", r + 1, config.repeats);
  }

  report.roof.copy_GBps = roof_bytes / median(roof_times[0]) / 1e9;
  report.roof.copy_streaming_GBps = roof_bytes / median(roof_times[1]) / 1e9;
  report.roof.triad_GBps = triad_bytes / median(roof_times[2]) / 1e9;
  for (std::size_t vi = 0; vi < variants.size(); ++vi)
    for (std::size_t si = 0; si < config.strategies.size(); ++si) {
      const auto& t = times[vi * config.strategies.size() + si];
      Result res{config.strategies[si], variants[vi].layout, variants[vi].precision};
      res.streaming = variants[vi].streaming(res.strategy);
      res.median_s = median(t);
      res.min_s = *std::min_element(t.begin(), t.end());
      res.max_s = *std::max_element(t.begin(), t.end());
      res.GBps = bytes_moved(config.dates, config.ids, config.cols, res.precision) / res.median_s / 1e9;
      res.roof_fraction = res.GBps / report.roof.best();
      report.results.push_back(res);
    }
  return report;
}

void print_table(const Report& report, std::ostream& out) {
  const auto& r = report.roof;
  fmt::print(out, "\ncvest bench  {} x {} x {}  backend {} (Kokkos {}, {} threads), median of {}\n",
             report.config.dates, report.config.ids, report.config.cols, report.build.backend,
             report.build.kokkos_version, report.build.threads, report.config.repeats);
  fmt::print(out, "roof (same run, same size): copy {:.1f} GB/s, copy with streaming stores {:.1f} GB/s, triad {:.1f} GB/s\n\n",
             r.copy_GBps, r.copy_streaming_GBps, r.triad_GBps);
  fmt::print(out, "{:<15} {:<6} {:<7} {:<9} {:>12} {:>9} {:>7}  {}\n", "strategy", "layout", "prec", "stores",
             "median ms", "GB/s", "x roof", "work items");
  const Result* best = nullptr;
  for (const auto& res : report.results) {
    fmt::print(out, "{:<15} {:<6} {:<7} {:<9} {:>12.3f} {:>9.1f} {:>7.2f}  {}\n", to_string(res.strategy),
               to_string(res.layout), to_string(res.precision), res.streaming ? "streaming" : "regular",
               res.median_s * 1e3, res.GBps, res.roof_fraction, info(res.strategy).work_items);
    if (!best || res.GBps > best->GBps) best = &res;
  }
  if (best)
    fmt::print(out, "\nbest: {} ({}, {}) at {:.2f} of the copy roof\n", to_string(best->strategy),
               to_string(best->layout), to_string(best->precision), best->roof_fraction);
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
  j["roof"] = {{"copy_GBps", report.roof.copy_GBps},
               {"copy_streaming_GBps", report.roof.copy_streaming_GBps},
               {"triad_GBps", report.roof.triad_GBps}};
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
                            {"roof_fraction", res.roof_fraction}});
  return j;
}

}  // namespace cvest::bench
