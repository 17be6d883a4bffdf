#include "io/WriteBehind.hpp"

#include <fcntl.h>
#include <sys/stat.h>

namespace cvest::io {

void WriteBehind::wrote(std::size_t bytes) {
  pending_ += bytes;
  if (fd_ < 0 || batch_ == 0 || pending_ < batch_) return;
  pending_ = 0;
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || st.st_size <= kicked_) return;
  const off_t end = st.st_size;
  // The batch before the last one: on disk (waited for), then dropped.
  // Failures here change only when pages reach the disk: the final fsync
  // still reports any write that failed.
  if (kicked_ > settled_) {
    ::sync_file_range(fd_, settled_, kicked_ - settled_,
                      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    ::posix_fadvise(fd_, settled_, kicked_ - settled_, POSIX_FADV_DONTNEED);
    settled_ = kicked_;
  }
  ::sync_file_range(fd_, kicked_, end - kicked_, SYNC_FILE_RANGE_WRITE);
  kicked_ = end;
}

}  // namespace cvest::io
