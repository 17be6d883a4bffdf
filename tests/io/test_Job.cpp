// Decks run end to end: the first job writes, later jobs are checked against
// it, the verifier recomputes, and a corrupted output is caught.
#include "io/Files.hpp"
#include "io/Job.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace cvest;
using namespace cvest::io;
namespace fs = std::filesystem;

namespace {
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "cvest_test_jobs" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}
}  // namespace

TEST_CASE("a deck's strategy x layout product runs file to file and verifies", "[job]") {
  const auto precision = GENERATE(std::string("double"), std::string("float"));
  const auto dir = fresh_dir("product_" + precision);
  std::ofstream(dir / "deck.toml") << R"(
[input]
file = "in.h5"
generate = { dates = 9, ids = 3001, cols = 5, seed = 3, precision = ")" << precision << R"(" }
[output]
file = "out/cv.h5"
[run]
strategy = ["flat", "per_id", "team"]
layout = "all"
memory_budget = "1MiB"
verify = true
[report]
json = "report.json"
csv = "report.csv"
)";
  const auto deck = load_deck((dir / "deck.toml").string());
  std::ostringstream progress;
  const auto report = run_deck(deck, progress);
  REQUIRE(report.jobs.size() == 6);
  CHECK(report.jobs[0].wrote_output);
  for (std::size_t j = 1; j < report.jobs.size(); ++j) CHECK_FALSE(report.jobs[j].wrote_output);
  CHECK(report.verified);
  CHECK(report.plan.blocks.size() > 1);
  CHECK(report.jobs[0].precision == precision_from_name(precision));
  const auto json = to_json(report);
  CHECK(json["jobs"].size() == 6);
  CHECK(json["jobs"][0]["seconds"].contains("h2d"));
  CHECK(json["jobs"][0]["timeline"].size() == 5 * report.plan.blocks.size());
  // where it ran: this machine's CPUs and memory, a host name
  CHECK(json["output_compression"] == "none");
  CHECK(json["output_gzip_level"] == 0);
  CHECK(json["output_chunk_ids"].get<Index>() == report.output_chunk_ids);
  CHECK(report.output_chunk_ids > 0);
  // generated inputs are (1, ids, K) chunks, unfiltered: read with pread
  CHECK(json["input_storage"]["chunk"].size() == 3);
  CHECK(json["input_storage"]["filters"].empty());
  CHECK(json["input_storage"]["read_by"] == "pread");
  CHECK(progress.str().find("chunks (1, ") != std::string::npos);
  CHECK(json["machine"]["cpus"].get<int>() >= 1);
  CHECK(json["machine"]["memory_bytes"].get<double>() > 0);
  CHECK_FALSE(json["machine"]["host"].get<std::string>().empty());
  CHECK(to_csv(report).find("flat,left," + precision) != std::string::npos);
  // an existing output is refused without overwrite
  CHECK_THROWS_WITH(run_deck(deck, progress), Catch::Contains("output exists"));
}

TEST_CASE("verify catches a single flipped element and names it", "[job]") {
  quiet_hdf5_errors();
  const auto dir = fresh_dir("corrupt");
  const auto in = (dir / "in.h5").string(), out = (dir / "cv.h5").string();
  generate_input(in, {4, 500, 3, 11, Precision::f64}, false);
  std::ofstream(dir / "deck.toml") << "[input]\nfile = \"in.h5\"\n[output]\nfile = \"cv.h5\"\n";
  std::ostringstream progress;
  run_deck(load_deck((dir / "deck.toml").string()), progress);
  CHECK_NOTHROW(verify_output({out, in}, progress));
  {
    File f(H5Fopen(out.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    Dataset ds(H5Dopen2(f.get(), "cv", H5P_DEFAULT));
    const double bad = 42.0;
    write_hyperslab(ds, H5T_NATIVE_DOUBLE, {2, 317, 1}, {1, 1, 1}, &bad, "cv");
  }
  CHECK_THROWS_AS(verify_output({out, in}, progress), VerifyError);
  CHECK_THROWS_WITH(verify_output({out, in}, progress), Catch::Contains("at [2, 317, 1]: found 42"));
}
