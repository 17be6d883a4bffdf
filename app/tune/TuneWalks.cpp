#include "app/tune/TuneWalks.hpp"

#include "app/bench/Variants.hpp"
#include "core/FlatRun.hpp"
#include "core/Median.hpp"
#include "core/Policies.hpp"
#include "core/Spaces.hpp"
#include "app/tune/RecordFile.hpp"

#include <Kokkos_Core.hpp>
#include <Kokkos_Timer.hpp>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace cvest::app {

namespace {

double timed(bench::Arrays& a, Walk walk, int count) {
  // The path whose streams and dates are counted (a record of regular
  // stores would make every flat/left count walk one stream).
  policy::set_flat_stores_trial(policy::StoreKind::streaming);
  if (walk == Walk::right_dates)
    policy::set_flat_dates_trial(count);
  else
    policy::set_flat_streams_trial(count);
  return a.pass(Strategy::flat);
}

// Each count's output checked on its own (cv cleared first), and what it
// walks here: where its spacing does not fit, a count walks fewer.
std::vector<int> checked_counts(bench::Arrays& a, Walk walk, const std::vector<int>& counts,
                                const std::string& shape) {
  std::vector<int> walked;
  for (const int count : counts) {
    a.clear();
    timed(a, walk, count);
    walked.push_back(a.walked());
    if (const Index bad = a.mismatches(); bad != 0)
      throw std::runtime_error(fmt::format("cvest tune: {} with at most {} wrote {} wrong elements at {}",
                                           flat_name(walk), counted(walk, count), bad, shape));
  }
  return walked;
}

}  // namespace

Index ids_walking_as_said(Walk walk, Index T, Index most, std::size_t element_size, const void* d, const void* cv) {
  constexpr Index K = 5;
  const policy::FlatTrialsUndone undo;
  policy::set_flat_stores_trial(policy::StoreKind::streaming);  // the path whose streams and dates are counted
  // `adjacent`: flat/right's dates at once must be adjacent dates too.
  const auto walks = [&](int count, Index N, bool adjacent) {
    if (walk == Walk::left_streams) {
      policy::set_flat_streams_trial(count);
      return count == 1 || !CVEST_HAVE_STREAMING_STORES ||  // without them flat/left walks one stream
             policy::flat_left_streams(d, cv, T, element_size).streams == count;
    }
    policy::set_flat_dates_trial(count);
    const policy::FlatDates together = policy::FlatWalk(T, N * K, element_size, d, cv).together;
    return together.dates == count && (!adjacent || together.step == 1);
  };
  const auto most_walking = [&](bool adjacent) {
    for (Index N = most; N > 0 && N > most - 4096; --N)  // a row's place in a page moves by K elements an id
      if (walks(1, N, adjacent) && walks(2, N, adjacent) && walks(4, N, adjacent)) return N;
    return Index(0);
  };
  // flat/right's dates at once adjacent ones first, as the walk takes them
  // where rows lie far enough apart in a page (at 400,000 and 10,000,000
  // ids of double, 1 KiB past a page multiple): rows 4 dates apart, as at
  // first use's 100 x 12,576 ids of double, walk memory another way.
  if (walk == Walk::right_dates)
    if (const Index N = most_walking(true); N > 0) return N;
  return most_walking(false);
}

