// The verifier: a flipped element named, a reader that finds the wrong bytes
// caught through HDF5, NaN against NaN.
#include "io/os/Disk.hpp"
#include "io/input/Generator.hpp"
#include "io/input/Input.hpp"
#include "io/output/OutputFile.hpp"
#include "io/output/OutputLock.hpp"
#include "app/run/ReportFormats.hpp"
#include "app/run/RunDeck.hpp"
#include "app/run/Verify.hpp"
#include "JobDirs.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <fmt/format.h>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::app;
namespace fs = std::filesystem;
using cvest::test::fresh_dir;

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

TEST_CASE("verify reads a sample through HDF5 too, so a reader that finds the wrong bytes is caught", "[job]") {
  quiet_hdf5_errors();
  const auto dir = fresh_dir("cross_check");
  const auto in = (dir / "in.h5").string(), out = (dir / "cv.h5").string(), other = (dir / "other.h5").string();
  generate_input(in, {5, 3000, 4, 21, Precision::f64}, false);
  generate_input(other, {5, 3000, 4, 22, Precision::f64}, false);
  std::ofstream(dir / "deck.toml") << "[input]\nfile = \"in.h5\"\n[output]\nfile = \"cv.h5\"\n";
  std::ostringstream progress;
  run_deck(load_deck((dir / "deck.toml").string()), progress);
  const VerifyOptions options{out, in};
  const InputFile input(in, "multBy", "discount");
  const BlockPlan plan = plan_blocks(5, 3000, 4, 8, std::size_t(1) << 20);
  REQUIRE(plan.blocks.size() > 8);
  const CubeFile cv(out, {{"cv", 3}}), other_file(other, {{"discount", 3}});
  const Dataset& wrong = other_file.dataset(0);
  // readers that find the output's own bytes agree with HDF5
  CHECK_NOTHROW(cross_check_readers(options, input, CubeReader(cv.dataset(0), out, "cv", 3000, 4), cv, plan,
                                    Precision::f64));
  // one that reads another dataset (as the external-link bug did) does not
  CHECK_THROWS_WITH(cross_check_readers(options, input, CubeReader(wrong, out, "cv", 3000, 4), cv, plan,
                                        Precision::f64),
                    Catch::Contains("cv.h5: dataset 'cv' reads differently through cvest's reader than through HDF5 "
                                    "at dates [0, 1), ids [0, "));
}

TEST_CASE("a NaN matches any NaN (IEEE leaves a NaN x NaN payload open), and nothing else is loosened", "[job]") {
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
