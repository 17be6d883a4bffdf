// cvest tune's walks (app/tune/TuneWalks.hpp): every count timed at both shapes
// as often as asked, its output right, the trials undone after; the records
// then set flat/left's streams and flat/right's dates at once, as the command
// line and Python read them.
#include "app/tune/TuneWalks.hpp"
#include "core/FlatRun.hpp"
#include "core/Policies.hpp"
#include "tests/CacheDirHere.hpp"
#include "tests/Skip.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <sstream>
#include <vector>

using namespace cvest;

TEST_CASE("cvest tune's walks: each count at both shapes, the records applied", "[app][tune]") {
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
    const app::WalkRecord r = app::measure_walks(walk, double(std::size_t(1) << 20), 3, 0.05, progress);
    CHECK(policy::flat_streams_most() == 4);  // the trials undone
    CHECK(policy::flat_dates_most() == 2);
    CHECK(r.key == app::walk_record_key(policy::host_threads()));
    CHECK(r.walk == walk);
    CHECK(r.streams == std::vector<int>{1, 2, 4});
    REQUIRE(r.shapes.size() == 2);
    CHECK(r.shapes[0] == "100 x 262 x 5 double");
    CHECK(r.shapes[1] == "8 x 3276 x 5 double");
    for (const auto& shape : r.seconds) {
      REQUIRE(shape.size() == 3);
      for (const auto& passes : shape) CHECK(passes.size() == 3);
    }
    if (walk == app::Walk::left_streams)
      CHECK_THAT(progress.str(), Catch::Contains("flat/left at 100 x 262 x 5 double, medians of 3 (min-max): 1 stream ") &&
                                     Catch::Contains(", 4 streams "));
    else
      CHECK_THAT(progress.str(), Catch::Contains("flat/right at 100 x 262 x 5 double, medians of 3 (min-max): 1 date ") &&
                                     Catch::Contains(", 2 dates ") && Catch::Contains(", 4 dates"));
    records.push_back(r);
  }

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

  for (const auto& r : records) app::save_walk_record(r);
  app::apply_walk_records(true);
  // Each count at the dates it was measured at (core/FlatRun.hpp flat_many_dates).
  CHECK(policy::flat_streams_most(8, 100) == records[0].best_for(true));
  CHECK(policy::flat_streams_most(8, 8) == records[0].best_for(false));
  CHECK(policy::flat_dates_most(8, 100) == records[1].best_for(true));
  CHECK(policy::flat_dates_most(8, 8) == records[1].best_for(false));
  CHECK(policy::flat_streams_source() == "measured here by cvest tune on " + records[0].date);
  CHECK(policy::flat_dates_source() == "measured here by cvest tune on " + records[1].date);
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
