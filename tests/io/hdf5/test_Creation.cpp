// A new HDF5 file: at a fresh temporary name until it is published, removed
// if it is given up (io/hdf5/Creation.hpp).
#include "io/hdf5/Creation.hpp"
#include "tests/io/Scratch.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;
namespace fs = std::filesystem;

namespace {
// The temporary files of `path` in its folder.
int temporaries(const fs::path& path) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(path.parent_path()))
    n += entry.path().filename().string().rfind("." + path.filename().string() + ".tmp-", 0) == 0;
  return n;
}
}  // namespace

TEST_CASE("a new file is at a temporary name until published, and removed if given up", "[io]") {
  quiet_hdf5_errors();
  const auto path = scratch("new_file.h5");
  fs::remove(path);
  {
    NewFile given_up(path.string(), {});
    CHECK(given_up.file());
    CHECK(temporaries(path) == 1);
    CHECK_FALSE(fs::exists(path));
  }
  CHECK(temporaries(path) == 0);
  CHECK_FALSE(fs::exists(path));
  {
    NewFile made(path.string(), {});
    made.publish("input");
  }
  CHECK(fs::exists(path));
  CHECK(temporaries(path) == 0);
  {  // nothing was there when it began: a file there now is not replaced, and this one goes
    NewFile late(path.string(), {});
    CHECK_THROWS_WITH(late.publish("input"), Catch::Contains("appeared while this run wrote its output"));
  }
  CHECK(temporaries(path) == 0);
  CHECK(fs::exists(path));
  fs::remove(path);
}
