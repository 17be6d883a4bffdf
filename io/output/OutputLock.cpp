#include "io/output/OutputLock.hpp"

#include "io/os/Disk.hpp"

#include "core/Errors.hpp"
#include "io/os/Faults.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/file.h>

namespace fs = std::filesystem;

namespace cvest::io {

namespace {
// Opens the lock file at `lock` for OutputLock: created new (exclusive, ours)
// or, where one is there, opened without following a link and checked to be
// a regular file. `owned`: the running user's, so its holder line may be
// written and the file removed; another user's is only locked (flock
// changes no byte of it). IoError naming what is there otherwise.
int open_lock_file(const std::string& path, const std::string& lock, bool& owned) {
  int fd = create_exclusive(lock, O_RDWR);
  if (fd >= 0) return owned = true, fd;
  if (errno == EEXIST) {
    fd = ::open(lock.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) fd = ::open(lock.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  }
  if (fd < 0 && errno == ENOENT) return -1;  // its holder removed it meanwhile: try again
  if (fd < 0 && errno == ELOOP)
    throw IoError(path + ": the lock file " + lock + " is a symbolic link, which cvest does not follow; left as it "
                         "is: remove it (someone else may have planted it), or write elsewhere");
  if (fd < 0) throw IoError(path + ": cannot create the lock file " + lock + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(path + ": the lock file " + lock + " is not a regular file; left as it is: remove it, or write "
                         "elsewhere");
  }
  owned = st.st_uid == ::geteuid();
  return fd;
}
}  // namespace

OutputLock::OutputLock(const std::string& path) {
  const fs::path p(path);
  lock_path_ = (output_dir(path) / ("." + p.filename().string() + ".lock")).string();
  bool owned = false;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 100) throw IoError(path + ": cannot take the lock " + lock_path_ + " (it keeps being replaced)");
    fd_ = open_lock_file(path, lock_path_, owned);
    if (fd_ < 0) continue;
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      if (error != EWOULDBLOCK) {  // no locks on this file system: say so, go on
        fmt::print(stderr, "cvest: warning: {}: cannot lock {} ({}): two runs writing it at once will not be told "
                           "apart until the end\n", path, lock_path_, std::strerror(error));
        ::close(fd_);
        if (owned) ::unlink(lock_path_.c_str());
        fd_ = -1;
        lock_path_.clear();
        return;
      }
      char holder[256] = {};
      const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
      ::close(fd_);
      fd_ = -1;
      std::string who(holder, std::size_t(std::max<ssize_t>(n, 0)));
      while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
      throw IoError(path + ": another cvest run is writing it (" + (who.empty() ? "a process" : who) +
                    "); wait for it to finish, or write elsewhere");
    }
    // The last holder may have removed the file between our open and lock:
    // then this lock guards nothing; take the file now at the path.
    struct stat held {}, at_path {};
    if (::fstat(fd_, &held) == 0 && ::lstat(lock_path_.c_str(), &at_path) == 0 && held.st_ino == at_path.st_ino &&
        held.st_dev == at_path.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
  }
  owned_ = owned;
  if (!owned_) return;  // another user's file: locked, never written or removed
  guard_ = std::make_unique<TempFileGuard>(lock_path_);  // a signal removes it too
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me = fmt::format("pid {} on {}\n", ::getpid(), host);
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
    // Who holds it is only for the message of a run refused; the lock holds.
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  if (owned_) ::unlink(lock_path_.c_str());  // while still locked: a run waiting on this file retries on the path
  ::close(fd_);
}

}  // namespace cvest::io
