#include "app/tune/RecordFile.hpp"

#include "io/os/Disk.hpp"
#include "io/os/WholeFile.hpp"
#include "io/os/TempFiles.hpp"

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cvest::app {

std::string cache_file_path(const std::string& name) {
  std::filesystem::path dir;
  if (const char* d = std::getenv("CVEST_CACHE_DIR"); d && *d) dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::filesystem::path(x) / "cvest";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::filesystem::path(h) / ".cache" / "cvest";
  else dir = std::filesystem::temp_directory_path() / ("cvest-cache-" + std::to_string(::geteuid()));
  return (dir / name).string();
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm tm {};
  ::localtime_r(&now, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &tm);
  return text;
}

bool read_own_text(const std::string& path, std::string& text, std::string& problem) {
  problem.clear(), text.clear();
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return false;  // nothing measured yet
  std::string why;
  const int fd = io::open_own_file(path, O_RDONLY, why);
  if (fd < 0) {
    problem = path + ": not read (it is " + why + ")";
    return false;
  }
  char buffer[1 << 14];
  for (ssize_t got; (got = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, std::size_t(got));
  ::close(fd);
  return true;
}

void locked_update(const std::string& path, const std::function<void()>& update) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  struct Lock {  // closing the descriptor lets the lock go
    int fd;
    ~Lock() {
      if (fd >= 0) ::close(fd);
    }
  } lock{::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)};
  if (lock.fd >= 0)
    while (::flock(lock.fd, LOCK_EX) != 0 && errno == EINTR) {
    }
  update();
}

void write_records(const std::string& path, const nlohmann::json& records, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  io::write_whole_file(path, nlohmann::json{{"records", records}}.dump(2) + "\n", what);
}

}  // namespace cvest::app
