// The write mode measured per machine (app/tune/WriteModes.hpp): records written
// and read back, the one for this folder found and another machine's not,
// a damaged file refused in one line (auto then takes its stated default),
// and a small measurement's passes counted and interleaved; the read mode
// taken from the same records.
#include "io/os/DirectWriter.hpp"
#include "app/tune/WriteModes.hpp"
#include "core/Errors.hpp"
#include "tests/CacheDirHere.hpp"
#include "tests/ProcessScratch.hpp"
#include "tests/Skip.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace cvest::io;
using namespace cvest::app;
using cvest::DirectMode;
namespace fs = std::filesystem;

namespace {
// Records in a folder of this process's own, as CVEST_CACHE_DIR says.
struct CacheHere : cvest::test::CacheDirHere {
  CacheHere() : CacheDirHere("write-modes") {
    ::setenv("CVEST_TUNE_NO_WAIT", "1", 1);  // the passes' shapes, not their timings
  }
  ~CacheHere() { ::unsetenv("CVEST_TUNE_NO_WAIT"); }
};
}  // namespace

TEST_CASE("write-mode records are kept per machine and file system, a damaged file refused", "[io][tune]") {
  const CacheHere cache;
  const std::string folder = cvest::test::process_scratch().string();
  CHECK(write_mode_records_path() == (cache.dir / "write-modes.json").string());
  std::string problem;
  CHECK(read_write_mode_records(problem).empty());
  CHECK(problem.empty());  // nothing measured yet: nothing to say

  const std::string key = write_mode_key(folder);
  CHECK_THAT(key, Catch::Contains("cpu ") && Catch::Contains("; device ") && Catch::Contains("; file system "));
  WriteModeRecord other{"cpu elsewhere; device sdz (8:0); file system XFS", "2026-01-01", 1e9, {1, 1, 1}, {2, 2, 2}, {}, {}};
  save_write_mode_record(other);
  CHECK_FALSE(write_mode_record_for(folder, problem));  // another machine's: not this folder's
  std::string because;
  CHECK(choose_direct(DirectMode::automatic, 1e6, because, folder) == DirectMode::off);  // the stated default
  CHECK_THAT(because, Catch::Contains("write-back threshold"));

  WriteModeRecord buffered{key, "2026-12-03", 1.6e9, {0.9, 0.8, 1.0}, {0.5, 0.6, 0.7}, {}, {}};
  save_write_mode_record(buffered);
  const auto found = write_mode_record_for(folder, problem);
  REQUIRE(found);
  CHECK(found->direct_s == buffered.direct_s);
  CHECK_FALSE(found->direct());
  CHECK(read_write_mode_records(problem).size() == 2);
  because.clear();
  CHECK(choose_direct(DirectMode::automatic, 1e12, because, folder) == DirectMode::off);  // measured, not sized
  CHECK_THAT(because, Catch::StartsWith("measured on this file system on 2026-12-03: past the page cache 0.90 s, "
                                        "through it 0.60 s per 1.60 GB (medians of 3; 0.80-1.00 and 0.50-0.70)"));
  // Measured again: replaced, not added.
  WriteModeRecord direct{key, "2026-12-04", 1.6e9, {0.4, 0.5, 0.45}, {0.9, 1.0, 1.1}, {}, {}};
  save_write_mode_record(direct);
  CHECK(read_write_mode_records(problem).size() == 2);
  CHECK(choose_direct(DirectMode::automatic, 1e3, because, folder) == DirectMode::automatic);
  CHECK_THAT(because, Catch::Contains("on 2026-12-04"));
  CHECK(choose_direct(DirectMode::off, 1e12, because, folder) == DirectMode::off);  // the deck's word stands

  std::ofstream(write_mode_records_path()) << R"({"records": [{"key": "x", "date": 3})";
  CHECK(read_write_mode_records(problem).empty());
  CHECK_THAT(problem, Catch::Contains("write-modes.json: damaged, not used") && Catch::Contains("cvest tune"));
  CHECK(problem.find('\n') == std::string::npos);
  CHECK_FALSE(write_mode_record_for(folder, problem));
}

