// Opening inputs: one error per kind of bad input, naming file and dataset;
// a locked input; the thread-safe HDF5 jobs need.
#include "io/os/Disk.hpp"
#include "io/input/Generator.hpp"
#include "io/input/Input.hpp"
#include "io/output/OutputFile.hpp"
#include "io/output/OutputLock.hpp"
#include "tests/io/Scratch.hpp"
#include "tests/io/InputFiles.hpp"

#include <catch2/catch.hpp>
#include <H5DSpublic.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;
namespace fs = std::filesystem;

TEST_CASE("bad inputs are one-line errors naming file, dataset, expected and found", "[io]") {
  quiet_hdf5_errors();
  CHECK_THAT(error_of([] { InputFile("/nonexistent/in.h5", "multBy", "discount"); }),
             Catch::Contains("/nonexistent/in.h5: no such file"));

  const auto text = scratch("text.h5");
  std::ofstream(text) << "not hdf5 at all\n";
  CHECK_THAT(error_of([&] { InputFile(text.string(), "multBy", "discount"); }), Catch::Contains("not an HDF5 file"));

  const auto truncated = scratch("truncated.h5");
  generate_input(truncated.string(), {4, 2000, 5, 1, Precision::f64}, false);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  CHECK_THAT(error_of([&] { InputFile(truncated.string(), "multBy", "discount"); }),
             Catch::Contains(truncated.string()) && Catch::Contains("truncated"));

  const auto missing = scratch("missing.h5");
  add_dataset(missing, "multBy", H5T_IEEE_F64LE, {4, 5});
  CHECK_THAT(error_of([&] { InputFile(missing.string(), "multBy", "discount"); }),
             Catch::Contains("dataset 'discount' not found"));

  const auto rank = scratch("rank.h5");
  add_dataset(rank, "multBy", H5T_IEEE_F64LE, {4, 5});
  add_dataset(rank, "discount", H5T_IEEE_F64LE, {3, 20});
  CHECK_THAT(error_of([&] { InputFile(rank.string(), "multBy", "discount"); }),
             Catch::Contains("dataset 'discount' has rank 2 (3, 20), expected rank 3"));

  const auto mismatch = scratch("mismatch.h5");
  add_dataset(mismatch, "multBy", H5T_IEEE_F64LE, {4, 6});
  add_dataset(mismatch, "discount", H5T_IEEE_F64LE, {3, 4, 5});
  CHECK_THAT(error_of([&] { InputFile(mismatch.string(), "multBy", "discount"); }),
             Catch::Contains("dataset 'multBy' is (4, 6), expected (4, 5)"));

  const auto zero = scratch("zero.h5");
  add_dataset(zero, "multBy", H5T_IEEE_F64LE, {0, 5});
  add_dataset(zero, "discount", H5T_IEEE_F64LE, {3, 0, 5});
  CHECK_THAT(error_of([&] { InputFile(zero.string(), "multBy", "discount"); }),
             Catch::Contains("no zero-length dimension"));

  const auto ints = scratch("ints.h5");
  add_dataset(ints, "multBy", H5T_STD_I32LE, {4, 5});
  add_dataset(ints, "discount", H5T_IEEE_F64LE, {3, 4, 5});
  CHECK_THAT(error_of([&] { InputFile(ints.string(), "multBy", "discount"); }),
             Catch::Contains("dataset 'multBy' holds 32-bit integers, expected 64-bit or 32-bit floats"));

  const auto strings = scratch("strings.h5");
  Datatype str(H5Tcopy(H5T_C_S1));
  H5Tset_size(str.get(), 8);
  add_dataset(strings, "multBy", H5T_IEEE_F64LE, {4, 5});
  add_dataset(strings, "discount", str.get(), {3, 4, 5});
  CHECK_THAT(error_of([&] { InputFile(strings.string(), "multBy", "discount"); }), Catch::Contains("holds strings"));
}

TEST_CASE("an input locked by a writer is an error that says so", "[io]") {
  quiet_hdf5_errors();
  const auto path = scratch("locked.h5");
  generate_input(path.string(), {2, 10, 3, 1, Precision::f64}, false);
  // what HDF5 does for a process that opened the file for writing
  const int fd = ::open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  CHECK_THROWS_WITH(open_input_file(path.string()),
                    Catch::Contains("locked.h5: locked by a process that has it open for writing") &&
                        Catch::Contains("HDF5_USE_FILE_LOCKING=FALSE"));
  ::close(fd);
  CHECK_NOTHROW(open_input_file(path.string()));
}

TEST_CASE("the HDF5 library loaded is thread-safe, as jobs need", "[io]") {
  CHECK_NOTHROW(require_threadsafe_hdf5());
}
