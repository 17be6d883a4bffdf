#include "app/FirstUse.hpp"

#include "app/tune/TuneWalks.hpp"
#include "core/Errors.hpp"
#include "core/FlatRun.hpp"
#include "core/Median.hpp"
#include "core/Multiply.hpp"
#include "core/Policies.hpp"
#include "core/Spaces.hpp"
#include "core/StreamingStores.hpp"
#include "core/Topology.hpp"
#include "core/Types.hpp"
#include "app/tune/RecordFile.hpp"
#include "app/tune/WalkRecords.hpp"

#include <Kokkos_Core.hpp>
#include <Kokkos_Timer.hpp>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>
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

// The trials undone however the measurement ends.
struct Trials : policy::FlatTrialsUndone {
  static void set(const Setting& s) {
    policy::set_flat_streams_trial(s.layout == LayoutKind::left ? s.count : 0);
    policy::set_flat_dates_trial(s.layout == LayoutKind::right ? s.count : 0);
    policy::set_flat_stores_trial(s.stores);
  }
};

using Host = Kokkos::DefaultHostExecutionSpace;
using Mem = Host::memory_space;
constexpr Index K = 5;

// multBy's first ids * K values and discount's and cv's `elements`, first
// touched in flat's chunks, as the kernels take them (a free function: nvcc
// takes no lambda inside a constructor).
template <class Scalar>
void fill(const Kokkos::View<Scalar*, Mem>& m, const Kokkos::View<Scalar*, Mem>& d, const Kokkos::View<Scalar*, Mem>& cv,
          Index elements, Index ids) {
  const Index per = policy::flat_run_elements(sizeof(Scalar));
  Kokkos::parallel_for("cvest::first_use::fill", Kokkos::RangePolicy<Host>(0, (elements + per - 1) / per), [=](Index c) {
    for (Index j = c * per; j < std::min(elements, (c + 1) * per); ++j) {
      d(j) = Scalar(1) / Scalar(1 + j % 97);
      cv(j) = Scalar(0);
      if (j < ids * K) m(j) = Scalar(1) + Scalar(j % 61) / Scalar(64);
    }
  });
}

// multBy, discount and cv of `elements`, seen at either shape and in either
// layout: one allocation for all (arrays allocated and filled per shape, as
// the bench does, took over half a second of the measurement; each timed
// pass follows an untimed one of its own setting on them, so the layout
// that ran before it leaves nothing of its own in the cache).
template <class Scalar>
struct Buffers {
  Kokkos::View<Scalar*, Mem> m, d, cv;
  Buffers(Index elements, Index ids)
      : m(Kokkos::view_alloc("cvest::first_use::multBy", Kokkos::WithoutInitializing), ids * K),
        d(Kokkos::view_alloc("cvest::first_use::discount", Kokkos::WithoutInitializing), elements),
        cv(Kokkos::view_alloc("cvest::first_use::cv", Kokkos::WithoutInitializing), elements) {
    advise_huge_pages(d.data(), std::size_t(elements) * sizeof(Scalar));
    advise_huge_pages(cv.data(), std::size_t(elements) * sizeof(Scalar));
    fill(m, d, cv, elements, ids);
    Host().fence();
  }
  // One fenced pass of flat with setting `s` at shape (T, N, K).
  double pass(const Setting& s, Index T, Index N) const {
    Trials::set(s);
    const auto run = [&](auto tag) {
      using Layout = decltype(tag);
      const Operands<Scalar, Layout, Mem> ops{Table<const Scalar, Layout, Mem>(m.data(), N, K),
                                              Cube<const Scalar, Layout, Mem>(d.data(), T, N, K),
                                              Cube<Scalar, Layout, Mem>(cv.data(), T, N, K)};
      const Host space;
      space.fence();
      Kokkos::Timer timer;
      multiply(Strategy::flat, space, ops);
      space.fence();
      return timer.seconds();
    };
    return s.layout == LayoutKind::right ? run(Kokkos::LayoutRight{}) : run(Kokkos::LayoutLeft{});
  }
  // What setting `s` walks at shape (T, N, K) on these arrays (a count whose
  // spacing does not fit walks fewer).
  int walked(const Setting& s, Index T, Index N) const {
    Trials::set(s);
    return policy::flat_walked(s.layout == LayoutKind::right, T, N * K, sizeof(Scalar), d.data(), cv.data());
  }
};

