// cvest tune's walks (app/TuneWalks.hpp): every count timed at both shapes
// as often as asked, its output right, the trials undone after; the record
// then sets flat/left's streams, as the command line and Python read it.
#include "app/TuneWalks.hpp"
#include "core/FlatRun.hpp"
#include "core/Policies.hpp"
#include "tests/CacheDirHere.hpp"
#include "tests/Skip.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <sstream>

using namespace cvest;

TEST_CASE("cvest tune's walks: each count at both shapes, the record applied", "[app][tune]") {
  if (std::getenv("CVEST_FLAT_DATES")) return test::skip_part("CVEST_FLAT_DATES sets the streams");
  if (!policy::on_host<Kokkos::DefaultExecutionSpace>) return test::skip_part("flat/left walks streams on the host only");
  const test::CacheDirHere cache("tune-walks");
  const int before = policy::flat_streams_most();
  CHECK(before == 4);  // the stated default: nothing measured in this process
  CHECK(policy::flat_streams_source().empty());

  std::ostringstream progress;
  const io::WalkRecord r = app::measure_walks(double(std::size_t(1) << 20), 3, 0.05, progress);
  CHECK(policy::flat_streams_most() == before);  // the trials undone
  CHECK(r.key == io::walk_record_key(policy::host_threads()));
  CHECK(r.streams == std::vector<int>{1, 2, 4});
  REQUIRE(r.shapes.size() == 2);
  CHECK(r.shapes[0] == "100 x 262 x 5 double");
  CHECK(r.shapes[1] == "8 x 3276 x 5 double");
  for (const auto& shape : r.seconds) {
    REQUIRE(shape.size() == 3);
    for (const auto& passes : shape) CHECK(passes.size() == 3);
  }
  CHECK_THAT(progress.str(), Catch::Contains("flat/left at 100 x 262 x 5 double, medians of 3 (min-max): 1 stream ") &&
                                 Catch::Contains(", 4 streams "));

  // A trial wins over everything while it lasts.
  policy::set_flat_streams_trial(2);
  CHECK(policy::flat_streams_most() == 2);
  CHECK(policy::flat_streams_source() == "cvest tune's trial of 2");
  policy::set_flat_streams_trial(0);
  CHECK_THROWS_AS(policy::set_flat_streams_trial(3), std::invalid_argument);

  io::save_walk_record(r);
  app::apply_walk_record(true);
  CHECK(policy::flat_streams_most() == r.best());
  CHECK(policy::flat_streams_source() == "measured here by cvest tune on " + r.date);
  policy::set_flat_streams_measured(1, "x");
  CHECK(policy::flat_streams_text(policy::FlatStreams{}) == "one stream (x)");
  policy::set_flat_streams_measured(2, "y");
  CHECK(policy::flat_streams_most() == 2);
  CHECK(policy::flat_streams_text(policy::FlatStreams{2, 3}) == "2 streams at once, 3 runs apart (y)");
  CHECK_THROWS_AS(policy::set_flat_streams_measured(3, "z"), std::invalid_argument);
  policy::set_flat_streams_measured(0, "");  // back to the stated default for the other tests
  CHECK(policy::flat_streams_most() == before);
}
