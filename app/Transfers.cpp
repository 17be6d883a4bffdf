#include "app/Transfers.hpp"

#include "app/bench/RoofStats.hpp"
#include "app/bench/Variants.hpp"
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

// The in-memory pipeline's arrays (pinned staging on a device build, the
// bench's values), its blocks, and what the pipeline's copies alone take:
// the same blocks copied in (and out) back to back on one instance, two
// block buffers alternating as in the pipeline, multBy once.
template <class Scalar, class Layout>
class PipelineCopies {
 public:
  using HostFlat = Kokkos::View<Scalar*, StagingSpace>;
  using HostConst = Kokkos::View<const Scalar*, StagingSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using HostMut = Kokkos::View<Scalar*, StagingSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  explicit PipelineCopies(const Config& c)
      : c_(c), T_(c.dates), N_(c.ids), K_(c.cols), NK_(N_ * K_),
        m_(Kokkos::view_alloc("cvest::transfers::multBy", Kokkos::WithoutInitializing), NK_),
        d_(Kokkos::view_alloc("cvest::transfers::discount", Kokkos::WithoutInitializing), T_ * NK_),
        cv_(Kokkos::view_alloc("cvest::transfers::cv", Kokkos::WithoutInitializing), T_ * NK_),
        // The budget is no limit here: the block cap decides. Blocks are
        // whole dates or one date's id range, so each is contiguous in the
        // C-order cube.
        plan_(plan_blocks(T_, N_, K_, sizeof(Scalar), std::size_t(1) << 50, {},
                          c.block_bytes ? c.block_bytes : policy::default_block_bytes<Space>)),
        block_elems_(plan_.block_dates * plan_.block_ids * K_),
        landing_(Kokkos::view_alloc("cvest::transfers::landing", Kokkos::WithoutInitializing), 2 * block_elems_ + NK_) {
    fill();
    io_.multby_at = [this](Range ids) -> const Scalar* { return m_.data() + ids.begin * K_; };
    io_.discount_at = [this](const Block& b) -> const Scalar* { return d_.data() + offset(b); };
    io_.cv_at = [this](const Block& b) -> Scalar* { return cv_.data() + offset(b); };
    options_.strategy = c.strategy;
    options_.progress = false;
    options_.force_staging = true;  // host spaces: copy in and out as a device would
  }

  PipelineCopies(const PipelineCopies&) = delete;  // the BlockIO refers to this object
  PipelineCopies& operator=(const PipelineCopies&) = delete;

  const BlockPlan& plan() const { return plan_; }
  PipelineStats run_once() {
    std::ostream null_out(nullptr);
    return run_pipeline<Scalar, Layout>(plan_, io_, options_, null_out);
  }
  double copies_in() {
    space_.fence();
    Kokkos::Timer timer;
    Kokkos::deep_copy(space_, Kokkos::subview(landing_, std::make_pair(2 * block_elems_, 2 * block_elems_ + NK_)),
                      HostConst(m_.data(), NK_));
    for (std::size_t b = 0; b < plan_.blocks.size(); ++b) {
      const Block& blk = plan_.blocks[b];
      Kokkos::deep_copy(space_, slot(b, length(blk)), HostConst(d_.data() + offset(blk), length(blk)));
    }
    space_.fence();
    return timer.seconds();
  }
  double copies_out() {
    space_.fence();
    Kokkos::Timer timer;
    for (std::size_t b = 0; b < plan_.blocks.size(); ++b) {
      const Block& blk = plan_.blocks[b];
      Kokkos::deep_copy(space_, HostMut(cv_.data() + offset(blk), length(blk)), slot(b, length(blk)));
    }
    space_.fence();
    return timer.seconds();
  }
  // The pipeline's output against m * d everywhere.
  void check() const {
    const HostFlat m = m_, d = d_, cv = cv_;
    const Index NK = NK_;
    Index bad = 0;
    Kokkos::parallel_reduce(
        "cvest::transfers::check", Kokkos::RangePolicy<Host, Kokkos::IndexType<Index>>(0, T_ * NK),
        [=](Index j, Index& sum) { sum += cv(j) != m(j % NK) * d(j) ? 1 : 0; }, bad);
    if (bad != 0)
      throw std::runtime_error(fmt::format("the in-memory pipeline ({}, {}) wrote {} of {} elements wrong",
                                           to_string(c_.strategy), to_string(layout_kind<Layout>()), bad, T_ * NK));
  }

 private:
  // The bench's values, filled (and first touched) on the host, in parallel.
  void fill() {
    const HostFlat m = m_, d = d_, cv = cv_;
    const Index K = K_, NK = NK_;
    Kokkos::parallel_for("cvest::transfers::fill_multBy", Kokkos::RangePolicy<Host, Kokkos::IndexType<Index>>(0, NK),
                         [=](Index j) { m(j) = bench::multby_value<Scalar>(j / K, j % K); });
    Kokkos::parallel_for("cvest::transfers::fill_discount",
                         Kokkos::RangePolicy<Host, Kokkos::IndexType<Index>>(0, T_ * NK), [=](Index j) {
                           d(j) = bench::discount_value<Scalar>(j / NK, j % NK / K, j % K);
                           cv(j) = Scalar(0);
                         });
    Host().fence();
  }
  Index offset(const Block& b) const { return (b.dates.begin * N_ + b.ids.begin) * K_; }
  Index length(const Block& b) const { return b.dates.size() * b.ids.size() * K_; }
  auto slot(std::size_t b, Index len) const {
    const Index at = Index(b % 2) * block_elems_;
    return Kokkos::subview(landing_, std::make_pair(at, at + len));
  }

  const Config& c_;
  const Index T_, N_, K_, NK_;
  HostFlat m_, d_, cv_;
  const BlockPlan plan_;
  const Index block_elems_;
  Kokkos::View<Scalar*, Mem> landing_;
  Space space_;
  BlockIO<Scalar> io_;
  PipelineOptions options_;
};

template <class Scalar, class Layout>
void measure_pipeline(const Config& c, Report& rep, std::ostream& progress) {
  PipelineCopies<Scalar, Layout> pipeline(c);
  rep.blocks = pipeline.plan().blocks.size();
  rep.block_dates = pipeline.plan().block_dates;
  rep.block_ids = pipeline.plan().block_ids;
  // Warm-up, and the pipeline's output checked against m * d everywhere.
  pipeline.run_once();
  pipeline.check();
  pipeline.copies_in();
  pipeline.copies_out();
  // Interleaved rounds, so bandwidth swings hit all three alike.
  std::vector<double> in_s, out_s;
  std::vector<PipelineStats> runs;
  for (int r = 0; r < c.repeats; ++r) {
    in_s.push_back(pipeline.copies_in());
    out_s.push_back(pipeline.copies_out());
    runs.push_back(pipeline.run_once());
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
