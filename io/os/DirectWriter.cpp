#include "io/os/DirectWriter.hpp"


#include "core/Errors.hpp"
#include "io/os/ReadWriteAt.hpp"
#include "io/os/Faults.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>

namespace cvest::io {

std::size_t direct_write_memory(std::size_t budget_bytes) {
  return std::min(budget_bytes / 8, std::size_t(32) << 20);
}

// What a direct write moves at a time from an aligned copy: large enough
// that one thread's synchronous writes keep the device busy (8 MiB where the
// budget allows; docs/benchmarks.md), at least a page.
std::size_t direct_copy_bytes(std::size_t memory_bytes) {
  return std::max(direct_alignment, memory_bytes / max_direct_lanes / direct_alignment * direct_alignment);
}

double writeback_threshold_bytes() {
  if (const long bytes = fault_value("writeback_threshold"); bytes >= 0) return double(bytes);
  if (fault_injected("direct_refused")) return 0;
  const auto read_number = [](const char* path) {
    std::FILE* f = std::fopen(path, "r");
    double v = -1;
    if (f && std::fscanf(f, "%lf", &v) != 1) v = -1;
    if (f) std::fclose(f);
    return v;
  };
  if (const double bytes = read_number("/proc/sys/vm/dirty_background_bytes"); bytes > 0) return bytes;
  const double ratio = read_number("/proc/sys/vm/dirty_background_ratio");
  double available_kib = -1;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %lf kB", &available_kib) == 1) break;
    std::fclose(f);
  }
  return ratio > 0 && available_kib > 0 ? ratio / 100 * available_kib * 1024 : 0;  // unknown: direct
}


DirectWriter::DirectWriter(int fd, DirectMode mode, const std::string& shown, const std::string& off_because,
                           std::size_t memory)
    : fd_(fd), mode_(mode), shown_(shown),
      copies_(max_direct_lanes, direct_copy_bytes(memory), direct_alignment, shown + ": a direct write's aligned copy") {
  if (mode == DirectMode::automatic) chosen_because_ = off_because;
  if (mode == DirectMode::off) {
    why_buffered_ = off_because.empty() ? "[output] direct = false" : off_because;
    return;
  }
  direct_fd_ = reopen_direct(fd, O_WRONLY);
  if (direct_fd_ >= 0) return;
  why_buffered_ = why_not_direct(fd, errno);
  if (mode == DirectMode::on)
    throw IoError(shown + ": [output] direct = true, but " + why_buffered_ +
                  "; set direct = \"auto\" (the default) to write through the page cache there");
}

