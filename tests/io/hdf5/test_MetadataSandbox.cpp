// Damaged metadata read first in a process of its own: a crash or a
// runaway allocation there is an input error here.
#include "io/os/Disk.hpp"
#include "io/input/Generator.hpp"
#include "io/input/Input.hpp"
#include "io/output/OutputFile.hpp"
#include "io/output/OutputLock.hpp"
#include "tests/io/Scratch.hpp"
#include "tests/io/InputFiles.hpp"
#include "io/hdf5/MetadataSandbox.hpp"

#include "tests/Skip.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <libdeflate.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;

TEST_CASE("metadata HDF5 crashes on is an input error, not a crash, and the reader that crashed is replaced", "[io]") {
  // Found by the input fuzzer: HDF5 1.10.8 dereferences a group's local heap
  // whose data address is undefined (H5Lexists -> H5HL_protect -> memcpy
  // from address 0), before cvest could check anything.
  quiet_hdf5_errors();
  const auto good = scratch("metadata_good.h5"), damaged = scratch("metadata_damaged.h5");
  write_defaults_input(good);
  std::filesystem::copy_file(good, damaged);
  // The heap's prefix: "HEAP", version, 3 reserved, data size, free list, data address.
  const std::uint64_t undefined = ~std::uint64_t(0);
  overwrite_after(damaged, "HEAP", 24, &undefined, sizeof undefined);
  // Whether this HDF5 crashes on it, asked in a child of this test.
  const pid_t child = ::fork();
  if (child == 0) {
    ::signal(SIGSEGV, [](int) { ::_exit(77); });
    const File f(H5Fopen(damaged.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    H5Lexists(f.get(), "multBy", H5P_DEFAULT);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  const bool hdf5_crashes = (WIFEXITED(status) && WEXITSTATUS(status) == 77) || WIFSIGNALED(status);
  if (!hdf5_crashes) WARN("this HDF5 reports the damaged heap instead of crashing on it");
  // The output lock a run holds while it opens its input: a reader started
  // now (each crash starts another) must not keep it once this process lets go.
  const auto lock_path = scratch("metadata.lock");
  const int opened = ::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  const int lock = ::fcntl(opened, F_DUPFD_CLOEXEC, 50);  // clear of the few a reader keeps
  ::close(opened);
  REQUIRE(::flock(lock, LOCK_EX | LOCK_NB) == 0);
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    if (hdf5_crashes)
      CHECK_THROWS_WITH(InputFile(damaged.string(), "multBy", "discount"),
                        Catch::Contains("metadata_damaged.h5: dataset 'multBy': damaged HDF5 metadata: HDF5 ") &&
                            Catch::Contains(" crashes (SIGSEGV) reading it"));
    else
      CHECK_THROWS_AS(InputFile(damaged.string(), "multBy", "discount"), InputError);
    CHECK_NOTHROW(InputFile(good.string(), "multBy", "discount"));  // read by a new reader
  }
  ::close(lock);
  const int again = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  CHECK(::flock(again, LOCK_EX | LOCK_NB) == 0);
  ::close(again);
}

TEST_CASE("metadata that has HDF5 allocate gigabytes is an input error, found with the reader's memory capped", "[io]") {
#if defined(__SANITIZE_ADDRESS__)
  return cvest::test::skip_part("under AddressSanitizer the metadata reader runs without its memory cap");
#endif
  // Found by the input fuzzer: a superblock whose driver info block address
  // points at bytes that read as a 4 GiB block. HDF5 1.10.8 allocates and
  // zeroes 4 GiB (14 s) and then opens the file as if nothing were wrong.
  quiet_hdf5_errors();
  const auto good = scratch("memory_good.h5"), damaged = scratch("memory_damaged.h5");
  write_defaults_input(good);
  std::filesystem::copy_file(good, damaged);
  // Superblock version 0: the signature (8 bytes), versions and sizes (8),
  // B-tree K values and flags (8), then addresses: base, free space
  // (undefined: eight 0xff), end of file, driver info block.
  const std::uint64_t base_high_bytes = 28;  // a block there: version 0, 3 reserved, then 0xffffffff bytes of info
  const std::vector<char> driver_info =
      overwrite_after(damaged, "\x89HDF\r\n\x1a\n", 48, &base_high_bytes, sizeof base_high_bytes);
  CHECK(driver_info == std::vector<char>(8, char(0xff)));  // undefined before
  std::vector<char> head(40);
  std::FILE* f = std::fopen(damaged.c_str(), "rb");
  REQUIRE(f);
  REQUIRE(std::fread(head.data(), 1, head.size(), f) == head.size());
  std::fclose(f);
  REQUIRE(head[8] == 0);  // superblock version 0
  REQUIRE(std::vector<char>(head.begin() + 28, head.begin() + 32) == std::vector<char>(4, 0));
  REQUIRE(std::vector<char>(head.begin() + 32, head.end()) == std::vector<char>(8, char(0xff)));
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    CHECK_THROWS_WITH(InputFile(damaged.string(), "multBy", "discount"),
                      Catch::Contains("memory_damaged.h5: damaged HDF5 metadata: HDF5 ") &&
                          Catch::Contains(" asks for over 1 GiB of memory reading it (opening the file)"));
    CHECK_NOTHROW(InputFile(good.string(), "multBy", "discount"));  // by a fresh reader
  }
}
