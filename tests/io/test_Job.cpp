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
  // the table ends with the share a faster kernel could save, from the fastest job
  std::ostringstream table;
  print_run_table(report, table);
  CHECK(table.str().find("the fastest job, busy seconds): read ") != std::string::npos);
  CHECK(table.str().find("% of it, so a faster kernel could save at most that") != std::string::npos);
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
  {  // blocks are checked side by side; the earliest difference is the one named
    File f(H5Fopen(out.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    Dataset ds(H5Dopen2(f.get(), "cv", H5P_DEFAULT));
    const double later = 7.0;
    write_hyperslab(ds, H5T_NATIVE_DOUBLE, {3, 499, 2}, {1, 1, 1}, &later, "cv");
  }
  for (const std::size_t budget : {std::size_t(1) << 30, std::size_t(64) << 10})  // few blocks, many
    CHECK_THROWS_WITH(verify_output({out, in, "cv", "multBy", "discount", budget}, progress),
                      Catch::Contains("at [2, 317, 1]: found 42"));
}

TEST_CASE("a NaN matches any NaN (IEEE leaves a NaN x NaN payload open); nothing else is loosened", "[job]") {
  quiet_hdf5_errors();
  const auto dir = fresh_dir("nan");
  const auto in = (dir / "in.h5").string(), out = (dir / "cv.h5").string();
  generate_input(in, {2, 100, 3, 5, Precision::f64}, false);
  const auto bits = [](std::uint64_t b) {
    double v;
    std::memcpy(&v, &b, sizeof v);
    return v;
  };
  const double nan_a = bits(0x7ff8000000000001ull), nan_b = bits(0xfff8000000000abcull);
  {  // multBy(7, 1) and discount(1, 7, 1) NaN with different payloads and signs
    File f(H5Fopen(in.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    Dataset m(H5Dopen2(f.get(), "multBy", H5P_DEFAULT)), d(H5Dopen2(f.get(), "discount", H5P_DEFAULT));
    write_hyperslab(m, H5T_NATIVE_DOUBLE, {7, 1}, {1, 1}, &nan_a, "multBy");
    write_hyperslab(d, H5T_NATIVE_DOUBLE, {1, 7, 1}, {1, 1, 1}, &nan_b, "discount");
  }
  std::ofstream(dir / "deck.toml") << "[input]\nfile = \"in.h5\"\n[output]\nfile = \"cv.h5\"\n";
  std::ostringstream progress;
  run_deck(load_deck((dir / "deck.toml").string()), progress);
  const auto put = [&](const std::array<Index, 3>& at, double value) {
    File f(H5Fopen(out.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    Dataset ds(H5Dopen2(f.get(), "cv", H5P_DEFAULT));
    write_hyperslab(ds, H5T_NATIVE_DOUBLE, {at[0], at[1], at[2]}, {1, 1, 1}, &value, "cv");
  };
  for (const double either : {nan_a, nan_b}) {  // either factor's payload matches
    put({1, 7, 1}, either);
    CHECK_NOTHROW(verify_output({out, in}, progress));
  }
  put({0, 7, 1}, 1.0);  // a number where the product is NaN
  CHECK_THROWS_WITH(verify_output({out, in}, progress), Catch::Contains("at [0, 7, 1]: found 1, expected nan"));
  put({0, 7, 1}, nan_a);
  put({0, 8, 1}, nan_b);  // a NaN where the product is a number
  CHECK_THROWS_WITH(verify_output({out, in}, progress), Catch::Contains("at [0, 8, 1]: found -nan"));
}
