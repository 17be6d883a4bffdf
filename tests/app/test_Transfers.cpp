// The transfer benchmark on whatever space this build computes in: the
// in-memory pipeline's output is checked inside run() (it throws on any
// wrong element); here, that the report is complete and consistent.
#include "app/Transfers.hpp"

#include <catch2/catch.hpp>

#include <sstream>

using namespace cvest;
using namespace cvest::app;

TEST_CASE("transfers: copies and the in-memory pipeline, both layouts and precisions", "[transfers]") {
  for (auto precision : {Precision::f64, Precision::f32})
    for (auto layout : {LayoutKind::right, LayoutKind::left}) {
      transfers::Config config;
      config.dates = 9;
      config.ids = 3001;
      config.cols = 5;
      config.precision = precision;
      config.layout = layout;
      config.block_bytes = 32 << 10;  // id blocks within a date, for both precisions
      config.copy_bytes = 1 << 20;
      config.repeats = 3;
      CAPTURE(to_string(precision), to_string(layout));
      std::ostringstream progress;
      const auto r = transfers::run(config, progress);
      CHECK(r.blocks > 9);
      CHECK(r.block_dates == 1);
      CHECK(r.cube_bytes == 9.0 * 3001 * 5 * double(element_size(precision)));
      CHECK(r.copies.pageable_h2d > 0);
      CHECK(r.copies.pinned_d2h > 0);
      CHECK(r.h2d_s > 0);
      CHECK(r.d2h_s > 0);
      CHECK(r.pipeline_s > 0);
      // The pipeline time reported is the run whose phases are shown, and
      // every span of that run lies inside it.
      CHECK(r.pipeline_s == r.pipeline.total_s);
      // Every block went through h2d, the kernel and d2h once in the median run.
      std::size_t spans[phase_count] = {};
      for (const auto& span : r.pipeline.timeline) {
        ++spans[int(span.phase)];
        CHECK(span.begin_s >= 0);
        CHECK(span.end_s >= span.begin_s);
        CHECK(span.end_s <= r.pipeline_s * 1.01 + 1e-4);
      }
      CHECK(spans[int(Phase::h2d)] == r.blocks);
      CHECK(spans[int(Phase::kernel)] == r.blocks);
      CHECK(spans[int(Phase::d2h)] == r.blocks);
      CHECK(r.pipeline.bytes[int(Phase::read)] == 0);
      const auto j = transfers::to_json(r);
      CHECK(j["pipeline"]["blocks"] == r.blocks);
      CHECK(j["layout"] == std::string(to_string(layout)));
      CHECK(j["pipeline"]["overlap_ratio"].get<double>() == r.overlap_ratio);
      CHECK(j["pipeline"]["pipeline_s"].get<double>() == r.pipeline_s);
    }
}

TEST_CASE("transfers: bad configurations are refused", "[transfers]") {
  std::ostringstream progress;
  transfers::Config config;
  config.ids = 0;
  CHECK_THROWS_AS(transfers::run(config, progress), std::invalid_argument);
  config = {};
  config.repeats = 0;
  CHECK_THROWS_AS(transfers::run(config, progress), std::invalid_argument);
}
