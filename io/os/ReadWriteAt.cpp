#include "io/os/ReadWriteAt.hpp"

#include "core/Errors.hpp"
#include "io/os/Faults.hpp"

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace cvest::io {

ssize_t pwrite_once(int fd, const void* buffer, std::size_t bytes, off_t at) {
  ssize_t put = ::pwrite(fd, buffer, bytes, at);
  if (fault_injected("write")) put = -1, errno = ENOSPC;
  if (fault_injected("write_eio")) put = -1, errno = EIO;
  return put;
}

void throw_write_failed(ssize_t put, const std::string& shown) {
  throw IoError(shown + ": write failed: " + std::string(put == 0 ? "no progress" : std::strerror(errno)) +
                (errno == ENOSPC ? " (disk full)" : ""));
}

void write_at(int fd, const void* buffer, std::size_t bytes, off_t at, const std::string& shown) {
  const auto* in = static_cast<const char*>(buffer);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t put = pwrite_once(fd, in + done, bytes - done, at + off_t(done));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) throw_write_failed(put, shown);
    done += std::size_t(put);
  }
}

void read_at(int fd, void* buffer, std::size_t bytes, off_t at, const std::string& shown) {
  auto* out = static_cast<char*>(buffer);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t got = ::pread(fd, out + done, bytes - done, at + off_t(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw IoError(shown + ": read at byte " + std::to_string(at + off_t(done)) + " failed: " +
                    (got == 0 ? std::string("file is truncated") : std::string(std::strerror(errno))));
    done += std::size_t(got);
  }
}

}  // namespace cvest::io
