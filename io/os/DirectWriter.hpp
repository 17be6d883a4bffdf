#pragma once
// An uncompressed output's data written past the page cache (O_DIRECT).
// Buffered writes of a file larger than the cache's dirty limits stall on
// write-back and swing with it (a 6 GB file took 27-30 s buffered against
// 4-6.5 s direct on this project's machines; docs/benchmarks.md); direct
// writes go at the device's own rate. O_DIRECT wants offsets, lengths and
// memory aligned: each write's aligned middle goes direct, its unaligned
// head and tail through the page cache. The two never share a page, and
// HDF5's metadata stays buffered on HDF5's own descriptor.
// What a writer holds is bounded, whatever number of threads write through
// it (the per-thread pipeline: one per core): at most max_direct_lanes - 1
// threads of its own (lanes, started on the first large write; where one
// cannot be started, the write goes on in fewer) and max_direct_lanes
// aligned copies of direct_copy_bytes(memory) each, for callers' memory that
// is not aligned as the file offset is (pipeline buffers are page-aligned,
// so a block's first rows need none); a writer waits for a free copy.
#include "core/Names.hpp"
#include "io/os/AlignedPool.hpp"
#include "io/os/DirectIo.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace cvest::io {

// The bytes the page cache holds before the kernel starts writing them back
// (vm.dirty_background_bytes, else vm.dirty_background_ratio of the
// available memory); 0 where it cannot be read (auto then writes direct).
double writeback_threshold_bytes();

// Writes in flight at once for one output: the caller's and its lanes'.
inline constexpr std::size_t max_direct_lanes = 4;
// What a writer's aligned copies take in all, within a run's memory_budget
// (counted in its plan): an eighth of it, at most 32 MiB; and each copy.
std::size_t direct_write_memory(std::size_t budget_bytes);
std::size_t direct_copy_bytes(std::size_t memory_bytes);

class DirectWriter {
 public:
  // `fd`: the file, open for buffered writes (heads, tails, and everything
  // after a fallback); not owned. `shown` names it in messages. off: always
  // buffered. automatic: direct where the file system accepts O_DIRECT, else
  // buffered (why_buffered says why). on: IoError where it refuses.
  // `off_because`: why it is off (empty: the deck's direct = false).
  // `memory`: what its aligned copies may take in all (direct_write_memory).
  DirectWriter(int fd, DirectMode mode, const std::string& shown, const std::string& off_because = "",
               std::size_t memory = direct_write_memory(std::size_t(256) << 20));
  ~DirectWriter();
  DirectWriter(const DirectWriter&) = delete;
  DirectWriter& operator=(const DirectWriter&) = delete;

  // pwrite of all `bytes` at `at` (io::write_at's retries, faults and
  // messages). Safe from several threads at once on disjoint ranges.
  void write(const void* buffer, std::size_t bytes, off_t at);

  bool direct() const { return direct_fd_ >= 0 && !refused_.load(); }
  // Empty while writes go direct; else why they do not.
  std::string why_buffered() const;
  std::uint64_t direct_bytes() const { return direct_bytes_.load(); }
  std::uint64_t buffered_bytes() const { return buffered_bytes_.load(); }
  // "past the page cache (O_DIRECT, 4096-byte aligned; 99.6% of the bytes)"
  // or "through the page cache: WHY".
  std::string text() const;
  // What it holds: bytes of aligned copies allocated, threads started.
  std::size_t copy_memory() const;
  std::size_t lanes() const;

 private:
  void write_direct(const char* in, std::size_t bytes, off_t at);
  void write_direct_lane(const char* in, std::size_t bytes, off_t at);
  // The file system took O_DIRECT at open but refuses its writes (EINVAL):
  // buffered from now on (IoError where mode is on).
  void refuse(const std::string& why);
  int fd_ = -1, direct_fd_ = -1;
  DirectMode mode_;
  std::string shown_;
  std::atomic<bool> refused_{false};
  mutable std::mutex why_m_;
  std::string why_buffered_;
  std::string chosen_because_;  // automatic: why it writes direct (a measurement), where known
  std::atomic<std::uint64_t> direct_bytes_{0}, buffered_bytes_{0};
  // Aligned copies of unaligned callers' data: at most max_direct_lanes,
  // waited for, freed with the writer.
  AlignedPool copies_;
  // The lanes: pieces of callers' writes, taken by the writer's threads.
  struct Batch {
    std::size_t left = 0;
    std::exception_ptr error;
  };
  struct Piece {
    const char* in;
    std::size_t bytes;
    off_t at;
    Batch* batch;
  };
  mutable std::mutex lanes_m_;
  std::condition_variable work_, done_;
  std::deque<Piece> queue_;
  std::vector<std::thread> lanes_;
  bool lanes_started_ = false, stopping_ = false;
  std::size_t start_lanes();  // how many run (0: every write goes on its caller's thread)
  void lane();
};

}  // namespace cvest::io
