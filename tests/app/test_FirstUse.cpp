// flat's choices measured on first use (app/FirstUse.hpp): where this
// machine has no record, the first call measures and records the three
// choices of its precision, puts them in force and says so in one line;
// once a process and record file; records already there kept; the switch
// off measures nothing; a bad value of the switch is an error.
#include "app/FirstUse.hpp"
#include "app/tune/TuneWalks.hpp"
#include "core/Errors.hpp"
#include "core/FlatRun.hpp"
#include "core/Policies.hpp"
#include "core/StreamingStores.hpp"
#include "app/tune/WalkRecords.hpp"
#include "tests/CacheDirHere.hpp"
#include "tests/Skip.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using namespace cvest;

namespace {

// CVEST_FIRST_USE set for a case (the tests run with it off), restored after.
struct FirstUseSwitch {
  std::string before;
  bool had = false;
  explicit FirstUseSwitch(const char* value) {
    if (const char* b = std::getenv("CVEST_FIRST_USE")) before = b, had = true;
    ::setenv("CVEST_FIRST_USE", value, 1);
  }
  ~FirstUseSwitch() {
    if (had) ::setenv("CVEST_FIRST_USE", before.c_str(), 1);
    else ::unsetenv("CVEST_FIRST_USE");
  }
};

// The choices in force back to the stated defaults for the other cases.
struct DefaultsAfter {
  ~DefaultsAfter() {
    for (const std::size_t size : {std::size_t(8), std::size_t(4)}) {
      policy::set_flat_streams_measured(0, "", size);
      policy::set_flat_dates_measured(0, "", size);
      policy::set_flat_stores_measured(policy::StoreKind::unset, "", size);
    }
  }
};

// First use in double on the records saved here: it measured, and the
// records it left (none where the machine was busy: nothing recorded).
std::vector<app::WalkRecord> measured_again() {
  std::ostringstream progress;
  const std::string said = app::measure_on_first_use(Precision::f64, progress);
  CHECK_THAT(said, Catch::StartsWith("flat measured in "));
  if (said.find("recorded in") == std::string::npos) return {};
  std::string problem;
  return app::walk_records_here(policy::host_threads(), problem);
}

}  // namespace

