// cvest tune's walks (app/tune/TuneWalks.hpp): every count timed at each shape
// as often as asked, its output right, the trials undone after; the records
// then set flat/left's streams and flat/right's dates at once, as the command
// line and Python read them.
#include "app/tune/TuneWalks.hpp"
#include "core/FlatRun.hpp"
#include "core/StreamingStores.hpp"
#include "core/Policies.hpp"
#include "tests/CacheDirHere.hpp"
#include "tests/Skip.hpp"

#include <catch2/catch.hpp>

#include <tuple>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

using namespace cvest;

namespace {

// A double record tune_walks measured at 1 MiB a shape: its key, counts,
// shapes (at most 262 and 3276 ids: fewer where the rows would not let every
// count walk as said) and passes, and its progress line.
void check_double_record(const app::WalkRecord& r, app::Walk walk, const std::string& progress) {
  CHECK(policy::flat_streams_most() == 4);  // the trials undone
  CHECK(policy::flat_dates_most() == 2);
  CHECK(policy::flat_streaming_stores(8) == bool(CVEST_HAVE_STREAMING_STORES));
  CHECK(r.key == app::walk_record_key(policy::host_threads()));
  CHECK(r.walk == walk);
  CHECK(r.precision == Precision::f64);
  CHECK(r.streams == std::vector<int>{1, 2, 4});
  REQUIRE(r.shapes.size() == 3);
  const Index ids100 = std::stoll(r.shapes[0].substr(6)), ids20 = std::stoll(r.shapes[1].substr(5)),
              ids8 = std::stoll(r.shapes[2].substr(4));
  CHECK(r.shapes[0] == "100 x " + std::to_string(ids100) + " x 5 double");
  CHECK(r.shapes[1] == "20 x " + std::to_string(ids20) + " x 5 double");
  CHECK(r.shapes[2] == "8 x " + std::to_string(ids8) + " x 5 double");
  CHECK((ids100 <= 262 && ids100 > 0));
  CHECK((ids20 <= 1310 && ids20 > 0));
  CHECK((ids8 <= 3276 && ids8 > 0));
  for (const auto& shape : r.seconds) {
    REQUIRE(shape.size() == 3);
    for (const auto& passes : shape) CHECK(passes.size() == 3);
  }
  const std::string at = "at " + r.shapes[0] + ", medians of 3 (min-max): ";
  if (walk == app::Walk::left_streams)
    CHECK_THAT(progress, Catch::Contains("flat/left " + at + "1 stream ") && Catch::Contains(", 4 streams "));
  else
    CHECK_THAT(progress, Catch::Contains("flat/right " + at + "1 date ") && Catch::Contains(", 2 dates ") &&
                             Catch::Contains(", 4 dates"));
}

}  // namespace

TEST_CASE("cvest tune's walks: each count at each shape, the records applied", "[app][tune]") {
  if (std::getenv("CVEST_FLAT_DATES")) return test::skip_part("CVEST_FLAT_DATES sets the streams and dates");
  if (!policy::on_host<Kokkos::DefaultExecutionSpace>) return test::skip_part("flat walks streams on the host only");
  const test::CacheDirHere cache("tune-walks");
  CHECK(policy::flat_streams_most() == 4);  // the stated defaults: nothing measured in this process
  CHECK(policy::flat_dates_most() == 2);
  CHECK(policy::flat_streams_source().empty());
  CHECK(policy::flat_dates_source().empty());

  std::vector<app::WalkRecord> records;
  for (const app::Walk walk : {app::Walk::left_streams, app::Walk::right_dates}) {
    std::ostringstream progress;
    records.push_back(app::measure_walks(walk, Precision::f64, double(std::size_t(1) << 20), 3, 0.05, progress));
    check_double_record(records.back(), walk, progress.str());
  }
  {  // float on its own
    std::ostringstream progress;
    const app::WalkRecord f =
        app::measure_walks(app::Walk::right_dates, Precision::f32, double(std::size_t(1) << 20), 3, 0.05, progress);
    CHECK(f.precision == Precision::f32);
    CHECK_THAT(f.shapes[0], Catch::StartsWith("100 x ") && Catch::EndsWith(" x 5 float"));
  }

  for (const auto& r : records) app::save_walk_record(r);
  app::apply_walk_records(true);
  // Each count at the dates it was measured at (core/FlatRun.hpp flat_many_dates).
  CHECK(policy::flat_streams_most(8, 100) == records[0].best_for(true));
  CHECK(policy::flat_streams_most(8, 8) == records[0].best_for(false));
  CHECK(policy::flat_dates_most(8, 100) == records[1].best_for(true));
  CHECK(policy::flat_dates_most(8, 8) == records[1].best_for(false));
  CHECK(policy::flat_streams_source() == "measured here by cvest tune on " + records[0].date);
  CHECK(policy::flat_dates_source() == "measured here by cvest tune on " + records[1].date);
  policy::set_flat_streams_measured(0, "");  // back to the stated defaults for the other tests
  policy::set_flat_dates_measured(0, "");
}

