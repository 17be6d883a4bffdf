#include "app/bench/Variants.hpp"

#include "core/FlatRun.hpp"
#include "core/Multiply.hpp"
#include "core/StreamingStores.hpp"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

namespace cvest::app::bench {

namespace detail {

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
  v.d = ops->d.data(), v.cv = ops->cv.data();
  v.walked = [ops, T, N, K] {
    if constexpr (!policy::on_host<Space> || !streaming::used_on<Space>())  // the plain Flat kernel: one of each
      return 1;
    else
      return policy::flat_walked(std::is_same_v<Layout, Kokkos::LayoutRight>, T, N * K, sizeof(Scalar), ops->d.data(),
                                 ops->cv.data());
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
    v.flat_streams = policy::flat_streams_text(
        policy::flat_left_streams(ops->d.data(), ops->cv.data(), T, sizeof(Scalar)), sizeof(Scalar), T);
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

}  // namespace detail

Arrays arrays(const Config& config, LayoutKind layout, Precision precision) {
  const detail::Variant v = detail::make_variant(Kokkos::DefaultExecutionSpace(), config, layout, precision);
  return {v.time_once, v.mismatches, v.clear_output, v.walked, v.d, v.cv};
}

}  // namespace cvest::app::bench
