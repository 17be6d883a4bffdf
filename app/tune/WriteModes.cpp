#include "app/tune/WriteModes.hpp"

#include "core/Errors.hpp"
#include "core/Median.hpp"
#include "core/Spaces.hpp"
#include "io/os/DirectReader.hpp"
#include "io/os/DeviceIdle.hpp"
#include "io/os/DirectWriter.hpp"
#include "io/os/Disk.hpp"
#include "io/os/Faults.hpp"
#include "io/os/TempFiles.hpp"
#include "app/tune/RecordFile.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace cvest::app {

namespace {

std::string first_line_of(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\n')) line.pop_back();
  return line;
}

// The block device's /sys/dev/block entry of a folder's file system (its
// partition's where it is one), and "MAJ:MIN".
std::string device_number(const std::string& folder) {
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) return "";
  return fmt::format("{}:{}", major(st.st_dev), minor(st.st_dev));
}

std::string device_name(const std::string& number) {
  std::error_code ec;
  const auto target = std::filesystem::read_symlink("/sys/dev/block/" + number, ec);
  if (ec) return "no block device";
  std::string name = target.filename().string();
  // A partition's model is its disk's: the parent folder in sysfs.
  for (const auto& base : {std::filesystem::path("/sys/dev/block/" + number),
                           std::filesystem::path("/sys/dev/block/" + number) / ".."})
    if (const std::string model = first_line_of((base / "device" / "model").string()); !model.empty())
      return name + " " + model;
  return name;
}

// What a fair pass starts from: nothing of the last one still being written
// or trimmed (a file just removed has its blocks discarded for seconds after,
// with no request counted in flight): synced, then the device's busy time
// unchanged for half a second (at most 30 s; io/os/DeviceIdle.hpp).
void wait_until_idle_number(const std::string& number) {
  if (const char* skip = std::getenv("CVEST_TUNE_NO_WAIT"); skip && *skip) return;  // unit tests: shapes, not timings
  ::sync();
  io::wait_until_steady([&] { return io::busy_ms(number); });
}

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// One pass: a new file of `bytes` in `folder`, written in pieces of the
// buffer, synced, closed; seconds until then. The file is removed after.
double write_pass(const std::string& folder, double bytes, bool direct, const char* buffer, std::size_t piece) {
  const std::string path = (std::filesystem::path(folder) / "cvest-tune.bin").string();
  std::string temp = io::temp_path_for(path);
  io::TempFileGuard guard(temp);
  const auto start = std::chrono::steady_clock::now();
  const int fd = io::create_exclusive_temp(path, temp, guard);
  if (fd < 0) throw IoError(folder + ": cannot create a file to measure writes: " + std::strerror(errno));
  int out = fd;
  if (direct) {
    out = io::reopen_direct(fd, O_WRONLY);
    if (out < 0) {
      const int error = errno;
      const std::string why = io::why_not_direct(fd, error);
      ::close(fd);
      ::unlink(temp.c_str());
      throw IoError(folder + ": " + why +
                    (error == EINVAL ? " (auto writes through the page cache there already)" : ""));
    }
  }
  bool ok = true;
  int error = 0;
  for (double at = 0; ok && at < bytes;) {
    const std::size_t n = std::size_t(std::min(double(piece), bytes - at));
    const ssize_t put = ::pwrite(out, buffer, n, off_t(at));
    if (put < 0 && errno == EINTR) continue;
    ok = put > 0;
    if (!ok) error = put < 0 ? errno : ENOSPC;
    else at += double(put);  // a short write goes on from where it stopped
  }
  if (ok && ::fsync(fd) != 0) ok = false, error = errno;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (out != fd) ::close(out);
  ::close(fd);
  ::unlink(temp.c_str());
  if (!ok) throw IoError(folder + ": writing a file to measure writes failed: " + std::strerror(error));
  return seconds;
}

