#include "io/os/WriteBehind.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>

namespace cvest::io {

off_t WriteBehind::handed() const {
  const std::lock_guard lock(step_);
  return kicked_;
}

void WriteBehind::wrote(std::size_t bytes) {
  if (fd_ < 0 || batch_ == 0 || pending_.fetch_add(bytes) + bytes < batch_ || error_.load() != 0) return;
  const std::unique_lock lock(step_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is handing a batch on: the next one catches up
  pending_.store(0);
  const auto failed = [&](int e) {
    int none = 0;
    error_.compare_exchange_strong(none, e);
  };
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return failed(errno);
  if (st.st_size <= kicked_) return;
  const off_t end = st.st_size;
  const SyncRange sync = sync_ ? sync_ : [](int fd, off_t at, off_t bytes, unsigned flags) {
    return ::sync_file_range(fd, at, bytes, flags);
  };
  // The batch before the last one: on disk (waited for), then dropped.
  if (kicked_ > settled_) {
    if (sync(fd_, settled_, kicked_ - settled_,
             SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0)
      return failed(errno);
    ::posix_fadvise(fd_, settled_, kicked_ - settled_, POSIX_FADV_DONTNEED);
    settled_ = kicked_;
  }
  if (sync(fd_, kicked_, end - kicked_, SYNC_FILE_RANGE_WRITE) != 0) return failed(errno);
  kicked_ = end;
}

}  // namespace cvest::io