// Every setting's output checked on small arrays at each of walk_dates (cv
// cleared first: each setting's own output judged): a wrong walk is never
// recorded.
template <class Scalar>
void check_settings() {
  for (const Index T : walk_dates) {
    const Index N = 40000 / T;
    const Buffers<Scalar> b(T * N * K, N);
    for (const Setting& s : settings()) {
      Kokkos::deep_copy(b.cv, Scalar(-1));
      b.pass(s, T, N);
      const auto m = b.m, d = b.d, cv = b.cv;
      Index bad = 0;
      for (Index t = 0; t < T; ++t)
        for (Index i = 0; i < N * K; ++i) {  // element (t, i) of either layout's storage
          const Index e = s.layout == LayoutKind::right ? t * N * K + i : i * T + t;
          bad += cv(e) != m(i) * d(e);
        }
      if (bad != 0)
        throw std::runtime_error(fmt::format("flat/{} with {} at {} x {} x {} wrote {} wrong elements",
                                             to_string(s.layout), s.count, T, N, K, bad));
    }
  }
}

// The most ids, `most` at most, at which flat/right walks every count as
// said (app/tune/TuneWalks.hpp ids_walking_as_said); `most` where none does
// within 4096 ids (a count then walks as a fewer one, is recorded so and
// stands aside: WalkRecord::best; a row's place in a page comes round
// every 1024 ids at most, so first use's shapes always find one).
// flat/left's streams do not hang on the ids.
template <class Scalar>
Index walking_ids(Index T, Index most, const Kokkos::View<Scalar*, Mem>& d, const Kokkos::View<Scalar*, Mem>& cv) {
  const Index N = ids_walking_as_said(Walk::right_dates, T, most, sizeof(Scalar), d.data(), cv.data());
  return N > 0 ? N : most;
}

// seconds[shape][setting][round] at each of walk_dates (shapes[s] names
// each, walked[s][setting] says what each walked there): first_use_rounds
// rounds of all settings, the order rotated each round, each timed pass
// right after an untimed one of its own setting, as a run walks one
// setting over and over. Timed after another setting's pass
// (and the fewest within 2% taken), 42 first uses on the EPYC VM took one
// stream at 100 dates in 34 and four dates in 33; timed after their own
// (the least taken), 71 took one stream in 67 and four dates in 64, as the
// bench finds at 400,000 ids (one stream at 1.00-1.04 of the roof, two at
// 0.84-0.94; four dates at 0.85-0.99, two at 0.78-0.95, one at 0.72-0.89).
template <class Scalar>
std::vector<std::vector<std::vector<double>>> timed(std::vector<std::string>& shapes,
                                                    std::vector<std::vector<int>>& walked) {
  check_settings<Scalar>();
  const std::size_t bytes = first_use_bytes_here();
  const Index ids100 = Index(double(bytes) / double(100 * K * Index(sizeof(Scalar)))) / 2 * 2;
  const Index elements = 100 * ids100 * K;  // 8 x (12.5 ids100) x K alike
  const Buffers<Scalar> b(elements, elements / (8 * K));
  const int rounds = first_use_rounds(bytes);
  std::vector<std::vector<std::vector<double>>> at;
  for (const Index T : walk_dates) {
    const Index N = walking_ids<Scalar>(T, elements / (T * K), b.d, b.cv);
    shapes.push_back(fmt::format("{} x {} x {} {}", T, N, K, sizeof(Scalar) == 8 ? "double" : "float"));
    const std::size_t n = settings().size();
    walked.emplace_back();
    for (const Setting& s : settings()) walked.back().push_back(b.walked(s, T, N));
    std::vector<std::vector<double>> seconds(n);
    for (int r = 0; r < rounds; ++r)
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (k + std::size_t(r)) % n;
        b.pass(settings()[i], T, N);
        seconds[i].push_back(b.pass(settings()[i], T, N));
      }
    at.push_back(std::move(seconds));
  }
  return at;
}

WalkRecord record_of(Walk walk, Precision precision, std::vector<int> counts) {
  WalkRecord r;
  r.key = walk_record_key(policy::host_threads());
  r.walk = walk, r.date = today(), r.precision = precision, r.by = by_first_use, r.streams = std::move(counts);
  return r;
}

