#pragma once
// An input's bytes read past the page cache (O_DIRECT) unless the page cache
// holds the file. A cold input read through the cache went at 0.56-0.61 GB/s
// on this project's VMs against 1.1-1.9 GB/s for direct reads of 1 MiB
// (docs/benchmarks.md), and an input as large as memory evicted itself as
// it went. A file the cache mostly holds (just generated, or read again;
// mincore when it is opened) is read from it.
// O_DIRECT wants offsets, lengths and memory aligned: a range is read whole
// pages at a time, into the caller's memory where it is aligned as the file
// offset is, else through one of the reader's aligned buffers (at most
// direct_read_buffers, whatever number of threads read: waited for).
#include "core/Names.hpp"
#include "io/os/AlignedPool.hpp"
#include "io/os/DirectIo.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <vector>

namespace cvest::io {

// What one direct read moves through a thread's aligned buffer: single
// synchronous reads of 1 MiB kept this project's devices as busy as 64 MiB
// ones (docs/benchmarks.md).
inline constexpr std::size_t direct_read_piece = std::size_t(1) << 20;
// A reader's aligned buffers at most, and what an input's two readers
// (discount's and multBy's) take (counted in a run's memory_budget where the
// input may be read direct).
inline constexpr std::size_t direct_read_buffers = 4;
inline constexpr std::size_t direct_read_memory = 2 * direct_read_buffers * direct_read_piece;

class DirectReader {
 public:
  // `fd`: the file, open for reading (not owned); `shown` names it in
  // messages. off: always through the page cache. automatic: direct where
  // the file system accepts O_DIRECT and the page cache holds less than half
  // of the file (else through the cache, said by text()). on: direct,
  // IoError where the file system refuses O_DIRECT. `because`: why the mode is what it is
  // (a measurement, or why it is off), for text(). Where mincore cannot
  // tell what the cache holds (another user's file this user may not
  // write: it then says every page is held), automatic reads direct.
  DirectReader(int fd, DirectMode mode, const std::string& shown, const std::string& because = "");
  ~DirectReader();
  DirectReader(const DirectReader&) = delete;
  DirectReader& operator=(const DirectReader&) = delete;

  // All `bytes` at `at` into `out` (io::read_at's retries and messages).
  // Safe from several threads at once.
  void read(void* out, std::size_t bytes, off_t at);

  bool direct() const { return direct_fd_ >= 0 && !refused_.load(); }
  std::uint64_t direct_bytes() const { return direct_bytes_.load(); }
  std::uint64_t buffered_bytes() const { return buffered_bytes_.load(); }
  // "past the page cache (O_DIRECT; 100.0% of the bytes): WHY" or "through
  // the page cache: WHY".
  std::string text() const;

 private:
  void read_direct(char* out, std::size_t bytes, off_t at);
  // One aligned range [from, to) read direct into `into` (aligned); false
  // where the file system refused (then buffered from now on).
  bool read_aligned(char* into, off_t from, off_t to, off_t need_to);
  void refuse(const std::string& why);
  int fd_ = -1, direct_fd_ = -1;
  DirectMode mode_;
  std::string shown_, because_;
  std::atomic<bool> refused_{false};
  mutable std::mutex why_m_;
  std::string why_buffered_;
  std::atomic<std::uint64_t> direct_bytes_{0}, buffered_bytes_{0};
  AlignedPool pieces_;  // for memory not aligned as the file offset is
};

}  // namespace cvest::io
