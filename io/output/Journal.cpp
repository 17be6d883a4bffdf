#include "io/output/Journal.hpp"

#include "core/Errors.hpp"
#include "core/Threads.hpp"
#include "io/os/Disk.hpp"
#include "io/os/Faults.hpp"
#include "io/os/Publish.hpp"
#include "io/os/TempFiles.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cvest::io {

namespace {

constexpr char magic[] = "cvest resume journal 1\n";

struct Record {
  std::int64_t t0, t1, i0, i1;
  std::uint64_t check;
};
static_assert(sizeof(Record) == Journal::record_bytes);

std::uint64_t checksum(const Record& r) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull;  // FNV-style mix of the four fields
  for (const std::int64_t v : {r.t0, r.t1, r.i0, r.i1}) h = (h ^ std::uint64_t(v)) * 0x100000001b3ull + (h >> 29);
  return h;
}

void write_all(int fd, const void* data, std::size_t n, const std::string& path) {
  for (std::size_t done = 0; done < n;) {
    const ssize_t put = ::write(fd, static_cast<const char*>(data) + done, n - done);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) throw IoError(path + ": write failed: " + std::strerror(errno));
    done += std::size_t(put);
  }
}

// The header: the magic line, then "key=value" lines, then an empty line.
std::string header(const Fingerprint& fingerprint) {
  std::string text = magic;
  for (const auto& [key, value] : fingerprint) text += key + "=" + value + "\n";
  return text + "\n";
}

// The header field naming the output's temporary file: device and inode,
// which its rename on resuming keeps.
std::string identity_of(const struct stat& st) {
  return "device " + std::to_string(std::uint64_t(st.st_dev)) + ", inode " + std::to_string(std::uint64_t(st.st_ino));
}
constexpr char temporary_field[] = "temporary";

void sync_or_throw(int fd, const std::string& path) {
  // An fsync error is never retried: the pages it failed on may be gone, and
  // a second fsync would report success.
  if (::fdatasync(fd) != 0) throw IoError(path + ": sync failed: " + std::strerror(errno));
}

// Writes `text` to PATH.new (created exclusively, never through a link;
// removed by a signal meanwhile), syncs it, moves it onto the free name
// `path` and syncs the folder: the file is either absent or complete.
// Returns its descriptor, at the text's end; IoError naming `what` ("the
// resume journal", "the output's seal"), nothing left behind.
int create_whole(const std::string& path, const std::string& text, const std::string& what) {
  const std::string temp = path + ".new";
  const TempFileGuard guard(temp);
  const int fd = create_exclusive(temp, O_WRONLY);
  if (fd < 0) throw IoError(path + ": cannot create " + what + " " + temp + ": " + std::strerror(errno));
  bool renamed = false;
  try {
    write_all(fd, text.data(), text.size(), path);
    sync_or_throw(fd, path);
    if (!rename_without_replacing(temp, path))
      throw IoError(path + ": cannot move " + what + " into place: " + std::strerror(errno));
    renamed = true;
    sync_folder(output_dir(path).string(), path);
  } catch (...) {
    ::close(fd);
    ::unlink((renamed ? path : temp).c_str());
    throw;
  }
  return fd;
}

}  // namespace

Journal::Journal(const std::string& path, const std::string& data_path, const Fingerprint& fingerprint,
                 const std::vector<Block>& done, std::size_t batch_bytes, double batch_seconds, double sync_share)
    : path_(path), data_path_(data_path), batch_bytes_(batch_bytes), batch_seconds_(batch_seconds),
      sync_share_(sync_share) {
  std::string why;
  data_fd_ = open_own_file(data_path, O_WRONLY, why);
  if (data_fd_ < 0) throw IoError(path + ": cannot open the output " + data_path + " to sync it: it is " + why);
  struct stat data {};
  if (::fstat(data_fd_, &data) != 0) {
    ::close(data_fd_);
    throw IoError(data_path + ": cannot stat: " + std::strerror(errno));
  }
  Fingerprint named = fingerprint;
  named[temporary_field] = identity_of(data);
  // Written whole (create_whole): its header, then the blocks it takes
  // over. Both names are new (the temporary file's own is random): one
  // taken is refused, never followed or replaced.
  std::string text = header(named);
  header_bytes_ = static_cast<long long>(text.size());
  for (const Block& b : done) {
    Record r{b.dates.begin, b.dates.end, b.ids.begin, b.ids.end, 0};
    r.check = checksum(r);
    text.append(reinterpret_cast<const char*>(&r), sizeof r);
  }
  try {
    fd_ = create_whole(path, text, "the resume journal");
  } catch (...) {
    ::close(data_fd_);
    throw;
  }
  // Records are appended through the same descriptor, now at the header's end.
  try {
    start_syncer();
  } catch (...) {
    ::close(fd_);
    ::close(data_fd_);
    fd_ = data_fd_ = -1;
    ::unlink(path.c_str());
    throw;
  }
}

