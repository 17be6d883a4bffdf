#include "app/Transfers.hpp"

#include "core/Plan.hpp"
#include "core/Policies.hpp"

#include <Kokkos_Timer.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <ostream>
#include <stdexcept>
#include <vector>

namespace cvest::app::transfers {

namespace {

using Space = ExecSpace;
using Mem = Space::memory_space;
using Host = Kokkos::DefaultHostExecutionSpace;
constexpr bool on_device = !policy::on_host<Space>;

template <class F>
double seconds(F&& f) {
  Kokkos::Timer timer;
  f();
  return timer.seconds();
}

// Whole-array copies, synchronous, each way, from pageable and from pinned
// host memory. Every array is touched first, so no page fault is timed.
CopyRates measure_copies(const Config& c) {
  const std::size_t n = std::max<std::size_t>(1, c.copy_bytes / sizeof(double));
  Kokkos::View<double*, Kokkos::HostSpace> pageable(
      Kokkos::view_alloc("cvest::transfers::pageable", Kokkos::WithoutInitializing), n);
  Kokkos::View<double*, StagingSpace> pinned(Kokkos::view_alloc("cvest::transfers::pinned", Kokkos::WithoutInitializing),
                                             n);
  Kokkos::View<double*, Mem> compute(Kokkos::view_alloc("cvest::transfers::compute", Kokkos::WithoutInitializing), n);
  Kokkos::deep_copy(pageable, 1.0);
  Kokkos::deep_copy(pinned, 1.0);
  Kokkos::deep_copy(compute, 2.0);
  std::vector<double> t[4];
  for (int r = 0; r <= c.repeats; ++r) {  // round 0 warms up
    const double s[4] = {seconds([&] { Kokkos::deep_copy(compute, pageable); }),
                         seconds([&] { Kokkos::deep_copy(pageable, compute); }),
                         seconds([&] { Kokkos::deep_copy(compute, pinned); }),
                         seconds([&] { Kokkos::deep_copy(pinned, compute); })};
    if (r > 0)
      for (int i = 0; i < 4; ++i) t[i].push_back(s[i]);
  }
  const double bytes = double(n) * sizeof(double);
  return {bytes / bench::median(t[0]) / 1e9, bytes / bench::median(t[1]) / 1e9, bytes / bench::median(t[2]) / 1e9,
          bytes / bench::median(t[3]) / 1e9};
}

template <class Scalar, class Layout>
void measure_pipeline(const Config& c, Report& rep, std::ostream& progress) {
  const Index T = c.dates, N = c.ids, K = c.cols, NK = N * K;
  using HostFlat = Kokkos::View<Scalar*, StagingSpace>;
  using HostConst = Kokkos::View<const Scalar*, StagingSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using HostMut = Kokkos::View<Scalar*, StagingSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  HostFlat m(Kokkos::view_alloc("cvest::transfers::multBy", Kokkos::WithoutInitializing), NK);
  HostFlat d(Kokkos::view_alloc("cvest::transfers::discount", Kokkos::WithoutInitializing), T * NK);
  HostFlat cv(Kokkos::view_alloc("cvest::transfers::cv", Kokkos::WithoutInitializing), T * NK);
  // The bench's values, filled (and first touched) on the host, in parallel.
  Kokkos::parallel_for("cvest::transfers::fill_multBy", Kokkos::RangePolicy<Host, Kokkos::IndexType<Index>>(0, NK),
                       [=](Index j) { m(j) = bench::multby_value<Scalar>(j / K, j % K); });
  Kokkos::parallel_for("cvest::transfers::fill_discount",
                       Kokkos::RangePolicy<Host, Kokkos::IndexType<Index>>(0, T * NK), [=](Index j) {
                         d(j) = bench::discount_value<Scalar>(j / NK, j % NK / K, j % K);
                         cv(j) = Scalar(0);
                       });
  Host().fence();

  const std::size_t block = c.block_bytes ? c.block_bytes : policy::default_block_bytes<Space>;
  // The budget is no limit here: the block cap decides. Blocks are whole
  // dates or one date's id range, so each is contiguous in the C-order cube.
  const BlockPlan plan = plan_blocks(T, N, K, sizeof(Scalar), std::size_t(1) << 50, {}, block);
  rep.blocks = plan.blocks.size();
  rep.block_dates = plan.block_dates;
  rep.block_ids = plan.block_ids;
  const auto offset = [=](const Block& b) { return (b.dates.begin * N + b.ids.begin) * K; };
  const auto length = [=](const Block& b) { return b.dates.size() * b.ids.size() * K; };

  BlockIO<Scalar> io;
  io.multby_at = [&](Range ids) -> const Scalar* { return m.data() + ids.begin * K; };
  io.discount_at = [&](const Block& b) -> const Scalar* { return d.data() + offset(b); };
  io.cv_at = [&](const Block& b) -> Scalar* { return cv.data() + offset(b); };
  PipelineOptions options;
  options.strategy = c.strategy;
  options.progress = false;
  options.force_staging = true;  // host spaces: copy in and out as a device would
  std::ostream null_out(nullptr);
  const auto run_once = [&] { return run_pipeline<Scalar, Layout>(plan, io, options, null_out); };

  // The same blocks copied in (and out) back to back on one instance, two
  // block buffers alternating as in the pipeline, multBy once.
  Space space;
  const Index block_elems = plan.block_dates * plan.block_ids * K;
  Kokkos::View<Scalar*, Mem> landing(Kokkos::view_alloc("cvest::transfers::landing", Kokkos::WithoutInitializing),
                                     2 * block_elems + NK);
  const auto slot = [&](std::size_t b, Index len) {
    const Index at = Index(b % 2) * block_elems;
    return Kokkos::subview(landing, std::make_pair(at, at + len));
  };
  const auto copies_in = [&] {
    space.fence();
    Kokkos::Timer timer;
    Kokkos::deep_copy(space, Kokkos::subview(landing, std::make_pair(2 * block_elems, 2 * block_elems + NK)),
                      HostConst(m.data(), NK));
    for (std::size_t b = 0; b < plan.blocks.size(); ++b) {
      const Block& blk = plan.blocks[b];
      Kokkos::deep_copy(space, slot(b, length(blk)), HostConst(d.data() + offset(blk), length(blk)));
    }
    space.fence();
    return timer.seconds();
  };
  const auto copies_out = [&] {
    space.fence();
    Kokkos::Timer timer;
    for (std::size_t b = 0; b < plan.blocks.size(); ++b) {
      const Block& blk = plan.blocks[b];
      Kokkos::deep_copy(space, HostMut(cv.data() + offset(blk), length(blk)), slot(b, length(blk)));
    }
    space.fence();
    return timer.seconds();
  };

  // Warm-up, and the pipeline's output checked against m * d everywhere.
  run_once();
  Index bad = 0;
  Kokkos::parallel_reduce(
      "cvest::transfers::check", Kokkos::RangePolicy<Host, Kokkos::IndexType<Index>>(0, T * NK),
      [=](Index j, Index& sum) { sum += cv(j) != m(j % NK) * d(j) ? 1 : 0; }, bad);
  if (bad != 0)
    throw std::runtime_error(fmt::format("the in-memory pipeline ({}, {}) wrote {} of {} elements wrong",
                                         to_string(c.strategy), to_string(layout_kind<Layout>()), bad, T * NK));
  copies_in();
  copies_out();

  // Interleaved rounds, so bandwidth swings hit all three alike.
  std::vector<double> in_s, out_s;
  std::vector<PipelineStats> runs;
  for (int r = 0; r < c.repeats; ++r) {
    in_s.push_back(copies_in());
    out_s.push_back(copies_out());
    runs.push_back(run_once());
    fmt::print(progress, "  round {}/{}: copies in {:.4f} s, copies out {:.4f} s, pipeline {:.4f} s\n", r + 1,
               c.repeats, in_s.back(), out_s.back(), runs.back().total_s);
  }
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.total_s < b.total_s; });
  rep.pipeline = runs[runs.size() / 2];
  rep.h2d_s = bench::median(in_s);
  rep.d2h_s = bench::median(out_s);
  rep.pipeline_s = rep.pipeline.total_s;
  rep.overlap_ratio = rep.pipeline_s / std::max(rep.h2d_s, rep.d2h_s);
}

}  // namespace

