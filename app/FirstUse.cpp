#include "app/FirstUse.hpp"

#include "app/Bench.hpp"
#include "app/TuneWalks.hpp"
#include "core/Errors.hpp"
#include "core/FlatRun.hpp"
#include "core/Median.hpp"
#include "core/Policies.hpp"
#include "io/RecordFile.hpp"
#include "io/WalkRecords.hpp"

#include <Kokkos_Core.hpp>
#include <Kokkos_Timer.hpp>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cstdlib>
#include <exception>
#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

namespace cvest::app {

namespace {

using policy::StoreKind;

// One pass's settings: flat/left's streams or flat/right's dates at once
// (as tune's trials) and the store kind.
struct Setting {
  LayoutKind layout;
  int count;
  StoreKind stores;
};
// Per shape: flat/left streaming with 1, 2, 4 streams, then regular (one
// stream: the regular path walks one); flat/right streaming with 1, 2, 4
// dates, then regular with 1, 2, 4.
const std::vector<Setting>& settings() {
  static const std::vector<Setting> all{
      {LayoutKind::left, 1, StoreKind::streaming},   {LayoutKind::left, 2, StoreKind::streaming},
      {LayoutKind::left, 4, StoreKind::streaming},   {LayoutKind::left, 1, StoreKind::regular},
      {LayoutKind::right, 1, StoreKind::streaming},  {LayoutKind::right, 2, StoreKind::streaming},
      {LayoutKind::right, 4, StoreKind::streaming},  {LayoutKind::right, 1, StoreKind::regular},
      {LayoutKind::right, 2, StoreKind::regular},    {LayoutKind::right, 4, StoreKind::regular}};
  return all;
}
constexpr std::size_t left_regular = 3, right_streaming = 4, right_regular = 7;
constexpr int rounds = 7;  // after one pass of each setting (the warm-up)

// The trials undone however the measurement ends.
struct Trials {
  ~Trials() { set({LayoutKind::left, 0, StoreKind::unset}); }
  static void set(const Setting& s) {
    policy::set_flat_streams_trial(s.layout == LayoutKind::left ? s.count : 0);
    policy::set_flat_dates_trial(s.layout == LayoutKind::right ? s.count : 0);
    policy::set_flat_stores_trial(s.stores);
  }
};

// seconds[setting][round] at one shape: a pass of every setting first,
// each checked where `check` (cv cleared first, so each setting's own
// output is judged: at the first shape, T = 8, whose short runs take the
// most paths), then `rounds` rounds of all of them, the order rotated each
// round.
std::vector<std::vector<double>> timed_shape(Index T, Precision precision, const std::string& shape, bool check) {
  bench::Config config;
  config.dates = T, config.cols = 5;
  config.ids = std::max<Index>(1, Index(first_use_bytes / double(T * config.cols * Index(element_size(precision)))));
  bench::Arrays left = bench::arrays(config, LayoutKind::left, precision);
  bench::Arrays right = bench::arrays(config, LayoutKind::right, precision);
  const auto pass = [&](const Setting& s) {
    Trials::set(s);
    return (s.layout == LayoutKind::left ? left : right).pass(Strategy::flat);
  };
  for (const Setting& s : settings()) {
    bench::Arrays& a = s.layout == LayoutKind::left ? left : right;
    if (!check) {  // a warm-up pass
      pass(s);
      continue;
    }
    a.clear();
    pass(s);
    if (const Index bad = a.mismatches(); bad != 0)
      throw std::runtime_error(fmt::format("flat/{} with {} at {} wrote {} wrong elements", to_string(s.layout),
                                           s.count, shape, bad));
  }
  const std::size_t n = settings().size();
  std::vector<std::vector<double>> seconds(n);
  for (int r = 0; r < rounds; ++r)
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (k + std::size_t(r)) % n;
      seconds[i].push_back(pass(settings()[i]));
    }
  return seconds;
}

io::WalkRecord record_of(io::Walk walk, Precision precision, std::vector<int> counts) {
  io::WalkRecord r;
  r.key = io::walk_record_key(policy::host_threads());
  r.walk = walk, r.date = io::today(), r.precision = precision, r.by = "first use", r.streams = std::move(counts);
  return r;
}

// Settings [from, from + 3) of each shape as a record of counts 1, 2, 4.
io::WalkRecord widths(io::Walk walk, Precision precision, const std::vector<std::string>& shapes,
                      const std::vector<std::vector<std::vector<double>>>& at, std::size_t from) {
  io::WalkRecord r = record_of(walk, precision, {1, 2, 4});
  r.shapes = shapes;
  for (const auto& shape : at) r.seconds.push_back({shape[from], shape[from + 1], shape[from + 2]});
  return r;
}

// The three records: flat/left's streams (streaming passes), the store kind
// (each kind at its best width, both layouts' passes summed round by
// round), and flat/right's dates at once under the kind chosen.
std::vector<io::WalkRecord> records_of(Precision precision, const std::vector<std::string>& shapes,
                                       const std::vector<std::vector<std::vector<double>>>& at) {
  const io::WalkRecord left = widths(io::Walk::left_streams, precision, shapes, at, 0);
  const io::WalkRecord right_s = widths(io::Walk::right_dates, precision, shapes, at, right_streaming);
  const io::WalkRecord right_r = widths(io::Walk::right_dates, precision, shapes, at, right_regular);
  const auto index = [](int count) { return std::size_t(count == 4 ? 2 : count - 1); };
  io::WalkRecord stores = record_of(io::Walk::stores, precision, {0, 1});
  stores.shapes = shapes;
  for (const auto& shape : at) {
    std::vector<double> regular, streaming;
    for (int r = 0; r < rounds; ++r) {
      regular.push_back(shape[left_regular][r] + shape[right_regular + index(right_r.best())][r]);
      streaming.push_back(shape[index(left.best())][r] + shape[right_streaming + index(right_s.best())][r]);
    }
    stores.seconds.push_back({regular, streaming});
  }
  return {left, stores, stores.best() ? right_s : right_r};
}

std::string said(const std::vector<io::WalkRecord>& records) {
  std::string text;
  for (const auto& r : records)
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ", io::flat_name(r.walk),
                        r.walk == io::Walk::stores ? io::counted(r.walk, r.best())
                                                   : io::counted(r.walk, r.best()) +
                                                         (r.walk == io::Walk::right_dates ? " at once" : ""));
  return text;
}