// What first use timed: each shape's name, its settings' passes and what each walked.
struct Timed {
  std::vector<std::string> shapes;
  std::vector<std::vector<std::vector<double>>> at;  // [shape][setting][round]
  std::vector<std::vector<int>> walked;              // [shape][setting]
};

// Settings [from, from + 3) of each shape as a record of counts 1, 2, 4.
WalkRecord widths(Walk walk, Precision precision, const Timed& t, std::size_t from) {
  WalkRecord r = record_of(walk, precision, {1, 2, 4});
  r.shapes = t.shapes;
  for (const auto& shape : t.at) r.seconds.push_back({shape[from], shape[from + 1], shape[from + 2]});
  for (const auto& shape : t.walked) r.walked.push_back({shape[from], shape[from + 1], shape[from + 2]});
  return r;
}

// The three records: flat/left's streams (streaming passes), the store kind
// (each kind at its best width, both layouts' passes summed round by
// round), and flat/right's dates at once under the kind chosen.
std::vector<WalkRecord> records_of(Precision precision, const Timed& t) {
  const WalkRecord left = widths(Walk::left_streams, precision, t, 0);
  const WalkRecord right_s = widths(Walk::right_dates, precision, t, right_streaming);
  const WalkRecord right_r = widths(Walk::right_dates, precision, t, right_regular);
  const auto index = [](int count) { return std::size_t(count == 4 ? 2 : count - 1); };
  WalkRecord stores = record_of(Walk::stores, precision, {0, 1});
  stores.shapes = t.shapes;
  for (const auto& shape : t.at) {
    std::vector<double> regular, streaming;
    for (std::size_t r = 0; r < shape[left_regular].size(); ++r) {
      regular.push_back(shape[left_regular][r] + shape[right_regular + index(right_r.best())][r]);
      streaming.push_back(shape[index(left.best())][r] + shape[right_streaming + index(right_s.best())][r]);
    }
    stores.seconds.push_back({regular, streaming});
  }
  // Without streaming stores in the build every setting writes regular
  // stores and flat/left walks one stream: only flat/right's dates differ.
  if (!CVEST_HAVE_STREAMING_STORES) return {right_r};
  return {left, stores, stores.best() ? right_s : right_r};
}

// "left 2 streams, right 4 dates at once, streaming stores" (a count that
// differs with the dates: "left 2 streams below 28 dates, 1 stream from
// 28"); without
// streaming stores in the build, "right 2 dates at once, regular stores (no
// streaming stores in this build)".
std::string said(const std::vector<WalkRecord>& records) {
  std::string left, right, stores = "regular stores (no streaming stores in this build)";
  for (const auto& r : records) {
    const int few = r.best_for(false), many = r.best_for(true);
    if (r.walk == Walk::left_streams)
      left = "left " + r.counts(true);
    else if (r.walk == Walk::right_dates)  // "right 4 dates at once", "... at once below 28 dates, 2 from 28"
      right = "right " + counted(r.walk, few) + " at once" + policy::flat_counts_below(few, many, std::to_string(many));
    else
      stores = r.counts(true);
  }
  return (left.empty() ? "" : left + ", ") + right + ", " + stores;
}

// The widest spread of the chosen count's passes (each shape's side's) at any shape of any record:
// the interquartile range over the median.
double spread(const std::vector<WalkRecord>& records) {
  double widest = 0;
  for (const auto& r : records)
    for (std::size_t s = 0; s < r.seconds.size(); ++s) {
      const std::size_t i =
          std::size_t(std::find(r.streams.begin(), r.streams.end(), r.chosen_at(s)) - r.streams.begin());
      std::vector<double> v = r.seconds[s][i];
      std::sort(v.begin(), v.end());
      widest = std::max(widest, (v[v.size() * 3 / 4] - v[v.size() / 4]) / median(v));
    }
  return widest;
}

// Passes this far apart (in the middle half, over the median) say the
// machine was busy: measured again, and what the calmer batch chose holds
// for this process, recorded only where it is not busy.
constexpr double busy_spread = 0.25;

// A record that stands: cvest tune's, a store kind's, or first use's that
// says what each count walked and was measured at each of walk_dates. One
// from before 12-06 may name four streams where two walked; one from
// before 12-07 chose below 28 dates at 8 alone (four streams in 21 of 95
// first uses): measured again, and replaced.
bool standing(const WalkRecord& r) {
  if (r.by != by_first_use || r.walk == Walk::stores) return true;
  return !r.walked.empty() && std::all_of(std::begin(walk_dates), std::end(walk_dates), [&](Index T) {
    return std::any_of(r.shapes.begin(), r.shapes.end(), [&](const std::string& s) { return shape_dates(s) == T; });
  });
}

