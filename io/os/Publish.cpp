#include "io/os/Publish.hpp"

#include "core/Errors.hpp"
#include "io/os/Disk.hpp"
#include "io/os/Faults.hpp"
#include "io/os/TempFiles.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cvest::io {

namespace {

FileIdentity identity(const struct stat& st) { return {true, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)}; }

// renameat2(RENAME_EXCHANGE): both names stay taken throughout. False with
// errno where it fails (EINVAL or ENOSYS: not supported there).
bool exchange(const std::string& a, const std::string& b) {
#ifdef SYS_renameat2
  return ::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), 2u /* RENAME_EXCHANGE */) == 0;
#else
  errno = ENOSYS;
  return false;
#endif
}

const char* const discarded = "; left as it is, this run's result discarded";

IoError replaced(const std::string& path) {
  return IoError(path + ": was replaced by another process while this run wrote its output" + discarded);
}
IoError appeared(const std::string& path) {
  return IoError(path + ": appeared while this run wrote its output (another process wrote it)" + discarded);
}
IoError refused(const std::string& path, int error) {
  const std::string why = replace_refusal(path);
  return IoError(path + ": cannot be replaced: " + (why.empty() ? std::string(std::strerror(error)) : why) + discarded);
}

// A file another process put at `path` meanwhile, exchanged onto `temp`,
// could not be given its name back: moved to a name of its own beside it,
// so that this run's cleanup of `temp` never removes it.
[[noreturn]] void keep_theirs(const std::string& temp, const std::string& path) {
  const std::string kept = path + ".kept-" + std::to_string(::getpid());
  const bool moved = rename_without_replacing(temp, kept);
  throw IoError(path + ": was replaced by another process while this run wrote its output, and its file could not be "
                "put back: it is at " + (moved ? kept : temp) + discarded);
}

// Step 2: `temp` takes `path`. True where it was exchanged with the file
// found there, which is then at `temp`.
bool put_in_place(const std::string& temp, const std::string& path, const Replacing& replacing) {
  struct stat st {};
  const FileIdentity now = FileIdentity::at(path);
  if (now.exists) {
    if (!replacing.overwrite || !replacing.found.exists) throw appeared(path);
    if (now != replacing.found) throw replaced(path);
    // A folder there is never exchanged (it would be moved aside whole).
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
      throw IoError(path + ": is " + (S_ISDIR(st.st_mode) ? "a directory" : "not a regular file") + discarded);
    const bool exchanged = fault_injected("no_exchange") ? (errno = EINVAL, false) : exchange(temp, path);
    if (exchanged) {
      if (FileIdentity::at(temp) == replacing.found) return true;
      // Another process put a file there between the look and the exchange:
      // it gets its name back.
      if (!exchange(temp, path)) keep_theirs(temp, path);
      throw replaced(path);
    }
    // No exchange here (EINVAL, ENOSYS: the file system or kernel lacks it;
    // EOPNOTSUPP: some FUSE and network file systems; EPERM: a sandbox's
    // syscall filter, or a rename the folder refuses, which rename reports
    // too): a rename over the file just checked. ENOENT: gone meanwhile.
    const int error = errno;
    if (error != EINVAL && error != ENOSYS && error != EOPNOTSUPP && error != EPERM && error != ENOENT)
      throw refused(path, error);
    if (error != ENOENT) {
      if (::rename(temp.c_str(), path.c_str()) != 0) throw refused(path, errno);
      return false;
    }
  }
  if (!rename_without_replacing(temp, path)) {
    if (errno == EEXIST) throw appeared(path);
    throw refused(path, errno);
  }
  return false;
}

}  // namespace

void sync_folder(const std::string& dir, const std::string& shown) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw IoError(shown + ": cannot open its folder " + dir + " to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  // EINVAL: a file system whose folders take no fsync (their names are
  // synchronous, or never persistent).
  if (rc != 0 && error != EINVAL) throw IoError(shown + ": syncing its folder failed: " + std::strerror(error));
}

void sync_made(const std::string& temp, const FileIdentity& made, const std::string& shown, int fd) {
  std::string why;
  const int own = fd >= 0 ? fd : open_own_file(temp, O_RDONLY, why);
  if (own < 0) throw IoError(shown + ": the finished file " + temp + " is " + why + discarded);
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{fd >= 0 ? -1 : own};
  struct stat held {}, named {};
  if (::fstat(own, &held) != 0 || ::lstat(temp.c_str(), &named) != 0 || identity(held) != made ||
      identity(named) != made)
    throw IoError(shown + ": " + temp + " is not the file this run wrote (replaced by another process?)" + discarded);
  // Never retried: a failed fsync may have dropped the pages it could not
  // write, and a second one would report success. The fault fails the first
  // only, as the kernel does, so a retry would be caught (cli.resume_faults).
  static std::atomic<bool> fault_spent{false};
  const int rc = fault_injected("fsync") && !fault_spent.exchange(true) ? (errno = EIO, -1) : ::fsync(own);
  if (rc != 0) throw IoError(shown + ": sync failed: " + std::strerror(errno));
}

void publish(const std::string& temp, const FileIdentity& made, const std::string& path, const Replacing& replacing,
             const std::string& what, const std::string& shown, int fd, const std::function<void()>& renamed) {
  sync_made(temp, made, shown, fd);
  stop_if_injected(what + ".synced");
  const bool exchanged = put_in_place(temp, path, replacing);
  if (renamed) renamed();
  // Only our temporary name was checked: in a folder others may write, the
  // file could have been swapped there before the rename.
  if (FileIdentity::at(path) != made)
    throw IoError(shown + ": the file now at " + path + " is not the one this run wrote (" + temp +
                  " was replaced by another process before it was renamed); check it");
  stop_if_injected(what + ".renamed");
  sync_folder(output_dir(path).string(), shown);
  stop_if_injected(what + ".done");
  if (exchanged) ::unlink(temp.c_str());  // the replaced file, now at the temporary name
}

}  // namespace cvest::io
