// What `cvest run` prints (issue 61): the default summary within 120
// columns, saying the choices without their reasons; the full text
// (--explain) with every line the run table printed before the summary became
// the default, checked against that text as main's code printed it for
// made-up reports (fixtures/).
#include "app/run/ReportFormats.hpp"
#include "app/run/RunSummary.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using namespace cvest;
using namespace cvest::app;
namespace fs = std::filesystem;

namespace {

BlockPlan made_up_plan(LayoutKind layout, Index dates, Index ids, int blocks) {
  BlockPlan plan;
  plan.T = 100, plan.N = 4000, plan.K = 5;
  plan.layout = layout;
  plan.block_dates = dates, plan.block_ids = ids;
  plan.blocks.resize(std::size_t(blocks));
  return plan;
}

JobReport made_up_job(Strategy strategy, LayoutKind layout, double scale) {
  JobReport job;
  job.strategy = strategy, job.layout = layout, job.precision = Precision::f64;
  job.runs = 3;
  const double seconds[phase_count] = {0.0031, 0.0, 0.0022, 0.0, 0.0047};
  for (int p = 0; p < phase_count; ++p) {
    job.stats.seconds[p] = seconds[p] * scale;
    job.stats.bytes[p] = seconds[p] > 0 ? 16e6 : 0;
  }
  job.stats.total_s = 0.0123 * scale;
  job.peak_rss_bytes = 41.5 * (1 << 20);
  for (int c = 0; c < 8; ++c) job.roof_calls.push_back({1.6e6, 1e-4 * (1 + 0.01 * c) * scale, 0.95e-4 * scale});
  job.summarize_roof();
  return job;
}

// Every kind of line the table has: reading ahead, ranks, a resumed job,
// kernel calls a roof copy warmed, a verified output; `backend` "Cuda" adds
// the copies' share.
RunReport made_up_report(const std::string& backend) {
  RunReport rep;
  rep.build.backend = backend, rep.build.threads = 2;
  rep.deck = "inputs/seed.toml", rep.input = "inputs/../out/seed/input.h5", rep.output = "inputs/../out/seed/cv.h5";
  rep.T = 100, rep.N = 4000, rep.K = 5;
  rep.memory_budget = std::size_t(64) << 20;
  rep.input_storage.layout = StorageLayout::chunked;
  rep.input_storage.chunk = {1, 4000, 5};
  rep.input_storage.read_by = ReadBy::pread;
  rep.input_reads = "through the page cache: the page cache held 100% of the file when it was opened";
  rep.output_writes = "through the page cache: the output (0.02 GB) fits below the page cache's write-back threshold "
                      "(2.40 GB), where writing through it and syncing once measured faster on another host (the "
                      "stated default; cvest tune measures this one); journal: 0 batches synced (0.00 s of syncs, "
                      "paced to ~5% of the time)";
  rep.plans = {made_up_plan(LayoutKind::right, 8, 4000, 13), made_up_plan(LayoutKind::left, 100, 400, 10)};
  rep.ranks = 2, rep.ranks_on_node = 2;
  rep.jobs = {made_up_job(Strategy::flat, LayoutKind::right, 1), made_up_job(Strategy::flat, LayoutKind::left, 1.4),
              made_up_job(Strategy::per_id, LayoutKind::left, 2.5)};
  rep.jobs[0].wrote_output = true;
  rep.jobs[0].pipeline = PipelineKind::per_thread, rep.jobs[0].pipeline_threads = 2, rep.jobs[0].read_ahead = true;
  rep.jobs[0].stats.kernel_after_roof_s = 0.0006, rep.jobs[0].stats.kernel_after_roof_bytes = 8e6;
  rep.jobs[0].resumed_blocks = 4;
  rep.jobs[1].kernel_ids = 100;
  for (auto& job : rep.jobs) {
    RankStats a, b;
    a.total_s = job.stats.total_s, a.blocks = 7;
    b.total_s = job.stats.total_s * 0.9, b.blocks = 6;
    job.per_rank = {a, b};
  }
  rep.jobs[2].parts_stored_s = 0.0012;
  rep.verified = true;
  return rep;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// flat's runs on the host are said from this machine's caches: only the
// line's start is the same everywhere.
std::string comparable(const std::string& line) {
  const std::string flat = "flat's runs on the host: ";
  return line.rfind(flat, 0) == 0 ? flat : line;
}

}  // namespace

TEST_CASE("the full text (--explain) has every line the run table printed before the short summary", "[summary]") {
  const std::string backend = GENERATE(std::string("OpenMP"), std::string("Cuda"));
  std::ostringstream text;
  print_run_table(made_up_report(backend), text);
  const fs::path fixture = fs::path(CVEST_TEST_FIXTURE_DIR) / ("run_table_" + backend + ".txt");
  if (std::getenv("CVEST_WRITE_FIXTURES")) std::ofstream(fixture) << text.str();  // once, from main's code
  std::ifstream in(fixture);
  REQUIRE(in);
  const std::string before((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> now;
  for (const auto& line : lines_of(text.str())) now.push_back(comparable(line));
  for (const auto& line : lines_of(before)) {
    CAPTURE(line);
    CHECK(std::find(now.begin(), now.end(), comparable(line)) != now.end());
  }
}

TEST_CASE("a text's choice is what it says before its reasons", "[summary]") {
  CHECK(choice_of("through the page cache: the page cache held 100% of the file when it was opened") ==
        "through the page cache");
  CHECK(choice_of("past the page cache (O_DIRECT, 4096-byte aligned; 99.0% of the bytes): measured on this file "
                  "system on 2026-12-03: ...") == "past the page cache (O_DIRECT, 4096-byte aligned)");
  CHECK(choice_of("through HDF5 (compressed chunks: 0.10 GB coded into 0.05 GB by cvest's threads)") ==
        "through HDF5 (compressed chunks)");
  CHECK(choice_of("through the page cache, by HDF5") == "through the page cache, by HDF5");
  CHECK(choice_of("read by HDF5 (H5Dread, one thread at a time)", ":;,") == "read by HDF5 (H5Dread)");
  CHECK(choice_of("") == "");
}

TEST_CASE("first use's line: its choices in the short form, without the path or a second batch's why", "[summary]") {
  RunReport rep = made_up_report("OpenMP");
  // The first use of a new user's first run (issue 59): wrapped after a
  // comma where even the short form passes 120 columns, never cut.
  const std::string few = "flat measured in 2.31 s (double: left 1 stream, right 4 dates at once, streaming stores",
                    many = "flat measured in 12.34 s (double: left 2 streams below 28 dates, 1 stream from 28, right 4 "
                           "dates at once below 28 dates, 2 from 28, streaming stores";
  const std::string path = "/home/" + std::string(80, 'u') + "/.cache/cvest/flat-walks.json";
  for (const std::string& choices : {few, many})
    for (const std::string& end : {"), recorded in " + path,
                                   "; measured twice, the first batch's passes spread 38%), recorded in " + path,
                                   std::string("), not recorded: its passes spread 41% (the machine busy), measured "
                                               "again next time (1024 ranks measured)")}) {
      rep.first_use = choices + end;
      std::ostringstream text;
      print_run_summary(rep, text);
      CAPTURE(text.str());
      const auto lines = lines_of(text.str());
      const auto at = std::find_if(lines.begin(), lines.end(),
                                   [](const std::string& l) { return l.rfind("first use: ", 0) == 0; });
      REQUIRE(at != lines.end());
      std::string said = *at;
      for (auto next = at + 1; next != lines.end() && next->rfind("  ", 0) == 0; ++next) said += " " + next->substr(2);
      const bool busy = end.find("not recorded") != std::string::npos;
      CHECK(said == "first use: " + choices +
                        (busy ? "), not recorded (the machine busy) (1024 ranks measured)" : "), recorded"));
      for (auto l = at; l != lines.end() && !l->empty(); ++l) CHECK(l->size() <= summary_width);
    }
}

TEST_CASE("the default summary fits a 120-column terminal and says what a user compares", "[summary]") {
  const std::string backend = GENERATE(std::string("OpenMP"), std::string("Cuda"));
  RunReport rep = made_up_report(backend);
  // The longest names and paths a run may have: the paths are cut in their middle.
  rep.deck = "/scratch/" + std::string(150, 'd') + "/deck.toml";
  rep.input = "/scratch/" + std::string(150, 'i') + "/input.h5";
  rep.output = "/scratch/" + std::string(150, 'o') + "/cv.h5";
  rep.jobs[2].strategy = Strategy::kokkos_kernels;
  rep.jobs[2].layout = LayoutKind::right;
  rep.jobs[2].stats.total_s = 1e-3;  // the fastest: the longest name in the verdict
  if (backend == "Cuda")
    for (auto& job : rep.jobs) job.stats.seconds[int(Phase::h2d)] = job.stats.seconds[int(Phase::d2h)] = 0.004;
  std::ostringstream text;
  print_run_summary(rep, text);
  CAPTURE(text.str());
  const auto lines = lines_of(text.str());
  for (const auto& line : lines) {
    CAPTURE(line);
    CHECK(line.size() <= summary_width);
  }
  const auto starts = [&](const std::string& start) {
    return std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(start, 0) == 0; });
  };
  CHECK(starts("cvest run /scratch/d") == 1);
  CHECK(starts("input   /scratch/i") == 1);
  CHECK(starts("output  /scratch/o") == 1);
  CHECK(text.str().find("deck.toml  100 x 4000 x 5 double  " + backend + " (2 threads a rank, 2 ranks)") !=
        std::string::npos);
  CHECK(text.str().find("chunks (1, 4000, 5); read with pread, through the page cache, read ahead\n") !=
        std::string::npos);
  CHECK(text.str().find("cv.h5  uncompressed, written through the page cache\n") != std::string::npos);
  CHECK(starts("strategy       layout  total s    read" + std::string(backend == "Cuda" ? "     h2d" : "") +
               "  kernel") == 1);
  CHECK(starts("where the time goes") == 1);
  CHECK(starts("  flat/right: slowest rank 0, load balance 1.05 (slowest / mean)") == 1);
  CHECK(starts("resumed: 4 of flat/right's 13 blocks") == 1);
  CHECK(starts("verdict: kokkos_kernels/right fastest, 0.001 s, 17.22x the slowest; kernel ") == 1);
  CHECK(text.str().find("; output verified") != std::string::npos);
}