WalkRecord measure_walks(Walk walk, Precision precision, double bytes, int repeats, double warm_seconds,
                         std::ostream& progress) {
  if (repeats < 1 || bytes < 1) throw std::invalid_argument("cvest tune: walks need repeats >= 1 and bytes > 0");
  WalkRecord record;
  record.key = walk_record_key(policy::host_threads());
  record.walk = walk;
  record.date = today();
  record.streams = {1, 2, 4};
  record.precision = precision;
  const policy::FlatTrialsUndone undo;
  const LayoutKind layout = walk == Walk::right_dates ? LayoutKind::right : LayoutKind::left;
  const std::size_t size = element_size(precision);
  for (const Index T : walk_dates) {
    bench::Config config;
    config.dates = T, config.cols = 5;
    config.ids = std::max<Index>(1, Index(bytes / double(T * config.cols * Index(size))));
    bench::Arrays a = bench::arrays(config, layout, precision);
    // Where a count would walk fewer on these arrays (or flat/right's dates
    // at once not adjacent), the most ids below at which each walks as
    // said, allocated anew (twice at most: new arrays may lie elsewhere in a
    // page; the record and the progress line say what each walked).
    for (int tries = 0; tries < 2; ++tries) {
      const Index walking = ids_walking_as_said(walk, T, config.ids, size, a.d, a.cv);
      if (walking == 0 || walking == config.ids) break;
      config.ids = walking;
      a = {};  // the old arrays gone first
      a = bench::arrays(config, layout, precision);
    }
    const std::string shape = fmt::format("{} x {} x {} {}", T, config.ids, config.cols, to_string(precision));
    const std::vector<int> walked = checked_counts(a, walk, record.streams, shape);
    Kokkos::Timer warm;
    for (std::size_t i = 0; warm.seconds() < warm_seconds; ++i) timed(a, walk, record.streams[i % record.streams.size()]);
    // Each timed pass right after an untimed one of its own count, as a run
    // walks one count over and over (first use's way, app/FirstUse.cpp): a
    // pass timed after another count's meets that one's leavings.
    std::vector<std::vector<double>> seconds(record.streams.size());
    for (int r = 0; r < repeats; ++r)
      for (std::size_t k = 0; k < record.streams.size(); ++k) {
        const std::size_t i = (k + std::size_t(r)) % record.streams.size();
        timed(a, walk, record.streams[i]);
        seconds[i].push_back(timed(a, walk, record.streams[i]));
      }
    std::string line =
        fmt::format("cvest tune: {} at {}, medians of {} (min-max):", flat_name(walk), shape, repeats);
    for (std::size_t i = 0; i < seconds.size(); ++i)
      line += fmt::format("{} {}{} {:.3g} ms ({:.3g}-{:.3g})", i ? "," : "", counted(walk, record.streams[i]),
                          walked[i] == record.streams[i] ? "" : fmt::format(" (walks {} here)", walked[i]),
                          median(seconds[i]) * 1e3, *std::min_element(seconds[i].begin(), seconds[i].end()) * 1e3,
                          *std::max_element(seconds[i].begin(), seconds[i].end()) * 1e3);
    fmt::print(progress, "{}\n", line);
    record.shapes.push_back(shape);
    record.seconds.push_back(std::move(seconds));
    record.walked.push_back(walked);  // a count that walked fewer stands aside (WalkRecord::best)
  }
  return record;
}

void apply_walk_record(const WalkRecord& record) {
  const std::string source = record.source();
  const std::size_t size = element_size(record.precision);
  const policy::FlatCounts counts{record.best_for(false), record.best_for(true)};
  if (record.walk == Walk::right_dates)
    policy::set_flat_dates_measured(counts, source, size);
  else if (record.walk == Walk::stores)
    policy::set_flat_stores_measured(record.best() ? policy::StoreKind::streaming : policy::StoreKind::regular,
                                     source, size);
  else
    policy::set_flat_streams_measured(counts, source, size);
}

void apply_walk_records(bool say) {
  if (!policy::on_host<Kokkos::DefaultExecutionSpace>) return;  // the counts are the host walk's
  std::string problem;
  try {
    for (const auto& record : walk_records_here(policy::host_threads(), problem)) apply_walk_record(record);
  } catch (const std::exception& e) {  // e.g. no cache folder can be named: the default, not a failed command
    problem = e.what();
  }
  if (!problem.empty() && say)
    fmt::print(stderr, "cvest: warning: {}; flat's streams and dates at once take their stated defaults\n", problem);
}

}  // namespace cvest::app
