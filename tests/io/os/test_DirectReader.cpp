// An input's bytes read past the page cache (io/os/DirectReader.hpp): whatever
// the offset, length and memory alignment, the bytes read are the file's;
// a file the cache does not hold is read direct, one it mostly holds from it;
// a file that ends first is one error naming it.
#include "io/os/DirectReader.hpp"
#include "io/os/DirectWriter.hpp"
#include "core/Errors.hpp"
#include "tests/io/RandomBytes.hpp"
#include "tests/io/Scratch.hpp"
#include "tests/Skip.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <random>
#include <unistd.h>
#include <vector>

using namespace cvest;
using namespace cvest::io;

namespace {

// A file of `bytes`, on disk and dropped from the page cache (clean pages
// go at POSIX_FADV_DONTNEED); its descriptor, open for reading, without
// read-ahead (the cases choose which pages are cached).
int cold_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  const int w = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(w >= 0);
  REQUIRE(::write(w, bytes.data(), bytes.size()) == ssize_t(bytes.size()));
  REQUIRE(::fsync(w) == 0);
  ::close(w);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  return fd;
}

// What these cases need of the scratch folder's file system: O_DIRECT, and
// pages that POSIX_FADV_DONTNEED drops (tmpfs keeps its pages: they are the file).
std::string why_not_here(int fd) {
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const int direct = ::open(self.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (direct < 0) return "the scratch folder's file system refuses O_DIRECT";
  ::close(direct);
  struct stat st {};
  ::fstat(fd, &st);
  void* map = ::mmap(nullptr, std::size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return "the file cannot be mapped to ask mincore";
  unsigned char first = 1;
  const bool asked = ::mincore(map, 1, &first) == 0;
  ::munmap(map, std::size_t(st.st_size));
  return !asked ? "mincore fails here" : (first & 1) ? "the page cache keeps dropped pages here (tmpfs)" : "";
}

struct Freed {
  void operator()(unsigned char* p) const { std::free(p); }
};

}  // namespace

TEST_CASE("direct reads of any offset, length and memory give the file's bytes", "[io][direct]") {
  const auto path = scratch("direct_reader.bin").string();
  const std::size_t size = 3 * direct_read_piece + 5 * direct_alignment + 1234;  // the last page partial
  const auto source = random_bytes(size, 11);
  const int fd = cold_file(path, source);
  if (const std::string why = why_not_here(fd); !why.empty()) {
    ::close(fd);
    return test::skip_part(why);
  }
  DirectReader reader(fd, DirectMode::automatic, path);
  void* raw = nullptr;
  REQUIRE(::posix_memalign(&raw, direct_alignment, size + 2 * direct_alignment) == 0);
  std::unique_ptr<unsigned char, Freed> memory(static_cast<unsigned char*>(raw));
  // (offset, length, memory offset): whole pages into aligned memory; a head
  // and a tail into memory aligned as the offset is; shorter than a page
  // inside one; across a page boundary into unaligned memory; more than one
  // aligned buffer's worth, unaligned; up to the file's partial last page;
  // the whole file.
  const std::vector<std::array<std::size_t, 3>> reads = {
      {0, 4 * direct_alignment, 0},
      {direct_alignment + 100, 2 * direct_read_piece + 3000, 100},
      {5 * direct_alignment + 7, 100, 3},
      {9 * direct_alignment - 10, 20, 1},
      {12345, 2 * direct_read_piece + 777, 5},
      {size - direct_alignment - 99, direct_alignment + 99, 17},
      {0, size, 0},
  };
  for (const auto& [at, bytes, mem] : reads) {
    INFO("offset " << at << ", " << bytes << " bytes, memory offset " << mem);
    std::memset(memory.get(), 0xAB, size + 2 * direct_alignment);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    reader.read(memory.get() + mem, bytes, off_t(at));
    CHECK(std::memcmp(memory.get() + mem, source.data() + at, bytes) == 0);
    CHECK(memory.get()[mem + bytes] == 0xAB);  // nothing past the range
    if (mem > 0) CHECK(memory.get()[mem - 1] == 0xAB);
  }
  CHECK(reader.buffered_bytes() == 0);
  CHECK(reader.direct_bytes() > 0);
  CHECK_THAT(reader.text(), Catch::StartsWith("past the page cache (O_DIRECT; 100.0% of the bytes)"));
  CHECK_THROWS_WITH(reader.read(memory.get(), 100, off_t(size - 50)),
                    Catch::Contains(path) && Catch::Contains("file is truncated"));
  ::close(fd);
}

TEST_CASE("a file the page cache mostly holds is read from it, one it holds less of direct", "[io][direct]") {
  const auto path = scratch("direct_reader_cached.bin").string();
  const auto source = random_bytes(4 * direct_read_piece, 12);
  const int fd = cold_file(path, source);
  if (const std::string why = why_not_here(fd); !why.empty()) {
    ::close(fd);
    return test::skip_part(why);
  }
  std::vector<unsigned char> got(source.size());
  // Three quarters cached (no read-ahead on this descriptor, and what another
  // made dropped again): read from the cache.
  REQUIRE(::pread(fd, got.data(), 3 * direct_read_piece, 0) == ssize_t(3 * direct_read_piece));
  ::posix_fadvise(fd, off_t(3 * direct_read_piece), off_t(direct_read_piece), POSIX_FADV_DONTNEED);
  {
    DirectReader reader(fd, DirectMode::automatic, path);
    std::fill(got.begin(), got.end(), 0);
    reader.read(got.data(), got.size(), 0);
    CHECK(got == source);
    CHECK_FALSE(reader.direct());
    CHECK(reader.direct_bytes() == 0);
    CHECK_THAT(reader.text(), Catch::Matches("through the page cache: the page cache held (7[5-9]|8[0-9])% of the file "
                                             "when it was opened"));
    DirectReader forced(fd, DirectMode::on, path);  // the deck's direct = true: direct whatever the cache holds
    forced.read(got.data(), got.size(), 0);
    CHECK(forced.direct_bytes() == got.size());
  }
  // A quarter cached: direct, every byte.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  REQUIRE(::pread(fd, got.data(), direct_read_piece, 0) == ssize_t(direct_read_piece));
  ::posix_fadvise(fd, off_t(direct_read_piece), 0, POSIX_FADV_DONTNEED);
  DirectReader reader(fd, DirectMode::automatic, path, "the stated default");
  std::fill(got.begin(), got.end(), 0);
  reader.read(got.data(), got.size(), 0);
  CHECK(got == source);
  CHECK(reader.direct_bytes() == got.size());
  CHECK(reader.text() == "past the page cache (O_DIRECT; 100.0% of the bytes): the stated default");
  ::close(fd);
}

TEST_CASE("direct reads off: every byte through the page cache, and why", "[io][direct]") {
  const auto path = scratch("direct_reader_off.bin").string();
  const auto source = random_bytes(direct_read_piece + 5, 13);
  const int fd = cold_file(path, source);
  DirectReader reader(fd, DirectMode::off, path);
  std::vector<unsigned char> got(source.size());
  reader.read(got.data(), got.size(), 0);
  CHECK(got == source);
  CHECK_FALSE(reader.direct());
  CHECK(reader.direct_bytes() == 0);
  CHECK(reader.text() == "through the page cache: [input] direct = false");
  DirectReader measured(fd, DirectMode::off, path, "reads measured on this file system on 2026-12-03: ...");
  CHECK(measured.text() == "through the page cache: reads measured on this file system on 2026-12-03: ...");
  ::close(fd);
}