TEST_CASE("flat's counts: a trial wins, a measured count per side of 28 dates, said as measured", "[app][tune]") {
  if (std::getenv("CVEST_FLAT_DATES")) return test::skip_part("CVEST_FLAT_DATES sets the streams and dates");
  // A trial wins over everything while it lasts.
  policy::set_flat_streams_trial(2);
  policy::set_flat_dates_trial(4);
  CHECK(policy::flat_streams_most() == 2);
  CHECK(policy::flat_dates_most() == 4);
  CHECK(policy::flat_streams_source() == "cvest tune's trial of 2");
  CHECK(policy::flat_dates_source() == "cvest tune's trial of 4");
  policy::set_flat_streams_trial(0);
  policy::set_flat_dates_trial(0);
  CHECK_THROWS_AS(policy::set_flat_streams_trial(3), std::invalid_argument);
  CHECK_THROWS_AS(policy::set_flat_dates_trial(3), std::invalid_argument);

  policy::set_flat_streams_measured(1, "x");
  CHECK(policy::flat_streams_text(policy::FlatStreams{}) == "one stream (x)");
  policy::set_flat_streams_measured(2, "y");
  CHECK(policy::flat_streams_most() == 2);
  CHECK(policy::flat_streams_text(policy::FlatStreams{2, 3}) == "2 streams at once, 3 runs apart (y)");
  policy::set_flat_dates_measured(1, "u");
  CHECK(policy::flat_dates_text(policy::FlatDates{}) == "one at a time (u)");
  policy::set_flat_dates_measured(4, "v");
  CHECK(policy::flat_dates_most() == 4);
  CHECK(policy::flat_dates_text(policy::FlatDates{4, 2}) == "4 at once, 2 apart (v)");
  CHECK_THROWS_AS(policy::set_flat_streams_measured(3, "z"), std::invalid_argument);
  CHECK_THROWS_AS(policy::set_flat_dates_measured(3, "z"), std::invalid_argument);
  // Counts that differ with the dates: each below and from flat_many_dates.
  policy::set_flat_streams_measured({2, 1}, "w");
  CHECK(policy::flat_streams_most(8, 8) == 2);
  CHECK(policy::flat_streams_most(8, policy::flat_many_dates - 1) == 2);
  CHECK(policy::flat_streams_most(8, policy::flat_many_dates) == 1);
  CHECK(policy::flat_streams_most(8, 100) == 1);
  CHECK(policy::flat_streams_most(4, 8) == 4);  // float's own: the stated default
  CHECK(policy::flat_streams_text(policy::FlatStreams{}, 8, 100) == "one stream (w)");
  CHECK_THAT(policy::flat_streams_text(policy::FlatStreams{}, 8, 8), Catch::StartsWith("one stream (runs of T dates"));
  policy::set_flat_dates_measured({4, 2}, "t");
  CHECK(policy::flat_dates_most(8, 20) == 4);
  CHECK(policy::flat_dates_most(8, 40) == 2);
  CHECK_THROWS_AS(policy::set_flat_dates_measured({0, 2}, "z"), std::invalid_argument);
  policy::set_flat_streams_measured(0, "");  // back to the stated defaults for the other tests
  policy::set_flat_dates_measured(0, "");
  CHECK(policy::flat_streams_most() == 4);
  CHECK(policy::flat_dates_most() == 2);
  CHECK(policy::flat_dates_text(policy::FlatDates{2, 1}) == "2 at once, 1 apart");
}

