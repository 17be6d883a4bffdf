#pragma once
// Compressed chunks reach the disk through HDF5's buffered writes (their
// space is HDF5's to allocate, chunk by chunk, at the file's end). Left to
// the kernel, those pages are written back late and in bursts, and the
// final fsync waits for most of the file: 1.6 GB took 3.5 s through the page
// cache against 1.5 s past it on this project's VM (cvest tune). Write-behind
// keeps the disk busy from the start: every `batch` bytes the new part of the
// file is handed to writeback (sync_file_range), the part before it waited
// for and dropped from the cache (it is not read again), so dirty pages stay
// few and the final sync finds little left.
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <mutex>

namespace cvest::io {

class WriteBehind {
 public:
  // What hands a range to writeback: sync_file_range(2) where null; a
  // stand-in that fails for tests and faults (the kernel's own errors are
  // hard to bring about on purpose).
  using SyncRange = int (*)(int fd, off_t offset, off_t bytes, unsigned flags);
  // `fd`: the file's descriptor (not owned). batch 0: off.
  WriteBehind(int fd, std::size_t batch, SyncRange sync = nullptr) : fd_(fd), batch_(batch), sync_(sync) {}
  // `bytes` more were written at the file's end. From several threads at
  // once: one hands a batch on while the others carry on writing.
  void wrote(std::size_t bytes);
  // Bytes handed to writeback so far (for tests).
  off_t handed() const;
  // The first error writeback reported (an errno; 0: none). Waiting for a
  // range marks its error seen, so a later fsync on another descriptor would
  // not report it: the caller must fail the output on this.
  int error() const { return error_.load(); }

 private:
  int fd_ = -1;
  std::size_t batch_ = 0;
  SyncRange sync_ = nullptr;
  std::atomic<std::size_t> pending_{0};
  std::atomic<int> error_{0};
  mutable std::mutex step_;  // kicked_, settled_
  off_t kicked_ = 0, settled_ = 0;
};

}  // namespace cvest::io