// The record `auto` of `key` takes for `folder`; a damaged record file
// warned of once per key (`said`), the stated default taken then.
std::optional<WriteModeRecord> record_for_auto(const std::string& folder, const char* key, std::atomic<bool>& said) {
  std::string problem;
  auto record = write_mode_record_for(folder, problem);
  if (!problem.empty() && !said.exchange(true))
    fmt::print(stderr, "cvest: warning: {}; {} = \"auto\" takes its stated default\n", problem, key);
  return record;
}

std::string range_text(const std::vector<double>& v) {
  return v.empty() ? std::string("-")
                   : fmt::format("{:.2f}-{:.2f}", *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
}

}  // namespace

void wait_until_idle(const std::string& folder) {
  wait_until_idle_number(device_number(io::existing_ancestor(folder).string()));
}

bool WriteModeRecord::direct() const { return median(direct_s) < median(buffered_s); }
bool WriteModeRecord::read_direct() const {
  return reads_measured() && median(read_direct_s) < median(read_buffered_s);
}

std::string WriteModeRecord::read_text() const {
  if (!reads_measured()) return "reads not measured on this file system (cvest tune measures them)";
  return fmt::format("reads measured on this file system on {}: cvest runs with the input past the page cache {:.2f} s, "
                     "through it {:.2f} s per {:.2f} GB not cached (medians of {}; {} and {})",
                     date, median(read_direct_s), median(read_buffered_s), bytes / 1e9, read_direct_s.size(),
                     range_text(read_direct_s), range_text(read_buffered_s));
}

std::string WriteModeRecord::text() const {
  return fmt::format("measured on this file system on {}: past the page cache {:.2f} s, through it {:.2f} s per "
                     "{:.2f} GB (medians of {}; {} and {})",
                     date, median(direct_s), median(buffered_s), bytes / 1e9, direct_s.size(), range_text(direct_s),
                     range_text(buffered_s));
}

DirectMode choose_direct_reads(DirectMode mode, std::string& because, const std::string& folder) {
  if (mode != DirectMode::automatic) return mode;
  static std::atomic<bool> said{false};
  const auto record = folder.empty() || io::fault_injected("direct_refused") ? std::nullopt
                                                                         : record_for_auto(folder, "[input] direct", said);
  if (record && record->reads_measured()) {
    because = record->read_text();
    return record->read_direct() ? mode : DirectMode::off;
  }
  because = "the stated default (cold inputs of 1.6, 6.8 and 24 GB read 1.2-1.5x faster past the page cache than "
            "through it in cvest's runs on this project's VMs; cvest tune measures this one)";
  return mode;
}

DirectMode choose_direct(DirectMode mode, double bytes, std::string& because, const std::string& folder) {
  if (mode != DirectMode::automatic) return mode;
  if (!folder.empty() && !io::fault_injected("writeback_threshold") && !io::fault_injected("direct_refused")) {
    static std::atomic<bool> said{false};
    const auto record = record_for_auto(folder, "[output] direct", said);
    if (record) {
      because = record->text();
      return record->direct() ? mode : DirectMode::off;
    }
  }
  const double threshold = io::writeback_threshold_bytes();
  if (bytes > threshold) return mode;
  because = fmt::format("the output ({:.2f} GB) fits below the page cache's write-back threshold ({:.2f} GB), "
                        "where writing through it and syncing once measured faster on another host (the stated "
                        "default; cvest tune measures this one)", bytes / 1e9, threshold / 1e9);
  return DirectMode::off;
}

std::string write_mode_key(const std::string& folder) {
  const std::string dir = io::existing_ancestor(folder.empty() ? "." : folder).string();
  const std::string number = device_number(dir);
  std::string fs;
  if (const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
    fs = io::file_system_type(fd);
    ::close(fd);
  }
  const std::string cpu = cpu_model();
  return fmt::format("cpu {}; device {} ({}); file system {}", cpu.empty() ? "unknown" : cpu, device_name(number), number,
                     fs.empty() ? "unknown" : fs);
}