void Journal::start_syncer() {
  syncer_ = start_thread("the resume journal's thread", [this] {
    using Clock = std::chrono::steady_clock;
    std::unique_lock lock(pending_m_);
    const Clock::time_point started = Clock::now();
    Clock::time_point paused_until = started;
    const auto since = [&](Clock::time_point t) { return std::chrono::duration<double>(t - started).count(); };
    while (!stopping_) {  // a batch when it is full, or a second (batch_seconds) after the last
      wake_.wait_for(lock, std::chrono::duration<double>(batch_seconds_),
                     [&] { return stopping_ || pending_bytes_ >= batch_bytes_; });
      if (stopping_) break;
      if (pending_.empty()) continue;
      if (wake_.wait_until(lock, paused_until, [&] { return stopping_; })) break;
      lock.unlock();
      const Clock::time_point begin = Clock::now();
      try {
        sync();
      } catch (const std::exception& e) {
        lock.lock();
        failed_ = e.what();
        break;
      }
      const Clock::time_point end = Clock::now();
      const double took = std::chrono::duration<double>(end - begin).count();
      paused_until = end + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(pause_after(took, sync_share_)));
      lock.lock();
      batch_times_.push_back({since(begin), since(end)});
    }
  });
}

Journal::~Journal() {
  try {
    close();
  } catch (...) {  // a failed sync here was reported, or the run is failing anyway
  }
  if (fd_ >= 0) ::close(fd_);
  if (data_fd_ >= 0) ::close(data_fd_);
}