Report run(const Config& config, std::ostream& progress) {
  if (config.dates <= 0 || config.ids <= 0 || config.cols <= 0)
    throw std::invalid_argument(fmt::format("transfers needs positive dates, ids and cols (got {} x {} x {})",
                                            config.dates, config.ids, config.cols));
  if (config.repeats < 1) throw std::invalid_argument("transfers needs --repeats >= 1");
  if (config.copy_bytes < sizeof(double)) throw std::invalid_argument("transfers needs --copy-size of at least 8 bytes");
  Report rep;
  rep.build = build_facts();
  rep.config = config;
  rep.device = on_device;
  rep.pinned = !std::is_same_v<StagingSpace, Kokkos::HostSpace>;
  const double es = double(element_size(config.precision));
  rep.cube_bytes = double(config.dates) * double(config.ids) * double(config.cols) * es;
  fmt::print(progress, "cvest transfers: {} x {} x {} {} on {}; copy test {}, host cubes {} each\n", config.dates,
             config.ids, config.cols, to_string(config.precision), rep.build.backend,
             format_bytes(double(config.copy_bytes)), format_bytes(rep.cube_bytes));
  rep.copies = measure_copies(config);
  fmt::print(progress, "  copies measured\n");
  with_types(config.precision, config.layout, [&](auto scalar, auto layout) {
    measure_pipeline<decltype(scalar), decltype(layout)>(config, rep, progress);
  });
  return rep;
}

