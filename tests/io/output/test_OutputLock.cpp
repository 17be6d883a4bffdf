// The output lock in a shared folder.
#include "io/os/Disk.hpp"
#include "io/input/Generator.hpp"
#include "io/input/Input.hpp"
#include "io/output/OutputFile.hpp"
#include "io/output/OutputLock.hpp"
#include "io/output/Journal.hpp"
#include "io/os/TempFiles.hpp"
#include "tests/io/Scratch.hpp"
#include "tests/io/Planted.hpp"

#include "tests/Skip.hpp"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;
namespace fs = std::filesystem;

TEST_CASE("the output lock never follows a link, nor writes or removes another user's file", "[io][shared]") {
  const auto path = scratch("locked.h5");
  const fs::path lock = path.parent_path() / ".locked.h5.lock";
  fs::remove(lock);
  const fs::path v = victim("locked_victim.txt");
  fs::create_symlink(v, lock);
  CHECK_THROWS_WITH(OutputLock(path.string()),
                    Catch::Contains("locked.h5: the lock file") && Catch::Contains(".locked.h5.lock is a symbolic link"));
  CHECK(fs::is_symlink(lock));
  CHECK(contents(v) == "someone's notes\n");
  fs::remove(lock);

  REQUIRE(::mkfifo(lock.c_str(), 0644) == 0);  // opened without blocking, refused
  CHECK_THROWS_WITH(OutputLock(path.string()), Catch::Contains("is not a regular file"));
  CHECK(fs::is_fifo(lock));
  fs::remove(lock);

  { const OutputLock ours(path.string()); CHECK(contents(lock).rfind("pid " + std::to_string(::getpid()), 0) == 0); }
  CHECK_FALSE(fs::exists(lock));  // our own is removed with the lock

  if (!can_chown()) {
    return cvest::test::skip_part("not root: a lock file of another user's");
  }
  write_text(lock, "pid 1 on elsewhere\n");
  give_away(lock);
  {
    const OutputLock held(path.string());  // locked as it is
    CHECK(contents(lock) == "pid 1 on elsewhere\n");
    CHECK_THROWS_WITH(OutputLock(path.string()), Catch::Contains("another cvest run is writing it"));
  }
  CHECK(contents(lock) == "pid 1 on elsewhere\n");  // neither written nor removed
  fs::remove(lock);
}