bool missing_here(Precision precision) {
  std::string problem;
  int found = 0;
  for (const auto& r : io::walk_records_here(policy::host_threads(), problem)) found += r.precision == precision;
  return found < 3;
}

std::string measure(Precision precision, std::ostream& progress) {
  Kokkos::Timer timer;
  const Trials undo;
  std::vector<std::string> shapes;
  std::vector<std::vector<std::vector<double>>> at;
  for (const Index T : {Index(8), Index(100)}) {
    shapes.push_back(fmt::format("{} x {} x 5 {}", T,
                                 Index(first_use_bytes / double(T * 5 * Index(element_size(precision)))),
                                 to_string(precision)));
    at.push_back(timed_shape(T, precision, shapes.back(), T == 8));
  }
  const std::vector<io::WalkRecord> records = records_of(precision, shapes, at);
  std::string problem;
  const auto here = io::walk_records_here(policy::host_threads(), problem);
  for (const auto& r : records) {
    const bool kept = std::any_of(here.begin(), here.end(), [&](const io::WalkRecord& h) {
      return h.walk == r.walk && h.precision == precision;
    });
    if (kept) continue;  // cvest tune's, or another process's just now: its own measurement stands
    io::save_walk_record(r);
    apply_walk_record(r);
  }
  const std::string text = fmt::format("flat measured on first use in {:.2f} s ({}: {}), recorded in {}",
                                       timer.seconds(), to_string(precision), said(records), io::walk_records_path());
  fmt::print(progress, "cvest: {}\n", text);
  return text;
}

}  // namespace

bool first_use_allowed() {
  const char* v = std::getenv("CVEST_FIRST_USE");
  if (!v || !*v) return true;
  const std::string value = v;
  if (value == "on" || value == "1") return true;
  if (value == "off" || value == "0") return false;
  throw InputError("CVEST_FIRST_USE: expected on or off (flat's choices measured on first use), found '" + value + "'");
}

std::string measure_on_first_use(Precision precision, std::ostream& progress) {
  if (!first_use_allowed() || !policy::on_host<Kokkos::DefaultExecutionSpace>) return "";
  // Once a process, precision and record file (a process that names another
  // cache folder, as the tests do, looks there too).
  static std::mutex lock;
  static std::set<std::string> done;
  const std::lock_guard<std::mutex> hold(lock);
  if (!done.insert(io::walk_records_path() + "|" + std::string(to_string(precision))).second) return "";
  try {
    if (!missing_here(precision)) return "";
    return measure(precision, progress);
  } catch (const std::exception& e) {
    const std::string text = fmt::format("flat not measured on first use ({}: {}); its stated defaults kept",
                                         to_string(precision), e.what());
    fmt::print(progress, "cvest: {}\n", text);
    return text;
  }
}

}  // namespace cvest::app