TEST_CASE("first use measures flat's three choices in float on their own, records and applies them, once",
          "[app][first_use]") {
  if (!policy::on_host<Kokkos::DefaultExecutionSpace>) return test::skip_part("flat's choices are the host walk's");
  if (std::getenv("CVEST_FLAT_DATES") || std::getenv("CVEST_FLAT_STORES"))
    return test::skip_part("CVEST_FLAT_DATES or CVEST_FLAT_STORES sets the choices");
  const test::CacheDirHere cache("first-use");
  const FirstUseSwitch on("on");
  const DefaultsAfter defaults;
  CHECK(app::first_use_allowed());
  std::ostringstream progress;
  const std::string said = app::measure_on_first_use(Precision::f32, progress);
  CHECK_THAT(said, Catch::StartsWith("flat measured in ") &&
                       Catch::Contains(CVEST_HAVE_STREAMING_STORES ? "(float: left " : "(float: right "));
  CHECK(progress.str() == "cvest: " + said + "\n");
  std::string problem;
  const auto records = app::walk_records_here(policy::host_threads(), problem);
  CHECK(problem.empty());
  // In force for float either way, said as measured on first use.
  if (CVEST_HAVE_STREAMING_STORES)
    CHECK_THAT(policy::flat_streams_source(4), Catch::StartsWith("measured here on first use on "));
  CHECK_THAT(policy::flat_dates_source(4), Catch::StartsWith("measured here on first use on "));
  if (said.find(", not recorded: its passes spread ") != std::string::npos) {
    // Passes far apart (other tests running beside this one): the machine
    // was busy, and nothing is kept for the next process.
    CHECK(records.empty());
  } else {
    CHECK_THAT(said, Catch::EndsWith("recorded in " + app::walk_records_path()));
    // float's three choices (flat/right's dates alone without streaming
    // stores in the build), nothing of double's.
    REQUIRE(records.size() == (CVEST_HAVE_STREAMING_STORES ? 3u : 1u));
    const std::size_t rounds = std::size_t(app::first_use_rounds(app::first_use_bytes_here()));
    for (const auto& r : records) {
      CHECK(r.precision == Precision::f32);
      CHECK(r.by == "first use");
      CHECK(r.shapes.size() == std::size(app::walk_dates));
      for (const auto& shape : r.seconds)
        for (const auto& passes : shape) CHECK(passes.size() == rounds);
      if (r.walk == app::Walk::stores) continue;
      // What each count walked at each shape, one at least, as many as said at most.
      REQUIRE(r.walked.size() == std::size(app::walk_dates));
      for (const auto& shape : r.walked) {
        REQUIRE(shape.size() == r.streams.size());
        for (std::size_t i = 0; i < shape.size(); ++i) CHECK((shape[i] >= 1 && shape[i] <= r.streams[i]));
        CHECK(shape[0] == 1);
      }
    }
    const auto right = app::walk_record_for(app::Walk::right_dates, policy::host_threads(), problem, Precision::f32);
    REQUIRE(right);
    CHECK(policy::flat_dates_most(4, 100) == right->best_for(true));  // each count at its dates
    CHECK(policy::flat_dates_most(4, 8) == right->best_for(false));
    if (CVEST_HAVE_STREAMING_STORES) {
      const auto left = app::walk_record_for(app::Walk::left_streams, policy::host_threads(), problem, Precision::f32);
      const auto stores = app::walk_record_for(app::Walk::stores, policy::host_threads(), problem, Precision::f32);
      REQUIRE(left);
      REQUIRE(stores);
      CHECK(policy::flat_streams_most(4, 100) == left->best_for(true));
      CHECK(policy::flat_streams_most(4, 8) == left->best_for(false));
      CHECK(policy::flat_streaming_stores(4) == (stores->best() == 1));
    }
  }
  CHECK(policy::flat_streams_source(8).empty());
  CHECK(policy::flat_streaming_stores(8) == bool(CVEST_HAVE_STREAMING_STORES));
  // Once a process and record file: nothing more measured, nothing said.
  std::ostringstream again;
  CHECK(app::measure_on_first_use(Precision::f32, again).empty());
  CHECK(again.str().empty());
}