// Whether a choice this build measures lacks its standing record in `precision` here.
bool missing_here(Precision precision) {
  std::string problem;
  int found = 0;
  for (const auto& r : walk_records_here(policy::host_threads(), problem))
    found += r.precision == precision && standing(r) && (CVEST_HAVE_STREAMING_STORES || r.walk == Walk::right_dates);
  return found < (CVEST_HAVE_STREAMING_STORES ? 3 : 1);
}

// One batch of timed passes: the records they make and their widest spread.
struct Batch {
  std::vector<WalkRecord> records;
  double widest = 0;
};

Batch measured(Precision precision) {
  Timed t;
  t.at = precision == Precision::f64 ? timed<double>(t.shapes, t.walked) : timed<float>(t.shapes, t.walked);
  Batch b;
  b.records = records_of(precision, t);
  b.widest = spread(b.records);
  return b;
}

std::string measure(Precision precision, std::ostream& progress) {
  Kokkos::Timer timer;
  const Trials undo;
  // A busy batch is measured once more and the calmer one taken: of 40
  // first uses on a Zen 4 VM (the lag round by round), a busy batch took
  // one date at once at 100 dates in 3 of 14, a calm one in none of 26, and
  // it held for the process (the bench at 100 x 400,000: one date 0.84 of
  // the roof, four 0.91-0.97).
  Batch b = measured(precision);
  std::string again;
  if (b.widest > busy_spread) {
    again = fmt::format("; measured twice, the first batch's passes spread {:.0f}%", b.widest * 100);
    Batch second = measured(precision);
    if (second.widest < b.widest) b = std::move(second);
  }
  std::string problem;
  const auto here = walk_records_here(policy::host_threads(), problem);
  for (const auto& r : b.records) {
    const bool kept = std::any_of(here.begin(), here.end(), [&](const WalkRecord& h) {
      return h.walk == r.walk && h.precision == precision && standing(h);
    });
    if (kept) continue;  // cvest tune's, or another process's just now: its own measurement stands
    if (b.widest <= busy_spread) save_walk_record(r);
    apply_walk_record(r);
  }
  const std::string text = fmt::format(
      "flat measured in {:.2f} s ({}: {}{}), {}", timer.seconds(), to_string(precision), said(b.records), again,
      b.widest <= busy_spread ? "recorded in " + walk_records_path()
                              : fmt::format("not recorded: its passes spread {:.0f}% (the machine busy), measured "
                                            "again next time", b.widest * 100));
  fmt::print(progress, "cvest: {}\n", text);
  return text;
}

}  // namespace

std::size_t first_use_bytes(std::size_t l3_bytes) {
  const std::size_t least = std::size_t(48) << 20, most = std::size_t(512) << 20;
  return std::min(most, std::max(least, l3_bytes / 2 * 3 / 4096 * 4096));
}

int first_use_rounds(std::size_t bytes) {
  const double rounds = 6.0 * double(std::size_t(48) << 20) / double(std::max<std::size_t>(bytes, 1));
  return rounds >= 6 ? 6 : std::max(4, int(rounds + 0.5));
}

std::size_t first_use_bytes_here() {
  // sysconf's L3 inside a VM can be the host's whole one (core/Topology.hpp):
  // sysfs's only.
  const policy::Topology& t = policy::machine_topology();
  return first_use_bytes(t.source == "sysfs" ? t.l3.bytes * std::size_t(t.l3.instances) : 0);
}

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
  if (!done.insert(walk_records_path() + "|" + std::string(to_string(precision))).second) return "";
  try {
    if (missing_here(precision)) return measure(precision, progress);
    // Records saved since this process started (by another rank of its node,
    // app/run/RunDeck.cpp, or a process beside it) are taken as they are.
    std::string problem;
    for (const auto& r : walk_records_here(policy::host_threads(), problem))
      if (r.precision == precision) apply_walk_record(r);
    return "";
  } catch (const std::exception& e) {
    const std::string text = fmt::format("flat not measured on first use ({}: {}); its stated defaults kept",
                                         to_string(precision), e.what());
    fmt::print(progress, "cvest: {}\n", text);
    return text;
  }
}

}  // namespace cvest::app
