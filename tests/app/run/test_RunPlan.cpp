// A run's plan as a value: what the plan stage decides (shapes, block plans,
// rank shares, the output, each job's pipeline) before anything is written.
#include "app/Deck.hpp"
#include "app/Ranks.hpp"
#include "app/run/RunPlan.hpp"
#include "io/input/Generator.hpp"
#include "JobDirs.hpp"

#include <Kokkos_Core.hpp>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>

using namespace cvest;
using namespace cvest::app;
namespace fs = std::filesystem;
using cvest::test::fresh_dir;

namespace {

Deck plan_deck(const fs::path& dir, const std::string& strategies, const std::string& pipeline) {
  std::ofstream(dir / "deck.toml") << R"(
[input]
file = "in.h5"
generate = { dates = 6, ids = 5000, cols = 3, seed = 2 }
[output]
file = "cv.h5"
[run]
strategy = )" << strategies << R"(
layout = "all"
memory_budget = "2MiB"
pipeline = ")" << pipeline << R"("
)";
  return load_deck((dir / "deck.toml").string());
}

// Every element of the cube in exactly one block.
Index covered(const BlockPlan& plan) {
  Index elements = 0;
  for (const Block& b : plan.blocks) elements += b.dates.size() * b.ids.size();
  return elements;
}

}  // namespace

TEST_CASE("a run's plan is a value decided before anything is written", "[run]") {
  const auto dir = fresh_dir("plan_value");
  const Deck deck = plan_deck(dir, R"(["flat", "per_id"])", "overlapped");
  std::ostringstream progress;
  const Ranks one;

  // An input still to be generated: planned from the deck's generate spec.
  const RunPlan planned = plan_run(deck, one, false, progress);
  CHECK_FALSE(planned.input);
  CHECK(planned.shape.T == 6);
  CHECK(planned.shape.N == 5000);
  CHECK(planned.shape.K == 3);
  CHECK(planned.precision == Precision::f64);
  CHECK(planned.input_storage.read_by == ReadBy::pread);
  REQUIRE(planned.blocks.size() == 2);  // one per layout, in the deck's order
  CHECK(planned.blocks[0].layout == LayoutKind::right);
  CHECK(planned.blocks[1].layout == LayoutKind::left);
  for (std::size_t p = 0; p < planned.blocks.size(); ++p) {
    CHECK(covered(planned.blocks[p]) == 6 * 5000);
    CHECK(planned.blocks[p].blocks.size() > 1);  // 360 kB in a 2 MiB budget of nine buffers
    REQUIRE(planned.rank_blocks[p].size() == 1);  // one process: all of them
    CHECK(planned.rank_blocks[p][0].begin == 0);
    CHECK(planned.rank_blocks[p][0].end == Index(planned.blocks[p].blocks.size()));
    CHECK(planned.share(planned.blocks[p].layout, 0).blocks.size() == planned.blocks[p].blocks.size());
  }
  CHECK(planned.output.path == deck.output.file);
  CHECK(planned.output.T * planned.output.N * planned.output.K == 6 * 5000 * 3);
  CHECK(planned.output.chunk_ids > 0);
  CHECK(planned.output.fingerprint.empty());  // nothing on disk to fingerprint yet
  REQUIRE(planned.jobs.size() == 4);  // strategy by strategy, each layout
  CHECK(planned.jobs[0].strategy == Strategy::flat);
  CHECK(planned.jobs[0].layout == LayoutKind::right);
  CHECK(planned.jobs[3].strategy == Strategy::per_id);
  CHECK(planned.jobs[3].layout == LayoutKind::left);
  for (const JobPlan& job : planned.jobs) {
    CHECK(job.pipeline == PipelineKind::overlapped);
    CHECK(job.pipeline_threads == 0);
  }
  CHECK_FALSE(fs::exists(deck.input.file));
  CHECK_FALSE(fs::exists(deck.output.file));

  // The input on disk: the same decisions, read from the file, which the
  // plan holds open; the journal's fingerprint names it.
  io::generate_input(deck.input.file, *deck.input.generate, false);
  const RunPlan read = plan_run(deck, one, true, progress);
  REQUIRE(read.input);
  CHECK(read.input->shape().N == 5000);
  REQUIRE(read.blocks.size() == planned.blocks.size());
  for (std::size_t p = 0; p < read.blocks.size(); ++p)
    CHECK(read.blocks[p].blocks.size() == planned.blocks[p].blocks.size());
  CHECK(read.output.fingerprint.count("input") == 1);
  CHECK_FALSE(fs::exists(deck.output.file));
}

TEST_CASE("a pipeline a job cannot take is refused when the run is planned, naming the job", "[run]") {
  const auto dir = fresh_dir("plan_per_thread");
  const Deck deck = plan_deck(dir, R"(["flat", "team"])", "per_thread");
  std::ostringstream progress;
  // team kernels need a thread team each: the per-thread pipeline does not
  // apply to them; the plan says so before any job runs. Where no job can
  // take it (a device build), the first job is named.
#ifdef KOKKOS_ENABLE_OPENMP
  const bool host_threads = std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::OpenMP> &&
                            Kokkos::DefaultExecutionSpace().concurrency() > 1;
#else
  const bool host_threads = false;
#endif
  CHECK_THROWS_WITH(plan_run(deck, Ranks(), false, progress),
                    Catch::Contains(host_threads ? "pipeline = \"per_thread\" does not apply to team/right"
                                                 : "pipeline = \"per_thread\" does not apply to flat/right"));
}