TEST_CASE("first use keeps the records there, and measures nothing when switched off", "[app][first_use]") {
  if (!policy::on_host<Kokkos::DefaultExecutionSpace>) return test::skip_part("flat's choices are the host walk's");
  const DefaultsAfter defaults;
  std::ostringstream progress;
  {
    const test::CacheDirHere cache("first-use-off");
    const FirstUseSwitch off("off");
    CHECK_FALSE(app::first_use_allowed());
    CHECK(app::measure_on_first_use(Precision::f64, progress).empty());
    CHECK_FALSE(std::filesystem::exists(app::walk_records_path()));
  }
  {
    const test::CacheDirHere cache("first-use-bad");
    const FirstUseSwitch bad("sometimes");
    CHECK_THROWS_AS(app::first_use_allowed(), InputError);
    CHECK_THROWS_WITH(app::measure_on_first_use(Precision::f64, progress),
                      Catch::Contains("CVEST_FIRST_USE: expected on or off") && Catch::Contains("'sometimes'"));
  }
  {
    // All three of double's choices recorded (by cvest tune, say): kept, nothing measured.
    const test::CacheDirHere cache("first-use-kept");
    const FirstUseSwitch on("1");
    const std::string key = app::walk_record_key(policy::host_threads());
    const std::vector<std::string> shapes{"8 x 1 x 5 double"};
    app::save_walk_record({key, app::Walk::left_streams, "2026-12-01", shapes, {1, 2, 4}, {{{1}, {2}, {3}}}});
    app::save_walk_record({key, app::Walk::right_dates, "2026-12-01", shapes, {1, 2, 4}, {{{3}, {2}, {1}}}});
    app::save_walk_record({key, app::Walk::stores, "2026-12-01", shapes, {0, 1}, {{{1}, {2}}}});
    CHECK(app::measure_on_first_use(Precision::f64, progress).empty());
    std::string problem;
    const auto records = app::walk_records_here(policy::host_threads(), problem);
    REQUIRE(records.size() == 3);
    for (const auto& r : records) CHECK(r.date == "2026-12-01");
  }
  CHECK(progress.str().empty());
  {
    // First use's records from before they said what each count walked (one
    // could name four streams where two walked): measured again, replaced.
    const test::CacheDirHere cache("first-use-stale");
    const FirstUseSwitch on("on");
    const std::string key = app::walk_record_key(policy::host_threads());
    const std::vector<std::string> shapes{"8 x 1 x 5 double"};
    for (const auto walk : {app::Walk::left_streams, app::Walk::right_dates}) {
      app::WalkRecord r{key, walk, "2026-12-01", shapes, {1, 2, 4}, {{{1}, {2}, {3}}}};
      r.by = app::by_first_use;
      app::save_walk_record(r);
    }
    app::WalkRecord stores{key, app::Walk::stores, "2026-12-01", shapes, {0, 1}, {{{1}, {2}}}};
    stores.by = app::by_first_use;
    app::save_walk_record(stores);
    for (const auto& r : measured_again())
      if (r.walk != app::Walk::stores)
        CHECK((r.date != "2026-12-01" && r.walked.size() == std::size(app::walk_dates)));
  }
  {
    // First use's records from before 12-07 said what each count walked but
    // chose below 28 dates at 8 alone: measured again, replaced; a record
    // measured at each of walk_dates stands.
    const test::CacheDirHere cache("first-use-two-shapes");
    const FirstUseSwitch on("on");
    const std::string key = app::walk_record_key(policy::host_threads());
    std::vector<std::string> all;
    for (const Index T : app::walk_dates) all.push_back(std::to_string(T) + " x 1 x 5 double");
    app::WalkRecord left{key, app::Walk::left_streams, "2026-12-01", all, {1, 2, 4},
                         {{{1}, {2}, {3}}, {{1}, {2}, {3}}, {{1}, {2}, {3}}}};
    left.walked = {{1, 2, 4}, {1, 2, 4}, {1, 2, 4}};
    app::WalkRecord right{key, app::Walk::right_dates, "2026-12-01", {"100 x 1 x 5 double", "8 x 1 x 5 double"},
                          {1, 2, 4}, {{{1}, {2}, {3}}, {{1}, {2}, {3}}}};
    right.walked = {{1, 2, 4}, {1, 2, 4}};
    app::WalkRecord stores{key, app::Walk::stores, "2026-12-01", {"8 x 1 x 5 double"}, {0, 1}, {{{1}, {2}}}};
    for (app::WalkRecord* r : {&left, &right, &stores}) {
      r->by = app::by_first_use;
      app::save_walk_record(*r);
    }
    for (const auto& r : measured_again()) CHECK((r.walk == app::Walk::right_dates) == (r.date != "2026-12-01"));
  }
}

TEST_CASE("first use's arrays lie beyond the L3 this process uses, its rounds fewer as they grow", "[app][first_use]") {
  constexpr std::size_t MiB = std::size_t(1) << 20;
  // An L3 of 32 MiB (the AMD VM) or none known: 48 MiB, 6 rounds.
  CHECK(app::first_use_bytes(32 * MiB) == 48 * MiB);
  CHECK(app::first_use_bytes(0) == 48 * MiB);
  CHECK(app::first_use_rounds(48 * MiB) == 6);
  // An L3 of 300 MiB (the Intel VM): discount 1.5 times it, 4 rounds (the
  // fewest the busy check's quartiles take).
  CHECK(app::first_use_bytes(300 * MiB) == 450 * MiB);
  CHECK(app::first_use_rounds(450 * MiB) == 4);
  CHECK(app::first_use_rounds(64 * MiB) == 5);  // 4.5, rounded
  CHECK(app::first_use_rounds(0) == 6);
  CHECK(app::first_use_bytes_here() >= 48 * MiB);
  // Past 512 MiB of discount the measurement would take many seconds: capped.
  CHECK(app::first_use_bytes(std::size_t(2) << 30) == 512 * MiB);
  // Whole pages whatever the L3 says.
  CHECK(app::first_use_bytes(100 * MiB + 1000) % 4096 == 0);
}