DirectWriter::~DirectWriter() {
  {
    const std::lock_guard lock(lanes_m_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : lanes_) t.join();
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

std::string DirectWriter::why_buffered() const {
  const std::lock_guard lock(why_m_);
  return why_buffered_;
}

std::string DirectWriter::text() const {
  const double all = double(direct_bytes() + buffered_bytes());
  if (direct_fd_ < 0 || (refused_.load() && direct_bytes() == 0)) return "through the page cache: " + why_buffered();
  std::string text = fmt::format("past the page cache (O_DIRECT, {}-byte aligned", direct_alignment);
  if (all > 0) text += fmt::format("; {:.1f}% of the bytes", 100.0 * double(direct_bytes()) / all);
  text += ")";
  if (!chosen_because_.empty()) text += ": " + chosen_because_;
  if (refused_.load()) text += ", then through it: " + why_buffered();
  return text;
}

void DirectWriter::write(const void* buffer, std::size_t bytes, off_t at) {
  const auto* in = static_cast<const char*>(buffer);
  const off_t end = at + off_t(bytes), middle = align_up(at), tail = align_down(end);
  if (!direct() || tail <= middle) {
    write_at(fd_, in, bytes, at, shown_);
    buffered_bytes_ += bytes;
    return;
  }
  // Head and tail share pages with the neighbouring chunks' own heads and
  // tails (or HDF5's metadata): buffered, as those are.
  if (middle > at) write_at(fd_, in, std::size_t(middle - at), at, shown_);
  write_direct(in + (middle - at), std::size_t(tail - middle), middle);
  if (end > tail) write_at(fd_, in + (tail - at), std::size_t(end - tail), tail, shown_);
  buffered_bytes_ += std::uint64_t(bytes) - std::uint64_t(tail - middle);
}

std::size_t DirectWriter::copy_memory() const {
  return copies_.held();
}

std::size_t DirectWriter::lanes() const {
  const std::lock_guard lock(lanes_m_);
  return lanes_.size();
}

std::size_t DirectWriter::start_lanes() {
  const std::lock_guard lock(lanes_m_);
  if (lanes_started_) return lanes_.size();
  lanes_started_ = true;
  // A thread that cannot be started (ulimit -u, a cgroup's pids.max) is a
  // lane fewer: the caller writes that part itself.
  try {
    while (lanes_.size() + 1 < max_direct_lanes) lanes_.emplace_back([this] { lane(); });
  } catch (const std::system_error&) {
  }
  return lanes_.size();
}

void DirectWriter::lane() {
  std::unique_lock lock(lanes_m_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const Piece piece = queue_.front();
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      write_direct_lane(piece.in, piece.bytes, piece.at);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !piece.batch->error) piece.batch->error = error;
    if (--piece.batch->left == 0) done_.notify_all();
  }
}

void DirectWriter::write_direct(const char* in, std::size_t bytes, off_t at) {
  // A few writes in flight at once: one synchronous direct write at a time
  // left the device idle between them (1.6 GB: 2.88-2.96 s in one lane,
  // 2.29-2.57 s in four, 2.28-2.44 s in eight).
  const std::size_t pieces = std::clamp<std::size_t>(bytes / (std::size_t(2) << 20), 1, max_direct_lanes);
  if (pieces == 1 || start_lanes() == 0) return write_direct_lane(in, bytes, at);
  const std::size_t share = (bytes / pieces + direct_alignment - 1) / direct_alignment * direct_alignment;
  Batch batch;
  {
    const std::lock_guard lock(lanes_m_);
    for (std::size_t p = 1; p < pieces; ++p) {
      const std::size_t begin = std::min(bytes, p * share), end = p + 1 == pieces ? bytes : std::min(bytes, (p + 1) * share);
      if (end <= begin) continue;
      queue_.push_back({in + begin, end - begin, at + off_t(begin), &batch});
      ++batch.left;
    }
  }
  work_.notify_all();
  std::exception_ptr mine;
  try {
    write_direct_lane(in, std::min(bytes, share), at);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock lock(lanes_m_);
  done_.wait(lock, [&] { return batch.left == 0; });  // the pieces point into the caller's buffer
  if (mine) std::rethrow_exception(mine);
  if (batch.error) std::rethrow_exception(batch.error);
}

void DirectWriter::write_direct_lane(const char* in, std::size_t bytes, off_t at) {
  std::optional<AlignedPool::Taken> taken;  // memory not aligned as the file offset is goes through a copy
  if (!aligned(in)) taken.emplace(copies_);
  char* const copy = taken ? taken->get() : nullptr;
  for (std::size_t done = 0; done < bytes;) {
    if (!direct()) {  // refused meanwhile (another thread's write)
      write_at(fd_, in + done, bytes - done, at + off_t(done), shown_);
      buffered_bytes_ += bytes - done;
      return;
    }
    const std::size_t n = copy ? std::min(copies_.bytes(), bytes - done) : bytes - done;
    const char* from = in + done;
    if (copy) from = static_cast<const char*>(std::memcpy(copy, from, n));
    ssize_t put = pwrite_once(direct_fd_, from, n, at + off_t(done));
    if (fault_injected("direct_refused")) put = -1, errno = EINVAL;
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && errno == EINVAL) {
      refuse(file_system_of(fd_) + " refused an O_DIRECT write (" + std::strerror(EINVAL) + ")");
      continue;
    }
    if (put <= 0) throw_write_failed(put, shown_);
    done += std::size_t(put);
    direct_bytes_ += std::uint64_t(put);
  }
}

void DirectWriter::refuse(const std::string& why) {
  if (mode_ == DirectMode::on) throw IoError(shown_ + ": [output] direct = true, but " + why);
  const std::lock_guard lock(why_m_);
  if (!refused_.exchange(true)) why_buffered_ = why;
}

}  // namespace cvest::io
