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

#include <cstddef>

namespace cvest::io {

class WriteBehind {
 public:
  // `fd`: the file's descriptor (not owned). batch 0: off.
  WriteBehind(int fd, std::size_t batch) : fd_(fd), batch_(batch) {}
  // `bytes` more were written at the file's end.
  void wrote(std::size_t bytes);
  // Bytes handed to writeback so far (for tests).
  off_t handed() const { return kicked_; }

 private:
  int fd_ = -1;
  std::size_t batch_ = 0, pending_ = 0;
  off_t kicked_ = 0, settled_ = 0;
};

}  // namespace cvest::io
