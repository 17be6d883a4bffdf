// The files a step is about to write, made ready together: paths checked,
// a killed run's leftovers removed, the disk's room measured after that
// (io/os/ReadyToWrite.hpp).
#include "io/os/Disk.hpp"
#include "io/os/ReadyToWrite.hpp"
#include "io/os/TempFiles.hpp"
#include "tests/io/Planted.hpp"
#include "tests/io/Scratch.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;
namespace fs = std::filesystem;

TEST_CASE("files to write: paths checked before a killed run's leftovers are removed, room counted after", "[io]") {
  const auto output = scratch("ready_cv.h5"), input = scratch("ready_in.h5");
  const std::string left = name_prefix(output) + std::to_string(dead_pid()) + "-abcdefghijkl";
  std::ofstream(left) << "a killed run's output";
  std::ofstream(output) << "x";

  // A path refused (the output exists): nothing is removed.
  CHECK_THROWS_WITH(ready_to_write({{input.string(), 1e6}, {output.string(), 1e6, false, true, true}}),
                    Catch::Contains("ready_cv.h5: output exists; set [output] overwrite = true to replace it"));
  CHECK(fs::exists(left));
  CHECK_THROWS_WITH(ready_to_write({{output.string(), 0, false, true, false, "pass --overwrite"}}),
                    Catch::Contains("pass --overwrite to replace it"));

  // Both fit alone but not together: refused, once the leftovers are gone.
  const double free_here = free_space(output.string());
  REQUIRE(free_here > 0);
  CHECK_THROWS_WITH(ready_to_write({{input.string(), 0.6 * free_here}, {output.string(), 0.6 * free_here, true, true,
                                                                        true}}),
                    Catch::Contains(" of disk together"));
  CHECK_FALSE(fs::exists(left));
  CHECK_NOTHROW(ready_to_write({{input.string(), 0.3 * free_here}, {output.string(), 0, true}}));
  fs::remove(output);
}