std::string write_mode_records_path() { return cache_file_path("write-modes.json"); }

std::vector<WriteModeRecord> read_write_mode_records(std::string& problem) {
  return read_records<WriteModeRecord>(write_mode_records_path(), [](const nlohmann::json& r) {
    WriteModeRecord rec{r.at("key").get<std::string>(), r.at("date").get<std::string>(), r.at("bytes").get<double>(),
                        r.at("direct_seconds").get<std::vector<double>>(),
                        r.at("buffered_seconds").get<std::vector<double>>(), {}, {}};
    if (rec.direct_s.empty() || rec.buffered_s.empty() || rec.bytes <= 0)
      throw std::invalid_argument("a record without its passes");
    if (r.contains("read_direct_seconds") || r.contains("read_buffered_seconds")) {
      rec.read_direct_s = r.at("read_direct_seconds").get<std::vector<double>>();
      rec.read_buffered_s = r.at("read_buffered_seconds").get<std::vector<double>>();
      if (!rec.reads_measured()) throw std::invalid_argument("a record without its read passes");
    }
    return rec;
  }, problem);
}

std::optional<WriteModeRecord> write_mode_record_for(const std::string& folder, std::string& problem) {
  const auto records = read_write_mode_records(problem);
  const std::string key = write_mode_key(folder);
  for (const auto& r : records)
    if (r.key == key) return r;
  return std::nullopt;
}

namespace {

void save_locked(const WriteModeRecord& record) {
  std::string problem;  // a damaged file is replaced
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : with_record(read_write_mode_records(problem), record)) {
    nlohmann::json one = {{"key", r.key}, {"date", r.date}, {"bytes", r.bytes}, {"direct_seconds", r.direct_s},
                          {"buffered_seconds", r.buffered_s}, {"direct", r.direct()}};
    if (r.reads_measured()) {
      one["read_direct_seconds"] = r.read_direct_s;
      one["read_buffered_seconds"] = r.read_buffered_s;
      one["read_direct"] = r.read_direct();
    }
    j.push_back(one);
  }
  write_records(write_mode_records_path(), j, "write-mode record");
}

}  // namespace

void save_write_mode_record(const WriteModeRecord& record) {
  locked_update(write_mode_records_path(), [&] { save_locked(record); });
}

WriteModeRecord measure_write_modes(const std::string& folder, double bytes, int repeats, std::ostream& progress) {
  // What a killed tune left (as large as --size) goes first.
  io::clean_up_after_killed_runs((std::filesystem::path(folder) / "cvest-tune.bin").string());
  constexpr std::size_t piece = std::size_t(8) << 20;
  std::unique_ptr<char, AlignedFree> buffer(static_cast<char*>(std::aligned_alloc(io::direct_alignment, piece)));
  if (!buffer) throw IoError("cvest tune: cannot allocate an aligned buffer of 8 MiB");
  for (std::size_t i = 0; i < piece; ++i) buffer.get()[i] = char(i * 131 + 7);  // not zeros: nothing to elide
  const std::string number = device_number(io::existing_ancestor(folder).string());
  WriteModeRecord record{write_mode_key(folder), today(), bytes, {}, {}, {}, {}};
  for (int r = 0; r < repeats; ++r)
    for (const bool direct : {r % 2 == 0, r % 2 != 0}) {
      wait_until_idle_number(number);
      const double s = write_pass(folder, bytes, direct, buffer.get(), piece);
      (direct ? record.direct_s : record.buffered_s).push_back(s);
      progress << fmt::format("  pass {}/{}: {} {:.2f} s ({:.2f} GB/s)\n", r + 1, repeats,
                              direct ? "past the page cache" : "through it, then fsync", s, bytes / s / 1e9)
               << std::flush;
    }
  wait_until_idle_number(number);
  return record;
}

}  // namespace cvest::app
