#pragma once
#include "io/os/TempFiles.hpp"

#include <memory>
#include <string>

namespace cvest::io {

// One cvest run at a time per output: an exclusive flock on `.NAME.lock`
// beside it, held while the object lives (the kernel drops it on any exit,
// SIGKILL included) and the file removed with it. A second run of the same
// output is refused at its start with IoError naming the holder (its pid
// and host, which the lock file holds). Where the file system has no locks,
// a warning, and no lock. The lock file is never followed through a link
// (refused, named); one another user left there is locked as it is, never
// written or removed.
class OutputLock {
 public:
  explicit OutputLock(const std::string& path);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string lock_path_;
  int fd_ = -1;
  bool owned_ = false;  // the running user's file: its holder line written, removed at the end
  std::unique_ptr<TempFileGuard> guard_;
};

}  // namespace cvest::io