void print(const Report& r, std::ostream& out) {
  const auto& c = r.config;
  fmt::print(out, "\ncvest transfers  {} x {} x {} {}  {}/{}  backend {} (Kokkos {}), median of {}\n", c.dates, c.ids,
             c.cols, to_string(c.precision), to_string(c.strategy), to_string(c.layout), r.build.backend,
             r.build.kokkos_version, c.repeats);
  const auto& k = r.copies;
  fmt::print(out, "copies of {}:   pageable  h2d {:6.1f} GB/s  d2h {:6.1f} GB/s\n", format_bytes(double(c.copy_bytes)),
             k.pageable_h2d, k.pageable_d2h);
  fmt::print(out, "{:>{}}pinned    h2d {:6.1f} GB/s  d2h {:6.1f} GB/s   pinned / pageable: {:.2f}x in, {:.2f}x out{}\n",
             "", 11 + format_bytes(double(c.copy_bytes)).size() + 3, k.pinned_h2d, k.pinned_d2h,
             k.pinned_h2d / k.pageable_h2d, k.pinned_d2h / k.pageable_d2h,
             r.pinned ? "" : "  (no device in this build: both are plain host memory)");
  fmt::print(out, "pipeline in memory: {} blocks of {} dates x {} ids, {} per cube\n", r.blocks, r.block_dates,
             r.block_ids, format_bytes(r.cube_bytes));
  fmt::print(out, "  all blocks in {:.4f} s ({:.1f} GB/s), all blocks out {:.4f} s ({:.1f} GB/s), pipeline {:.4f} s\n",
             r.h2d_s, r.cube_bytes / r.h2d_s / 1e9, r.d2h_s, r.cube_bytes / r.d2h_s / 1e9, r.pipeline_s);
  const auto& s = r.pipeline.seconds;
  fmt::print(out, "  busy: h2d {:.4f} s, kernel {:.4f} s, d2h {:.4f} s\n", s[int(Phase::h2d)], s[int(Phase::kernel)],
             s[int(Phase::d2h)]);
  fmt::print(out, "pipeline / larger of its copies = {:.2f}{}\n", r.overlap_ratio,
             r.device ? " (1.00: copies in, kernels and copies out fully overlapped)"
                      : " (host spaces run the stages one after another: no overlap to expect)");
}

nlohmann::json to_json(const Report& r) {
  const auto& c = r.config;
  const auto& s = r.pipeline.seconds;
  return {{"backend", r.build.backend},
          {"kokkos_version", r.build.kokkos_version},
          {"threads", r.build.threads},
          {"machine", machine_json(r.build)},
          {"device", r.device},
          {"pinned_staging", r.pinned},
          {"shape", {{"dates", c.dates}, {"ids", c.ids}, {"cols", c.cols}}},
          {"precision", to_string(c.precision)},
          {"strategy", to_string(c.strategy)},
          {"layout", to_string(c.layout)},
          {"repeats", c.repeats},
          {"copy_bytes", c.copy_bytes},
          {"copies_GBps",
           {{"pageable_h2d", r.copies.pageable_h2d},
            {"pageable_d2h", r.copies.pageable_d2h},
            {"pinned_h2d", r.copies.pinned_h2d},
            {"pinned_d2h", r.copies.pinned_d2h}}},
          {"pinned_over_pageable", {{"h2d", r.copies.pinned_h2d / r.copies.pageable_h2d},
                                    {"d2h", r.copies.pinned_d2h / r.copies.pageable_d2h}}},
          {"pipeline",
           {{"blocks", r.blocks},
            {"block_dates", r.block_dates},
            {"block_ids", r.block_ids},
            {"cube_bytes", r.cube_bytes},
            {"copies_in_s", r.h2d_s},
            {"copies_out_s", r.d2h_s},
            {"pipeline_s", r.pipeline_s},
            {"overlap_ratio", r.overlap_ratio},
            {"busy_s", {{"h2d", s[int(Phase::h2d)]}, {"kernel", s[int(Phase::kernel)]}, {"d2h", s[int(Phase::d2h)]}}}}}};
}

}  // namespace cvest::app::transfers