TEST_CASE("the ids at which every count walks as said", "[app][tune]") {
  if (std::getenv("CVEST_FLAT_DATES")) return test::skip_part("CVEST_FLAT_DATES sets the streams and dates");
  if (!CVEST_HAVE_STREAMING_STORES) return test::skip_part("flat walks one stream and date without streaming stores");
  // discount and cv at one place in a page, as large arrays lie
  const void* const at = reinterpret_cast<const void*>(std::uintptr_t(1) << 21);
  for (const std::size_t size : {std::size_t(8), std::size_t(4)})
    for (const Index T : app::walk_dates) {
      const Index most = Index(double(std::size_t(48) << 20) / double(T * 5 * Index(size)));
      const Index N = app::ids_walking_as_said(app::Walk::right_dates, T, most, size, at, at);
      REQUIRE(N > 0);
      CHECK(N <= most);
      for (const int count : {2, 4}) {  // each count as many dates as it says there, adjacent ones
        policy::set_flat_dates_trial(count);
        CHECK(policy::FlatWalk(T, N * 5, size, at, at).together.dates == count);
        CHECK(policy::FlatWalk(T, N * 5, size, at, at).together.step == 1);
      }
      policy::set_flat_dates_trial(0);
      // flat/left's streams do not hang on the ids: every N walks them as
      // said, or none (four streams at 100 dates want runs of 128 KiB, a
      // 1 MiB L2's; a 512 KiB L2 gives 64 KiB, where four walk as two).
      bool every = true;
      {
        const policy::FlatTrialsUndone undo;
        policy::set_flat_stores_trial(policy::StoreKind::streaming);
        for (const int count : {2, 4}) {
          policy::set_flat_streams_trial(count);
          every = every && policy::flat_left_streams(at, at, T, size).streams == count;
        }
      }
      CHECK(app::ids_walking_as_said(app::Walk::left_streams, T, N, size, at, at) == (every ? N : 0));
      CHECK((every || T >= 28));  // runs of 8 dates: four streams 1 KiB apart fit any chunk
    }
  // 100 dates of float in 48 MiB: no four rows 1 KiB apart in a page, so fewer ids.
  const Index most = Index(double(std::size_t(48) << 20) / (100 * 5 * 4));
  CHECK(app::ids_walking_as_said(app::Walk::right_dates, 100, most, 4, at, at) < most);
  // 100 dates of double at 12,576 ids: four rows at once, but 4 dates apart
  // (rows 768 bytes apart in a page); adjacent ones a few ids below.
  policy::set_flat_dates_trial(4);
  CHECK(policy::FlatWalk(100, 12576 * 5, 8, at, at).together.step == 4);
  policy::set_flat_dates_trial(0);
  const Index adjacent = app::ids_walking_as_said(app::Walk::right_dates, 100, 12576, 8, at, at);
  CHECK(adjacent < 12576);
  CHECK(adjacent > 12576 - 512);  // a row's place in a page comes round every 512 ids
  // Where no ids within reach walk adjacent dates (few ids: 64 of double or
  // 128 of float at 8 dates), the most that walk as said: each `most`
  // against a search of its own.
  const auto walks_all = [&](Index T, Index N, std::size_t size, bool adjacent_only) {
    bool all = true;
    for (const int count : {1, 2, 4}) {
      policy::set_flat_dates_trial(count);
      const policy::FlatDates together = policy::FlatWalk(T, N * 5, size, at, at).together;
      all = all && together.dates == count && (!adjacent_only || together.step == 1);
    }
    policy::set_flat_dates_trial(0);
    return all;
  };
  int fell_back = 0;
  for (const auto& [T, size, small] : {std::tuple{Index(8), std::size_t(8), Index(64)},
                                       std::tuple{Index(8), std::size_t(4), Index(128)},
                                       std::tuple{Index(8), std::size_t(8), Index(300)},
                                       std::tuple{Index(100), std::size_t(8), Index(700)}}) {
    Index expected = 0;
    for (const bool adjacent_only : {true, false}) {
      for (Index N = small; N > 0 && expected == 0; --N)
        if (walks_all(T, N, size, adjacent_only)) expected = N;
      if (expected > 0) {
        fell_back += !adjacent_only;
        break;
      }
    }
    CHECK(expected > 0);
    CHECK(app::ids_walking_as_said(app::Walk::right_dates, T, small, size, at, at) == expected);
  }
  CHECK(fell_back == 2);  // the second search ran where no adjacent dates were within reach
  // Nothing left set: the stated defaults.
  CHECK(policy::flat_dates_most() == 2);
  CHECK(policy::flat_streams_most() == 4);
  CHECK(policy::flat_streaming_stores(8) == bool(CVEST_HAVE_STREAMING_STORES));
}
