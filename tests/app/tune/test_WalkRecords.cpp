// flat/left's streams and flat/right's dates at once measured per machine
// (app/tune/WalkRecords.hpp): records written and read back, another machine's,
// thread count's or walk's not taken, the best count the one whose slowest
// shape lags least, a damaged file or a link refused in one line.
#include "app/tune/WalkRecords.hpp"
#include "app/tune/WriteModes.hpp"
#include "core/StreamingStores.hpp"
#include "tests/CacheDirHere.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace cvest::app;
namespace streaming = cvest::streaming;
namespace fs = std::filesystem;

namespace {

// Two shapes, counts 1, 2, 4: each count's passes at each shape.
WalkRecord record(const std::string& key, std::vector<std::vector<double>> at_100, std::vector<std::vector<double>> at_8,
                  Walk walk = Walk::left_streams) {
  return {key, walk, "2026-12-05", {"100 x 2000 x 5 double", "8 x 25000 x 5 double"}, {1, 2, 4}, {at_100, at_8}};
}
}  // namespace

TEST_CASE("the best streams lag least at their slowest shape, the fewer where alike", "[io][tune]") {
  // 1 fastest at long runs, 4 at short ones by less: 1 (4 lags 1.5x at 100).
  CHECK(record("k", {{1.0, 1.1, 0.9}, {1.2}, {1.5}}, {{1.1}, {1.05}, {1.0}}).best() == 1);
  // 4 fastest at both: 4.
  CHECK(record("k", {{2.0}, {1.5}, {1.0}}, {{1.3}, {1.2}, {1.0}}).best() == 4);
  // 2 never fastest but never far behind: 2 (1 lags 1.3x at 8, 4 lags 1.3x at 100).
  CHECK(record("k", {{1.0}, {1.05}, {1.3}}, {{1.3}, {1.05}, {1.0}}).best() == 2);
  // 4 ahead by less than 2% at its slowest shape: alike, the fewer.
  CHECK(record("k", {{1.01}, {1.2}, {1.0}}, {{1.0}, {1.0}, {1.0}}).best() == 1);
  // All alike: the fewest.
  CHECK(record("k", {{1.0}, {1.0}, {1.0}}, {{2.0}, {2.0}, {2.0}}).best() == 1);
  // First use's records of flat/right's dates (every count walked as
  // said): the least, however close; the fewest where tied.
  WalkRecord first = record("k", {{1.01}, {1.2}, {1.0}}, {{1.0}, {1.0}, {1.0}}, Walk::right_dates);
  first.by = "first use";
  CHECK(first.best() == 4);
  first.seconds = {{{1.0}, {1.0}, {1.0}}, {{2.0}, {2.0}, {2.0}}};
  CHECK(first.best() == 1);
  // Passes a round each: each round's ratios, not each count's median. The
  // machine slowed 2x after round 2, and 1 ran round 3 before it did: by
  // its median 1 (1.1 against 2.0), round by round 4 (1 lags 1.1x in 4 of 5).
  first.seconds = {{{1.1, 1.1, 1.1, 2.2, 2.2}, {1.2, 1.2, 2.4, 2.4, 2.4}, {1.0, 1.0, 2.0, 2.0, 2.0}},
                   {{1.0, 1.0, 1.0, 1.0, 1.0}, {1.0, 1.0, 1.0, 1.0, 1.0}, {1.0, 1.0, 1.0, 1.0, 1.0}}};
  CHECK(first.best() == 4);
  first.seconds[0][2].pop_back();  // 4 a pass short: unpaired, the medians (4's 1.5)
  CHECK(first.best() == 1);
  // Round by round, 2 and 4 tie (each fastest in two rounds of four, 1.1x
  // behind in the others): the fewer.
  first.seconds = {{{1.3, 1.3, 1.3, 1.3}, {1.0, 1.1, 1.0, 1.1}, {1.1, 1.0, 1.1, 1.0}},
                   {{1.0, 1.0, 1.0, 1.0}, {1.0, 1.0, 1.0, 1.0}, {1.0, 1.0, 1.0, 1.0}}};
  CHECK(first.best() == 2);
  first.seconds = {{{1.0}, {1.0}, {1.0}}, {{2.0}, {2.0}, {2.0}}};
  // Its store kinds keep the 2%: streaming ahead by 1%, regular.
  WalkRecord kinds = first;
  kinds.walk = Walk::stores, kinds.streams = {0, 1}, kinds.seconds = {{{1.01}, {1.0}}};
  kinds.shapes = {"8 x 25000 x 5 double"};
  CHECK(kinds.best() == 0);
  kinds.seconds = {{{1.05}, {1.0}}};
  CHECK(kinds.best() == 1);
  // flat/left's streams keep the 2% too, first use's and those that say
  // what each count walked included: four ahead by 1%, one; by 5%, four.
  WalkRecord left = record("k", {{1.01}, {1.2}, {1.0}}, {{1.0}, {1.0}, {1.0}});
  left.by = "first use", left.walked = {{1, 2, 4}, {1, 2, 4}};
  CHECK(left.best() == 1);
  left.seconds = {{{1.05}, {1.2}, {1.0}}, {{1.0}, {1.0}, {1.0}}};
  CHECK(left.best() == 4);
  // A record of flat/right's dates that says what each count walked (cvest
  // tune's from 12-06, and first use's): the least of the counts that
  // walked as said, however close; a count that walked as a fewer one
  // stands aside, however fast.
  WalkRecord tuned = record("k", {{1.01}, {1.2}, {1.0}}, {{1.0}, {1.0}, {1.0}}, Walk::right_dates);
  tuned.walked = {{1, 2, 4}, {1, 2, 4}};
  CHECK(tuned.best() == 4);
  tuned.walked = {{1, 2, 2}, {1, 2, 4}};  // 4 walked as 2 at 100 dates
  CHECK(tuned.best() == 1);
  CHECK(tuned.best_for(true) == 1);
  CHECK(tuned.best_for(false) == 1);  // at 8 dates all tie: the fewest
  tuned.seconds = {{{1.2}, {1.1}, {1.0}}, {{1.2}, {1.1}, {1.0}}};
  CHECK(tuned.best_for(true) == 2);   // 4 aside at 100 dates
  CHECK(tuned.best_for(false) == 4);  // it walked as said at 8
  CHECK_THAT(tuned.text(), Catch::Contains("100 x 2000 x 5 double: 1 1.2e+03 ms, 2 1.1e+03 ms, 4 (walked 2) 1e+03 ms; "
                                           "8 x 25000 x 5 double: 1 1.2e+03 ms, 2 1.1e+03 ms, 4 1e+03 ms"));
  // Each side of core's flat_many_dates on its own: at 100 dates one stream
  // leads, at 8 two by more than 2%: 1 from 28 dates, 2 below.
  const WalkRecord split = record("k", {{1.0}, {1.15}, {1.3}}, {{1.1}, {1.0}, {1.01}});
  CHECK(split.best() == 1);  // over both shapes: 1 lags least (1.1 against 1.15)
  CHECK(split.best_for(true) == 1);
  CHECK(split.best_for(false) == 2);
  CHECK(split.counts() == "2 below 28 dates, 1 from 28");
  CHECK(split.counts(true) == "2 streams below 28 dates, 1 stream from 28");
  CHECK_THAT(split.text(), Catch::StartsWith("measured by cvest tune on 2026-12-05: at most 2 below 28 dates, 1 from 28 ("));
  // Three shapes, as measured since 12-07 (app/tune/TuneWalks.hpp
  // walk_dates): below 28 dates the count whose worse lag of 8 and 20 dates
  // is least. Four leads at 8 by 1% and lags 15% at 20, one lags 3% at 8:
  // one below 28, where 8 alone took four.
  WalkRecord three = record("k", {{1.0}, {1.1}, {1.2}}, {{1.03}, {1.02}, {1.0}}, Walk::right_dates);
  three.by = "first use";
  three.shapes = {"100 x 2000 x 5 double", "20 x 10000 x 5 double", "8 x 25000 x 5 double"};
  three.seconds = {{{1.0}, {1.1}, {1.2}}, {{1.0}, {1.05}, {1.15}}, {{1.03}, {1.02}, {1.0}}};
  CHECK(three.best_for(false) == 1);
  CHECK(three.best_for(true) == 1);
  three.shapes.erase(three.shapes.begin() + 1), three.seconds.erase(three.seconds.begin() + 1);
  CHECK(three.best_for(false) == 4);
  CHECK(three.counts() == "4 below 28 dates, 1 from 28");
  // Both sides choose 2 while best() over both names 1 (1 lags 1.03 at
  // both, 2 at most 1.02: within 2% of each other): the text says 2, the
  // count put in force.
  const WalkRecord agree = record("k", {{1.03}, {1.02}, {1.0}}, {{1.03}, {1.0}, {1.05}});
  CHECK(agree.best() == 1);
  CHECK(agree.best_for(true) == 2);
  CHECK(agree.best_for(false) == 2);
  CHECK(agree.counts() == "2");
  // A record of one shape: that shape's best at any dates.
  WalkRecord one = split;
  one.shapes = {"8 x 25000 x 5 double"}, one.seconds = {split.seconds[1]};
  CHECK(one.best_for(true) == 2);
  CHECK(one.best_for(false) == 2);
  CHECK(one.counts() == "2");
  const std::string text = record("k", {{0.0213}, {0.024}, {0.0319}}, {{0.022}, {0.0249}, {0.024}}).text();
  CHECK(text == "measured by cvest tune on 2026-12-05: at most 1 (medians of 1 passes, chosen round by round; streams, time: "
                "100 x 2000 x 5 double: 1 21.3 ms, 2 24 ms, 4 31.9 ms; 8 x 25000 x 5 double: 1 22 ms, 2 24.9 ms, "
                "4 24 ms)");
  CHECK_THAT(record("k", {{0.0213}, {0.024}, {0.0319}}, {{0.022}, {0.0249}, {0.024}}, Walk::right_dates).text(),
             Catch::EndsWith("at most 1 (medians of 1 passes, chosen round by round; dates at once, time: 100 x 2000 x "
                             "5 double: 1 21.3 ms, 2 24 ms, 4 31.9 ms; 8 x 25000 x 5 double: 1 22 ms, 2 24.9 ms, 4 24 ms)"));
  CHECK(to_string(Walk::left_streams) == "flat/left streams");
  CHECK(to_string(Walk::right_dates) == "flat/right dates at once");
  CHECK(std::string(flat_name(Walk::left_streams)) == "flat/left");
  CHECK(std::string(flat_name(Walk::right_dates)) == "flat/right");
  CHECK(counted(Walk::left_streams, 1) == "1 stream");
  CHECK(counted(Walk::right_dates, 4) == "4 dates");
}

