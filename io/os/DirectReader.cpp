#include "io/os/DirectReader.hpp"

#include "core/Errors.hpp"
#include "io/os/ReadWriteAt.hpp"
#include "io/os/DirectIo.hpp"
#include "io/os/Faults.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace cvest::io {

namespace {


// The share of the file's pages the page cache holds: cachestat (Linux
// 6.5) where there is one, else mincore on a mapping never touched, which
// answers only for files this user owns or may write (for others it says
// every page is held); -1 where it cannot be told.
double cached_share(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) return -1;
  const std::size_t bytes = std::size_t(st.st_size), page = std::size_t(::sysconf(_SC_PAGESIZE));
#if defined(SYS_cachestat) || (defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__)))
#ifdef SYS_cachestat
  constexpr long cachestat_call = SYS_cachestat;
#else
  constexpr long cachestat_call = 451;  // x86_64 and aarch64 (Linux 6.5), where the C library does not name it yet
#endif
  struct {
    std::uint64_t off, len;
  } range{0, 0};  // to the end of the file
  struct {
    std::uint64_t cache, dirty, writeback, evicted, recently_evicted;
  } counts{};
  if (::syscall(cachestat_call, fd, &range, &counts, 0) == 0)  // else ENOSYS (older kernels): mincore
    return std::min(1.0, double(counts.cache) / double((bytes + page - 1) / page));
#endif
  if (st.st_uid != ::geteuid() && ::faccessat(AT_FDCWD, ("/proc/self/fd/" + std::to_string(fd)).c_str(), W_OK, 0) != 0)
    return -1;
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return -1;
  std::vector<unsigned char> held((bytes + page - 1) / page);
  std::size_t in = 0;
  const bool told = ::mincore(map, bytes, held.data()) == 0;
  if (told)
    for (unsigned char h : held) in += h & 1;
  ::munmap(map, bytes);
  return told ? double(in) / double(held.size()) : -1;
}

}  // namespace

DirectReader::DirectReader(int fd, DirectMode mode, const std::string& shown, const std::string& because)
    : fd_(fd), mode_(mode), shown_(shown), because_(because),
      pieces_(direct_read_buffers, direct_read_piece, direct_alignment, shown + ": a direct read's aligned buffer") {
  if (mode == DirectMode::off) {
    why_buffered_ = because.empty() ? "[input] direct = false" : because;
    return;
  }
  direct_fd_ = fault_injected("direct_refused") ? (errno = EINVAL, -1) : reopen_direct(fd, O_RDONLY);
  if (direct_fd_ < 0) {
    why_buffered_ = why_not_direct(fd, errno);
    if (mode == DirectMode::on)
      throw IoError(shown + ": [input] direct = true, but " + why_buffered_ +
                    "; set direct = \"auto\" (the default) to read through the page cache there");
    return;
  }
  // An input the page cache holds (just generated, or read again) is read
  // from it whole. Deciding per range instead let read-ahead from the
  // cached ranges (its marks left by other descriptors of the file) cache
  // the next ones, until 94-99% of a cold input went through the cache.
  if (mode == DirectMode::automatic) {
    double held = -1;
    try {
      held = cached_share(fd);
    } catch (...) {  // out of memory for mincore's answer: the descriptor not left open
      ::close(direct_fd_);
      throw;
    }
    if (held >= 0.5) {
      ::close(direct_fd_);
      direct_fd_ = -1;
      why_buffered_ = fmt::format("the page cache held {:.0f}% of the file when it was opened", 100 * held);
    } else if (held < 0) {
      because_ += std::string(because_.empty() ? "" : "; ") + "what the page cache held of it could not be told";
    }
  }
}

DirectReader::~DirectReader() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

std::string DirectReader::text() const {
  const double all = double(direct_bytes() + buffered_bytes());
  if (direct_fd_ < 0 || (refused_.load() && direct_bytes() == 0)) {
    const std::lock_guard lock(why_m_);
    return "through the page cache: " + why_buffered_;
  }
  std::string text = "past the page cache (O_DIRECT";
  if (all > 0) text += fmt::format("; {:.1f}% of the bytes", 100.0 * double(direct_bytes()) / all);
  text += ")";
  if (!because_.empty()) text += ": " + because_;
  if (refused_.load()) {
    const std::lock_guard lock(why_m_);
    text += ", then through it: " + why_buffered_;
  }
  return text;
}

void DirectReader::read(void* buffer, std::size_t bytes, off_t at) {
  if (bytes == 0) return;
  auto* out = static_cast<char*>(buffer);
  if (!direct()) {
    read_at(fd_, out, bytes, at, shown_);
    buffered_bytes_ += bytes;
    return;
  }
  read_direct(out, bytes, at);
}

void DirectReader::read_direct(char* out, std::size_t bytes, off_t at) {
  const off_t end = at + off_t(bytes);
  // Memory aligned as the file offset is: the whole pages in the middle go
  // straight into it, the partial pages at either end through the buffer.
  off_t done = at;
  if ((reinterpret_cast<std::uintptr_t>(out) - std::uintptr_t(at)) % direct_alignment == 0) {
    const off_t middle = align_up(at), tail = align_down(end);
    if (tail > middle) {
      if (middle > at) read_direct(out, std::size_t(middle - at), at);  // the head: one piece
      if (!read_aligned(out + (middle - at), middle, tail, tail)) {
        read_at(fd_, out + (middle - at), std::size_t(end - middle), middle, shown_);
        buffered_bytes_ += std::uint64_t(end - middle);
        return;
      }
      direct_bytes_ += std::uint64_t(tail - middle);
      done = tail;
    }
  }
  if (done >= end) return;
  const AlignedPool::Taken taken(pieces_);
  char* const piece = taken.get();
  while (done < end) {
    const off_t from = align_down(done), to = std::min(align_up(end), from + off_t(direct_read_piece));
    const off_t need = std::min(end, to);
    if (!read_aligned(piece, from, to, need)) {
      read_at(fd_, out + (done - at), std::size_t(end - done), done, shown_);
      buffered_bytes_ += std::uint64_t(end - done);
      return;
    }
    std::memcpy(out + (done - at), piece + (done - from), std::size_t(need - done));
    direct_bytes_ += std::uint64_t(need - done);
    done = need;
  }
}

bool DirectReader::read_aligned(char* into, off_t from, off_t to, off_t need_to) {
  for (off_t at = from; at < need_to;) {
    if (!direct()) return false;  // refused meanwhile (another thread's read)
    ssize_t got = ::pread(direct_fd_, into + (at - from), std::size_t(to - at), at);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EINVAL) {
      refuse(file_system_of(fd_) + " refused an O_DIRECT read (" + std::strerror(EINVAL) + ")");
      return false;
    }
    if (got <= 0)
      throw IoError(shown_ + ": read at byte " + std::to_string(at) + " failed: " +
                    (got == 0 ? std::string("file is truncated") : std::string(std::strerror(errno))));
    at += off_t(got);
    // A short read ends the file (or stops mid-page): the rest, if any is
    // needed, is read through the cache from where it stopped.
    if (at < need_to && at % off_t(direct_alignment) != 0) {
      read_at(fd_, into + (at - from), std::size_t(need_to - at), at, shown_);
      return true;
    }
  }
  return true;
}

void DirectReader::refuse(const std::string& why) {
  if (mode_ == DirectMode::on) throw IoError(shown_ + ": [input] direct = true, but " + why);
  const std::lock_guard lock(why_m_);
  if (!refused_.exchange(true)) why_buffered_ = why;
}

}  // namespace cvest::io