void Journal::close() {
  {
    const std::lock_guard lock(pending_m_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (syncer_.joinable()) syncer_.join();
  const std::lock_guard lock(pending_m_);
  if (!failed_.empty()) throw IoError(failed_);
}

std::string Journal::text() const {
  const bool paced = sync_share_ > 0 && sync_share_ < 1;
  return fmt::format("journal: {} batch{} synced ({:.2f} s of syncs, {})", syncs(), syncs() == 1 ? "" : "es",
                     sync_seconds(), paced ? fmt::format("paced to ~{:.0f}% of the time", 100 * sync_share_)
                                           : std::string("not paced"));
}

double Journal::sync_seconds() const {
  const std::lock_guard lock(pending_m_);
  double seconds = 0;
  for (const Span& s : batch_times_) seconds += s.end - s.begin;
  return seconds;
}

std::vector<Journal::Span> Journal::batch_times() const {
  const std::lock_guard lock(pending_m_);
  return batch_times_;
}

void Journal::written(const Block& block, std::size_t bytes) {
  const std::lock_guard lock(pending_m_);
  if (!failed_.empty()) throw IoError(failed_);
  pending_.push_back(block);
  const bool was_full = pending_bytes_ >= batch_bytes_;  // its thread was woken then (and may be pausing)
  pending_bytes_ += bytes;
  static const long kill_after = fault_value("kill_after_blocks");
  if (++written_count_ == kill_after) {
    const std::lock_guard appending(append_m_);  // no batch half-recorded: the count below is what is on disk
    std::fprintf(stderr, "cvest: fault: killed after %ld blocks written, %ld recorded\n", kill_after, recorded_.load());
    ::raise(SIGKILL);
  }
  if (!was_full && pending_bytes_ >= batch_bytes_) wake_.notify_one();
}

void Journal::sync() {
  std::vector<Block> batch;
  {
    const std::lock_guard lock(pending_m_);
    batch.swap(pending_);
    pending_bytes_ = 0;
  }
  if (batch.empty()) return;
  // One batch at a time, in order: data, then the records of that data.
  const std::lock_guard lock(append_m_);
  sync_or_throw(data_fd_, data_path_);
  if (fault_injected("kill_before_journal")) ::raise(SIGKILL);
  std::vector<Record> records;
  for (const Block& b : batch) {
    Record r{b.dates.begin, b.dates.end, b.ids.begin, b.ids.end, 0};
    r.check = checksum(r);
    records.push_back(r);
  }
  write_all(fd_, records.data(), records.size() * sizeof(Record), path_);
  sync_or_throw(fd_, path_);
  ++syncs_;
  recorded_ += long(records.size());
  stop_if_injected("output.recorded");
}

namespace {
constexpr char state_field[] = "state";
// A seal's header fields: the job's, and its state.
Fingerprint sealed_state(const Fingerprint& fingerprint) {
  Fingerprint sealed = fingerprint;
  sealed[state_field] = "sealed";
  return sealed;
}
}  // namespace

void Journal::seal(const std::string& path, const std::string& data_path, const Fingerprint& fingerprint) {
  std::string why;
  const int data_fd = open_own_file(data_path, O_RDONLY, why);
  struct stat data {};
  const bool ok = data_fd >= 0 && ::fstat(data_fd, &data) == 0;
  if (data_fd >= 0) ::close(data_fd);
  if (!ok) throw IoError(path + ": cannot seal " + data_path + ": it is " + (why.empty() ? "unreadable" : why));
  // Whole or not at all, as a journal: a seal cut short by a signal would
  // claim a file the next run cannot take.
  Fingerprint named = sealed_state(fingerprint);
  named[temporary_field] = identity_of(data);  // as a journal names its file
  ::close(create_whole(path, header(named), "the output's seal"));
}

bool Journal::sealed(const std::string& path, const std::string& data_path, const Fingerprint& fingerprint,
                     std::string& why_not) {
  return read(path, data_path, sealed_state(fingerprint), why_not).has_value();
}

std::optional<std::vector<Block>> Journal::read(const std::string& path, const std::string& data_path,
                                                const Fingerprint& fingerprint, std::string& why_not) {
  std::string why;
  const int fd = open_own_file(path, O_RDONLY, why);
  if (fd < 0) return why_not = "its journal " + path + " is " + why, std::nullopt;
  struct stat data {};
  if (::lstat(data_path.c_str(), &data) != 0) {
    ::close(fd);
    return why_not = "it is gone", std::nullopt;
  }
  Fingerprint named = fingerprint;
  named[temporary_field] = identity_of(data);
  std::string bytes;
  char buffer[1 << 16];
  for (ssize_t got; (got = ::read(fd, buffer, sizeof buffer)) > 0;) bytes.append(buffer, std::size_t(got));
  ::close(fd);
  const std::string expected = header(named);
  if (bytes.compare(0, std::strlen(magic), magic) != 0) return why_not = "not a cvest journal", std::nullopt;
  const std::size_t end = bytes.find("\n\n");
  if (end == std::string::npos) return why_not = "its journal is cut short", std::nullopt;
  if (bytes.compare(0, end + 2, expected) != 0) {
    // Name the first field that differs.
    Fingerprint found;
    for (std::size_t at = std::strlen(magic); at < end + 1;) {
      const std::size_t line_end = bytes.find('\n', at), eq = bytes.find('=', at);
      if (eq < line_end) found[bytes.substr(at, eq - at)] = bytes.substr(eq + 1, line_end - eq - 1);
      at = line_end + 1;
    }
    if (found[temporary_field] != named[temporary_field])
      return why_not = "its journal names another file (" + found[temporary_field] + ", not " +
                       named[temporary_field] + ")", std::nullopt;
    for (const auto& [key, value] : named)
      if (found[key] != value)
        return why_not = key + " changed (" + (found[key].empty() ? "none" : found[key]) + " then, " + value + " now)",
               std::nullopt;
    return why_not = "its journal records another job", std::nullopt;
  }
  std::vector<Block> done;
  for (std::size_t at = end + 2; at + sizeof(Record) <= bytes.size(); at += sizeof(Record)) {
    Record r;
    std::memcpy(&r, bytes.data() + at, sizeof r);
    if (r.check != checksum(r)) break;  // damaged from here on: those blocks are written again
    done.push_back({{r.t0, r.t1}, {r.i0, r.i1}});
  }
  return done;
}

}  // namespace cvest::io
