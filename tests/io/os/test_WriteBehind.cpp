// Write-behind (io/os/WriteBehind.*): a file written at its end in pieces is
// handed to writeback batch by batch, every byte as written, and what is on
// disk is dropped from the page cache a batch behind.
#include "io/os/WriteBehind.hpp"

#include "tests/io/Scratch.hpp"
#include "tests/Skip.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;

namespace {

// Pages of [0, bytes) of `fd` the page cache holds.
std::size_t resident_pages(int fd, std::size_t bytes) {
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  REQUIRE(map != MAP_FAILED);
  const std::size_t page = std::size_t(::sysconf(_SC_PAGESIZE)), pages = (bytes + page - 1) / page;
  std::vector<unsigned char> in(pages);
  REQUIRE(::mincore(map, bytes, in.data()) == 0);
  ::munmap(map, bytes);
  std::size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

}  // namespace

TEST_CASE("write-behind hands each batch to writeback and drops the one before it once on disk", "[io]") {
  const auto path = scratch("write_behind.bin");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const std::size_t piece = 1 << 20, batch = 4 << 20, pieces = 20;
  WriteBehind behind(fd, batch);
  std::vector<unsigned char> data(piece);
  for (std::size_t p = 0; p < pieces; ++p) {
    for (std::size_t j = 0; j < piece; ++j) data[j] = static_cast<unsigned char>((p * 131 + j) % 251);
    REQUIRE(::pwrite(fd, data.data(), piece, off_t(p * piece)) == ssize_t(piece));
    behind.wrote(piece);
    // Handed on at each batch's end, the whole file written so far.
    if ((p + 1) * piece % batch == 0) CHECK(behind.handed() == off_t((p + 1) * piece));
  }
  CHECK(behind.handed() == off_t(pieces * piece));
  // Every byte as written.
  std::vector<unsigned char> back(piece);
  for (std::size_t p = 0; p < pieces; ++p) {
    REQUIRE(::pread(fd, back.data(), piece, off_t(p * piece)) == ssize_t(piece));
    bool same = true;
    for (std::size_t j = 0; j < piece && same; ++j) same = back[j] == static_cast<unsigned char>((p * 131 + j) % 251);
    CHECK(same);
  }
  // All but the last two batches written back and dropped (the reads above
  // brought them in again: checked on a fresh file).
  ::close(fd);
  const int fd2 = ::open(path.c_str(), O_RDWR | O_TRUNC | O_CLOEXEC);
  REQUIRE(fd2 >= 0);
  WriteBehind again(fd2, batch);
  for (std::size_t p = 0; p < pieces; ++p) {
    REQUIRE(::pwrite(fd2, data.data(), piece, off_t(p * piece)) == ssize_t(piece));
    again.wrote(piece);
  }
  struct statfs fs {};
  REQUIRE(::fstatfs(fd2, &fs) == 0);
  if (fs.f_type == 0x01021994 /* tmpfs: its pages are the file */) {
    skip_part("the scratch folder is on tmpfs, whose pages are never dropped");
  } else {
    const std::size_t settled = pieces * piece - 2 * batch;
    CHECK(resident_pages(fd2, settled) == 0);
  }
  ::close(fd2);
}

TEST_CASE("write-behind keeps the first error writeback reports, for the output to fail on", "[io]") {
  // A descriptor no longer open: the file's size cannot be asked (fstat).
  const auto path = scratch("write_behind_error.bin");
  const int closed = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(closed >= 0);
  REQUIRE(::close(closed) == 0);
  WriteBehind gone(closed, 1);
  CHECK(gone.error() == 0);
  gone.wrote(4096);
  CHECK(gone.error() == EBADF);
  CHECK(gone.handed() == 0);
  // Writeback that fails with EIO, then with ENOSPC: the first is the one
  // kept (a second, different error must not replace it).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  static int calls = 0;
  calls = 0;
  WriteBehind failing(fd, 1, [](int, off_t, off_t, unsigned) { return errno = calls++ == 0 ? EIO : ENOSPC, -1; });
  const std::vector<unsigned char> data(4096, 7);
  for (int piece = 0; piece < 3; ++piece) {
    REQUIRE(::pwrite(fd, data.data(), data.size(), off_t(piece) * 4096) == ssize_t(data.size()));
    failing.wrote(data.size());
    CHECK(failing.error() == EIO);
  }
  CHECK(calls >= 1);
  CHECK(failing.handed() == 0);
  ::close(fd);
}
