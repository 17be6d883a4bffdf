// An output's data past the page cache (io/os/DirectWriter.hpp): whatever the
// offsets, lengths and memory alignment, the file holds exactly the bytes
// written; the aligned middles go direct, the heads and tails buffered.
#include "io/os/DirectWriter.hpp"
#include "tests/io/RandomBytes.hpp"
#include "tests/io/Scratch.hpp"
#include "tests/Skip.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <random>
#include <sys/vfs.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace cvest;
using namespace cvest::io;

namespace {

std::vector<unsigned char> file_bytes(int fd, std::size_t n) {
  std::vector<unsigned char> v(n);
  REQUIRE(::pread(fd, v.data(), n, 0) == ssize_t(n));
  return v;
}

// O_DIRECT where the scratch folder's file system takes it (ext4, XFS, and
// tmpfs from Linux 6.6 do); the byte checks hold either way. Where it does
// not, what a case says of the direct path (its copies, lanes, bytes) holds
// with nothing written direct: the case is marked not wholly run.
bool takes_direct(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  ::unlink(path.c_str());
  if (fd < 0) test::skip_part("the scratch folder's file system refuses O_DIRECT: nothing was written direct");
  return fd >= 0;
}

}  // namespace

TEST_CASE("direct writes of any offset, length and memory land byte for byte", "[io][direct]") {
  const auto path = scratch("direct_writer.bin").string();
  const bool direct = takes_direct(path);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const std::size_t size = 6 * direct_alignment * 1024 + 777;  // ~24 MiB: past one 8 MiB aligned copy
  const auto source = random_bytes(size + 64, 7);
  std::vector<unsigned char> expected(size, 0);
  {
    DirectWriter writer(fd, DirectMode::automatic, path);
    CHECK(writer.direct() == direct);
    // (offset, length, memory offset): aligned everything; a head and a tail;
    // shorter than a page inside one; across one page boundary; unaligned
    // memory over more than one aligned copy; a page exactly.
    const std::vector<std::array<std::size_t, 3>> writes = {
        {0, 4 * direct_alignment, 0},          {4 * direct_alignment + 5, 3 * direct_alignment + 10, 3},
        {8 * direct_alignment + 100, 50, 1},   {9 * direct_alignment - 7, 14, 9},
        {10 * direct_alignment + 3, size - 10 * direct_alignment - 3, 13},
    };
    // Memory aligned where the test asks for it: the source's own page.
    std::vector<unsigned char> page_aligned(size + 2 * direct_alignment);
    auto* base = page_aligned.data() + (direct_alignment - reinterpret_cast<std::uintptr_t>(page_aligned.data()) % direct_alignment);
    std::copy(source.begin(), source.end() - 64, base);
    for (const auto& [at, n, shift] : writes) {
      const unsigned char* from = shift == 0 ? base + at : source.data() + at + 0;
      std::vector<unsigned char> shifted;
      if (shift > 0) {  // the same bytes at an address `shift` past a page boundary
        shifted.resize(n + direct_alignment + shift);
        auto* p = shifted.data() + (direct_alignment - reinterpret_cast<std::uintptr_t>(shifted.data()) % direct_alignment) + shift;
        std::copy(source.begin() + long(at), source.begin() + long(at + n), p);
        from = p;
      }
      writer.write(from, n, off_t(at));
      std::copy(source.begin() + long(at), source.begin() + long(at + n), expected.begin() + long(at));
    }
    const std::uint64_t written = 4 * direct_alignment + 3 * direct_alignment + 10 + 50 + 14 + size - 10 * direct_alignment - 3;
    CHECK(writer.direct_bytes() + writer.buffered_bytes() == written);
    if (direct) {
      // Whole pages direct: 4 + 2 (the second write's middle) + the last's
      // pages; heads, tails and the short ones buffered.
      const std::uint64_t last_pages = (size / direct_alignment - 11) * direct_alignment;
      CHECK(writer.direct_bytes() == (4 + 2) * direct_alignment + last_pages);
      CHECK(writer.text().find("past the page cache (O_DIRECT") == 0);
    } else {
      CHECK(writer.direct_bytes() == 0);
      CHECK(writer.text().find("through the page cache") == 0);
    }
  }
  CHECK(file_bytes(fd, size) == expected);
  ::close(fd);
  ::unlink(path.c_str());
}

TEST_CASE("direct writes from several threads at once, disjoint ranges", "[io][direct]") {
  const auto path = scratch("direct_writer_threads.bin").string();
  const bool direct = takes_direct(path);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const std::size_t piece = 3 * direct_alignment + 1001, pieces = 64;  // neither aligned
  const auto source = random_bytes(piece * pieces, 11);
  {
    DirectWriter writer(fd, DirectMode::automatic, path);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (std::size_t p = std::size_t(t); p < pieces; p += 4)
          writer.write(source.data() + p * piece, piece, off_t(p * piece));
      });
    for (auto& t : threads) t.join();
    CHECK(writer.direct_bytes() + writer.buffered_bytes() == piece * pieces);
    CHECK((writer.direct_bytes() > 0) == direct);  // each piece's aligned middle
  }
  CHECK(file_bytes(fd, piece * pieces) == source);
  ::close(fd);
  ::unlink(path.c_str());
}

TEST_CASE("a writer holds at most four aligned copies and three threads, however many threads write", "[io][direct]") {
  const auto path = scratch("direct_writer_bounded.bin").string();
  const bool direct = takes_direct(path);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  // 16 writers, each a run of 9 MiB pieces from memory a byte past a page
  // (every byte through a copy), each piece split into four lanes.
  const std::size_t piece = (std::size_t(9) << 20), writers = 16, each = 2;
  const auto source = random_bytes(piece * writers * each + 1, 5);
  const std::size_t memory = std::size_t(8) << 20;  // copies of 2 MiB
  {
    DirectWriter writer(fd, DirectMode::automatic, path, "", memory);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < writers; ++t)
      threads.emplace_back([&, t] {
        for (std::size_t k = 0; k < each; ++k) {
          const std::size_t p = t * each + k;
          writer.write(source.data() + 1 + p * piece, piece, off_t(p * piece));
        }
      });
    for (auto& t : threads) t.join();
    CHECK(writer.direct_bytes() == (direct ? piece * writers * each : 0));
    CHECK(writer.copy_memory() <= memory);
    CHECK((writer.copy_memory() > 0) == direct);
    CHECK(writer.lanes() <= max_direct_lanes - 1);
  }
  CHECK(file_bytes(fd, piece * writers * each) == std::vector<unsigned char>(source.begin() + 1, source.end()));
  ::close(fd);
  ::unlink(path.c_str());
}

TEST_CASE("direct = false writes through the page cache and says so", "[io][direct]") {
  const auto path = scratch("direct_writer_off.bin").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const auto source = random_bytes(8 * direct_alignment, 3);
  {
    DirectWriter writer(fd, DirectMode::off, path);
    CHECK_FALSE(writer.direct());
    writer.write(source.data(), source.size(), 0);
    CHECK(writer.direct_bytes() == 0);
    CHECK(writer.buffered_bytes() == source.size());
    CHECK(writer.text() == "through the page cache: [output] direct = false");
  }
  CHECK(file_bytes(fd, source.size()) == source);
  ::close(fd);
  ::unlink(path.c_str());
}
