#include "app/TuneWalks.hpp"

#include "app/Bench.hpp"
#include "core/FlatRun.hpp"
#include "core/Median.hpp"
#include "core/Policies.hpp"
#include "core/Spaces.hpp"
#include "io/RecordFile.hpp"

#include <Kokkos_Core.hpp>
#include <Kokkos_Timer.hpp>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace cvest::app {

namespace {

// Restores the rule (record, variable or default) however the trials end.
struct TrialGuard {
  ~TrialGuard() { policy::set_flat_streams_trial(0); }
};

double timed(bench::Arrays& a, int streams) {
  policy::set_flat_streams_trial(streams);
  return a.pass(Strategy::flat);
}

}  // namespace

io::WalkRecord measure_walks(double bytes, int repeats, double warm_seconds, std::ostream& progress) {
  if (repeats < 1 || bytes < 1) throw std::invalid_argument("cvest tune: walks need repeats >= 1 and bytes > 0");
  io::WalkRecord record;
  record.key = io::walk_record_key(policy::host_threads());
  record.date = io::today();
  record.streams = {1, 2, 4};
  const TrialGuard guard;
  for (const Index T : {Index(100), Index(8)}) {
    bench::Config config;
    config.dates = T, config.cols = 5;
    config.ids = std::max<Index>(1, Index(bytes / double(T * config.cols * 8)));
    const std::string shape = fmt::format("{} x {} x {} double", T, config.ids, config.cols);
    bench::Arrays a = bench::arrays(config, LayoutKind::left, Precision::f64);
    // Each count's output checked on its own (cv cleared first), and what it
    // walks here: where its spacing does not fit, a count walks fewer.
    std::vector<int> walked;
    for (const int streams : record.streams) {
      a.clear();
      timed(a, streams);
      walked.push_back(a.left_streams());
      if (const Index bad = a.mismatches(); bad != 0)
        throw std::runtime_error(
            fmt::format("cvest tune: flat/left with {} streams wrote {} wrong elements at {}", streams, bad, shape));
    }
    Kokkos::Timer warm;
    for (std::size_t i = 0; warm.seconds() < warm_seconds; ++i) timed(a, record.streams[i % record.streams.size()]);
    std::vector<std::vector<double>> seconds(record.streams.size());
    for (int r = 0; r < repeats; ++r)
      for (std::size_t k = 0; k < record.streams.size(); ++k) {
        const std::size_t i = (k + std::size_t(r)) % record.streams.size();
        seconds[i].push_back(timed(a, record.streams[i]));
      }
    std::string line = fmt::format("cvest tune: flat/left at {}, medians of {} (min-max):", shape, repeats);
    for (std::size_t i = 0; i < seconds.size(); ++i)
      line += fmt::format("{} {} stream{}{} {:.3g} ms ({:.3g}-{:.3g})", i ? "," : "", record.streams[i],
                          record.streams[i] == 1 ? "" : "s",
                          walked[i] == record.streams[i] ? "" : fmt::format(" (walks {} here)", walked[i]),
                          median(seconds[i]) * 1e3, *std::min_element(seconds[i].begin(), seconds[i].end()) * 1e3,
                          *std::max_element(seconds[i].begin(), seconds[i].end()) * 1e3);
    fmt::print(progress, "{}\n", line);
    record.shapes.push_back(shape);
    record.seconds.push_back(std::move(seconds));
  }
  return record;
}

void apply_walk_record(bool say) {
  if (!policy::on_host<Kokkos::DefaultExecutionSpace>) return;  // the streams are the host walk's
  std::string problem;
  try {
    const auto record = io::walk_record_for(policy::host_threads(), problem);
    if (record) policy::set_flat_streams_measured(record->best(), "measured here by cvest tune on " + record->date);
  } catch (const std::exception& e) {  // e.g. no cache folder can be named: the default, not a failed command
    problem = e.what();
  }
  if (!problem.empty() && say)
    fmt::print(stderr, "cvest: warning: {}; flat/left's streams take their stated default\n", problem);
}

}  // namespace cvest::app