TEST_CASE("walk records are kept per CPU, thread count and walk, a damaged file or a link refused", "[io][tune]") {
  const cvest::test::CacheDirHere cache("walk-records");
  CHECK(walk_records_path() == (cache.dir / "flat-walks.json").string());
  std::string problem;
  CHECK(read_walk_records(problem).empty());
  CHECK(problem.empty());  // nothing measured yet: nothing to say
  const std::string key = walk_record_key(2);
  CHECK_THAT(key, Catch::StartsWith("cpu ") && Catch::Contains("; 2 threads"));
  CHECK_THAT(walk_record_key(1), Catch::Contains("; 1 thread") && !Catch::Contains("threads"));
  if (streaming::vector_bytes() > 0) {  // a width of its own measures afresh
    const bool before = streaming::use_wide_vectors(false);
    CHECK_THAT(walk_record_key(2), Catch::EndsWith("; 2 threads; 16-byte vectors"));
    streaming::use_wide_vectors(true);
    if (streaming::wide_vectors()) CHECK_THAT(walk_record_key(2), Catch::EndsWith("; 2 threads; 32-byte vectors"));
    streaming::use_wide_vectors(before);
  }

  constexpr Walk left = Walk::left_streams, right = Walk::right_dates;
  save_walk_record(record("cpu elsewhere; 2 threads", {{1}, {2}, {3}}, {{1}, {2}, {3}}));
  CHECK_FALSE(walk_record_for(left, 2, problem));  // another CPU's
  save_walk_record(record(key, {{3}, {2}, {1}}, {{3}, {2}, {1}}));
  CHECK_FALSE(walk_record_for(left, 3, problem));  // another thread count's
  CHECK_FALSE(walk_record_for(right, 2, problem));  // another walk's
  auto found = walk_record_for(left, 2, problem);
  REQUIRE(found);
  CHECK(problem.empty());
  CHECK(found->best() == 4);
  CHECK(found->seconds[1][2] == std::vector<double>{1});
  // The other walk of the same machine: kept beside it.
  save_walk_record(record(key, {{1}, {1.5}, {3}}, {{1}, {1.5}, {3}}, right));
  CHECK(read_walk_records(problem).size() == 3);
  REQUIRE(walk_record_for(right, 2, problem));
  CHECK(walk_record_for(right, 2, problem)->best() == 1);
  CHECK(walk_record_for(right, 2, problem)->walk == right);
  CHECK(walk_records_here(2, problem).size() == 2);  // this machine's two walks, not the other CPU's
  CHECK(walk_records_here(3, problem).empty());
  // Measured again: replaced, not added, the other walk's kept.
  save_walk_record(record(key, {{1}, {2}, {3}}, {{1}, {2}, {3}}));
  CHECK(read_walk_records(problem).size() == 3);
  found = walk_record_for(left, 2, problem);
  REQUIRE(found);
  CHECK(found->best() == 1);
  CHECK(walk_record_for(right, 2, problem));
  // What each count walked: written and read back.
  WalkRecord walked = record(key, {{1}, {2}, {3}}, {{3}, {2}, {1}});
  walked.walked = {{1, 2, 4}, {1, 2, 2}};
  save_walk_record(walked);
  found = walk_record_for(left, 2, problem);
  REQUIRE(found);
  CHECK(found->walked == walked.walked);
  CHECK(found->best_for(false) == 2);  // 4 walked as 2 at 8 dates
  CHECK(found->best_for(true) == 1);
  // A record of the first version (no walk named) is flat/left's.
  std::ofstream(walk_records_path()) << R"({"records": [{"key": ")" << key
                                      << R"(", "date": "d", "shapes": ["a"], "streams": [1, 2], "seconds": [[[2], [1]]]}]})";
  found = walk_record_for(left, 2, problem);
  REQUIRE(found);
  CHECK(problem.empty());
  CHECK(found->best() == 2);
  CHECK_FALSE(walk_record_for(right, 2, problem));

  const auto damaged = [&](const std::string& json) {
    std::ofstream(walk_records_path()) << json;
    CHECK(read_walk_records(problem).empty());
    CHECK_THAT(problem, Catch::Contains("flat-walks.json: damaged, not used") && Catch::Contains("cvest tune"));
    CHECK(problem.find('\n') == std::string::npos);
  };
  damaged(R"({"records": [{"key": "x", "date": 3})");
  damaged(R"({"records": [{"key": "x", "date": "d", "shapes": ["a"], "streams": [1, 3], "seconds": [[[1], [1]]]}]})");
  damaged(R"({"records": [{"key": "x", "date": "d", "shapes": ["a"], "streams": [1, 2], "seconds": [[[1], []]]}]})");
  damaged(R"({"records": [{"key": "x", "date": "d", "shapes": ["a", "b"], "streams": [1], "seconds": [[[1]]]}]})");
  damaged(R"({"records": [{"key": "x", "walk": "up", "date": "d", "shapes": ["a"], "streams": [1], "seconds": [[[1]]]}]})");
  damaged(R"({"records": [{"key": "x", "date": "d", "shapes": ["a"], "streams": [1, 2], "seconds": [[[1], [1]]], "walked": [[1]]}]})");
  damaged(R"({"records": [{"key": "x", "date": "d", "shapes": ["a"], "streams": [1], "seconds": [[[1]]], "walked": [[1], [1]]}]})");
  CHECK_FALSE(walk_record_for(left, 2, problem));

  // A link where the file goes (another user's plant) is not followed.
  const fs::path elsewhere = cache.dir / "elsewhere.json";
  fs::rename(walk_records_path(), elsewhere);
  fs::create_symlink(elsewhere, walk_records_path());
  CHECK(read_walk_records(problem).empty());
  CHECK_THAT(problem, Catch::Contains("not read (it is a symbolic link)"));
}

