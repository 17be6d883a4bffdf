// Output paths and free space, checked before any work.
#include "app/run/WriteMode.hpp"  // outputs settled as a run settles them
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

TEST_CASE("output paths are checked before any work", "[io]") {
  const auto existing = scratch("exists.h5");
  std::ofstream(existing) << "x";
  CHECK_THROWS_WITH(check_output_path(existing.string(), false), Catch::Contains("output exists"));
  CHECK_NOTHROW(check_output_path(existing.string(), true));
  // a directory that cannot exist: its parent is a regular file
  CHECK_THROWS_AS(check_output_path((existing / "sub" / "out.h5").string(), false), IoError);
}

TEST_CASE("an output the disk cannot hold is refused before anything is written", "[io]") {
  const auto path = scratch("huge.h5").string();
  // 1 EB: more than any file system here has free
  CHECK_THROWS_WITH(check_free_space(path, 1e18), Catch::Contains("huge.h5: needs") && Catch::Contains("free"));
  CHECK_THROWS_AS(check_free_space(path, 1e18), IoError);
  CHECK_NOTHROW(check_free_space(path, 1e6));
  OutputSpec spec;
  spec.path = path;
  spec.T = 1000000;
  spec.N = 1000000;
  spec.K = 5;  // 40 TB of doubles
  CHECK_THROWS_WITH(OutputFile(app::settled_output(spec)), Catch::Contains("huge.h5: needs"));
  CHECK_FALSE(std::filesystem::exists(path));
  spec.compression.kind = Compression::gzip;  // at most its plain size, as every compression: refused the same
  CHECK_THROWS_WITH(OutputFile(app::settled_output(spec)), Catch::Contains("huge.h5: needs"));
  spec.T = 2;
  spec.N = 1000;
  CHECK_NOTHROW(OutputFile(app::settled_output(spec)));

  // Files on one file system must fit it together: an input to generate and
  // the output beside it, each fitting alone.
  const double free_here = free_space(path);
  REQUIRE(free_here > 0);
  const auto input = scratch("input_a.h5").string(), output = scratch("cv_b.h5").string();
  CHECK_NOTHROW(check_free_space({{input, 0.6 * free_here}}));
  CHECK_NOTHROW(check_free_space({{output, 0.6 * free_here}}));
  CHECK_THROWS_WITH(check_free_space({{input, 0.6 * free_here}, {output, 0.6 * free_here}}),
                    Catch::Contains("input_a.h5 and ") && Catch::Contains("cv_b.h5: need ") &&
                        Catch::Contains(" of disk together, the file system holding them has "));
  CHECK_NOTHROW(check_free_space({{input, 0.3 * free_here}, {output, 0.3 * free_here}}));
  CHECK_NOTHROW(check_free_space({{input, 0.6 * free_here}, {output, 0.0}}));  // a gzip output: size unknown
}