TEST_CASE("the read mode: direct by default, what cvest tune measured where it has", "[io][tune]") {
  const CacheHere cache;
  const std::string folder = cvest::test::process_scratch().string();
  const std::string key = write_mode_key(folder);
  std::string because, problem;
  CHECK(choose_direct_reads(DirectMode::automatic, because, folder) == DirectMode::automatic);  // nothing measured
  CHECK_THAT(because, Catch::StartsWith("the stated default"));
  // A record from before reads were measured: its writes used, reads the default.
  save_write_mode_record({key, "2026-12-01", 1.6e9, {0.4, 0.5, 0.45}, {0.9, 1.0, 1.1}, {}, {}});
  REQUIRE(write_mode_record_for(folder, problem));
  CHECK_FALSE(write_mode_record_for(folder, problem)->reads_measured());
  CHECK(choose_direct_reads(DirectMode::automatic, because, folder) == DirectMode::automatic);
  CHECK_THAT(because, Catch::StartsWith("the stated default"));
  // Reads through the cache measured faster: auto reads through it, and says so.
  save_write_mode_record({key, "2026-12-03", 1.6e9, {0.4, 0.5, 0.45}, {0.9, 1.0, 1.1}, {2.0, 2.2, 2.1}, {1.0, 1.2, 1.1}});
  const auto found = write_mode_record_for(folder, problem);
  REQUIRE(found);
  CHECK(found->read_direct_s == std::vector<double>{2.0, 2.2, 2.1});
  CHECK_FALSE(found->read_direct());
  CHECK(found->direct());
  CHECK(choose_direct_reads(DirectMode::automatic, because, folder) == DirectMode::off);
  CHECK(because == "reads measured on this file system on 2026-12-03: cvest runs with the input past the page cache "
                   "2.10 s, through it 1.10 s per 1.60 GB not cached (medians of 3; 2.00-2.20 and 1.00-1.20)");
  CHECK(choose_direct_reads(DirectMode::on, because, folder) == DirectMode::on);  // the deck's word stands
  save_write_mode_record({key, "2026-12-04", 1.6e9, {0.4}, {0.9}, {1.0, 0.9}, {2.0, 2.5}});
  CHECK(choose_direct_reads(DirectMode::automatic, because, folder) == DirectMode::automatic);
  CHECK_THAT(because, Catch::StartsWith("reads measured on this file system on 2026-12-04"));
  // Half a measurement is a damaged record.
  std::ofstream(write_mode_records_path())
      << R"({"records": [{"key": "x", "date": "d", "bytes": 1, "direct_seconds": [1], "buffered_seconds": [1], )"
      << R"("read_direct_seconds": [1]}]})";
  CHECK(read_write_mode_records(problem).empty());
  CHECK_THAT(problem, Catch::Contains("damaged, not used"));
}

TEST_CASE("cvest tune's measurement interleaves both ways and leaves no file", "[io][tune]") {
  const CacheHere cache;
  const fs::path folder = cvest::test::process_scratch() / "tune";
  fs::create_directories(folder);
  std::ostringstream progress;
  WriteModeRecord r;
  try {
    r = measure_write_modes(folder.string(), 1 << 20, 3, progress);
  } catch (const cvest::IoError& e) {
    if (std::string(e.what()).find("refuses O_DIRECT") == std::string::npos) throw;
    return cvest::test::skip_part("the scratch folder's file system refuses O_DIRECT");
  }
  CHECK(r.direct_s.size() == 3);
  CHECK(r.buffered_s.size() == 3);
  CHECK(r.bytes == double(1 << 20));
  CHECK(r.key == write_mode_key(folder.string()));
  const std::string p = progress.str();
  // pass 1: direct first; pass 2: buffered first
  CHECK(p.find("pass 1/3: past") < p.find("pass 1/3: through"));
  CHECK(p.find("pass 2/3: through") < p.find("pass 2/3: past"));
  CHECK(fs::is_empty(folder));
}