TEST_CASE("walk records are kept per precision, the store kind's beside them, first use's said as such", "[io][tune]") {
  const cvest::test::CacheDirHere cache("walk-records-precision");
  const std::string key = walk_record_key(2);
  std::string problem;
  WalkRecord f = record(key, {{3}, {2}, {1}}, {{3}, {2}, {1}});
  f.precision = cvest::Precision::f32, f.by = "first use";
  save_walk_record(record(key, {{1}, {2}, {3}}, {{1}, {2}, {3}}));  // double's, by cvest tune
  save_walk_record(f);
  CHECK(read_walk_records(problem).size() == 2);  // float's beside double's, not in its place
  REQUIRE(walk_record_for(Walk::left_streams, 2, problem, cvest::Precision::f32));
  CHECK(walk_record_for(Walk::left_streams, 2, problem, cvest::Precision::f32)->best() == 4);
  CHECK(walk_record_for(Walk::left_streams, 2, problem)->best() == 1);
  const WalkRecord back = *walk_record_for(Walk::left_streams, 2, problem, cvest::Precision::f32);
  CHECK(back.by == "first use");
  CHECK(back.source() == "measured here on first use on 2026-12-05");
  CHECK_THAT(back.text(), Catch::StartsWith("measured on first use on 2026-12-05: at most 4"));
  CHECK(walk_record_for(Walk::left_streams, 2, problem)->source() == "measured here by cvest tune on 2026-12-05");

  // The store kind: counts 0 (regular) and 1 (streaming), the fewer where alike.
  WalkRecord stores{key, Walk::stores, "2026-12-05", {"8 x 1 x 5 float"}, {0, 1}, {{{1.0}, {0.8}}},
                    cvest::Precision::f32, "first use"};
  CHECK(stores.best() == 1);
  CHECK(WalkRecord{key, Walk::stores, "d", {"a"}, {0, 1}, {{{1.0}, {0.99}}}}.best() == 0);
  CHECK(counted(Walk::stores, 0) == "regular stores");
  CHECK(counted(Walk::stores, 1) == "streaming stores");
  CHECK(to_string(Walk::stores) == "flat stores");
  save_walk_record(stores);
  REQUIRE(walk_record_for(Walk::stores, 2, problem, cvest::Precision::f32));
  CHECK_THAT(walk_record_for(Walk::stores, 2, problem, cvest::Precision::f32)->text(),
             Catch::StartsWith("measured on first use on 2026-12-05: streaming stores (medians of 1 passes, chosen "
                               "round by round; stores (0 regular, 1 streaming), time: 8 x 1 x 5 float: 0 1e+03 ms, 1 800 ms)"));
  CHECK(walk_records_here(2, problem).size() == 3);
  stores.streams = {1, 2};  // a width's counts are not a store kind's
  CHECK_THROWS_AS(save_walk_record(stores), std::invalid_argument);

  const auto damaged = [&](const std::string& json) {
    std::ofstream(walk_records_path()) << json;
    CHECK(read_walk_records(problem).empty());
    CHECK_THAT(problem, Catch::Contains("damaged, not used"));
  };
  damaged(R"({"records": [{"key": "x", "walk": "stores", "date": "d", "shapes": ["a"], "streams": [1, 2], "seconds": [[[1], [1]]]}]})");
  damaged(R"({"records": [{"key": "x", "precision": "half", "date": "d", "shapes": ["a"], "streams": [1], "seconds": [[[1]]]}]})");
  damaged(R"({"records": [{"key": "x", "by": "a guess", "date": "d", "shapes": ["a"], "streams": [1], "seconds": [[[1]]]}]})");
}

TEST_CASE("two processes saving walk records at once both keep theirs", "[io][tune]") {
  const cvest::test::CacheDirHere cache("walk-records-concurrent");
  // Each process saves records of its own keys, one after another, while
  // the other does: every one of them is in the file at the end (without
  // the lock, each read the file, added its record and renamed its copy
  // over it, dropping the other's).
  constexpr int each = 40;
  const auto save_keys = [](const std::string& who) {
    for (int i = 0; i < each; ++i)
      save_walk_record(record(who + std::to_string(i), {{1}, {2}, {3}}, {{1}, {2}, {3}}));
  };
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 0;
    try {
      save_keys("child ");
    } catch (...) {
      status = 1;
    }
    ::_exit(status);
  }
  save_keys("parent ");
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  std::string problem;
  const auto all = read_walk_records(problem);
  CHECK(problem.empty());
  CHECK(all.size() == std::size_t(2 * each));
}
