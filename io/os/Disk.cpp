#include "io/os/Disk.hpp"

#include "core/Errors.hpp"
#include "core/Plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/fs.h>
#include <pwd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace cvest::io {

namespace {

std::string user_name(uid_t uid) {
  struct passwd entry {}, *found = nullptr;
  char buffer[4096];
  if (::getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found)
    return fmt::format("{} (uid {})", found->pw_name, uid);
  return fmt::format("uid {}", uid);
}

}  // namespace

// The directory an output at `path` goes in.
fs::path output_dir(const std::string& path) {
  return fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
}

// The nearest directory at or above `dir` that exists: where a directory not
// made yet would be made, and so the file system it would be on.
fs::path existing_ancestor(fs::path dir) {
  std::error_code ec;
  while (!fs::exists(dir, ec)) {
    if (!dir.has_parent_path()) return ".";  // "gen": made in the working directory
    if (dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  return dir;
}

void check_output_path(const std::string& path, bool overwrite, bool create_dir, const std::string& to_replace) {
  std::error_code ec;
  // A result is put in place by renaming onto its path, which replaces a
  // link rather than the file it points at: refused, so neither happens unasked.
  if (fs::is_symlink(path, ec))
    throw InputError(path + ": output is a symbolic link (to " + fs::read_symlink(path, ec).string() +
                     "); cvest puts a finished file in place by renaming, which would replace the link, not write "
                     "where it points: give the target's own path, or remove the link");
  if (fs::exists(path, ec) && !overwrite) throw InputError(path + ": output exists; " + to_replace + " to replace it");
  if (fs::is_directory(path, ec)) throw InputError(path + ": output is a directory");
  // Found out now, not after an hour of work when the rename is refused.
  if (const std::string why = replace_refusal(path); !why.empty()) throw IoError(path + ": cannot be replaced: " + why);
  const fs::path dir = output_dir(path);
  if (create_dir) {
    fs::create_directories(dir, ec);
    if (!fs::is_directory(dir, ec)) throw IoError(path + ": cannot create the output directory " + dir.string());
  }
  // Without creating it: the directory, or where it would be made, must be writable.
  const fs::path writable = create_dir ? dir : existing_ancestor(dir);
  if (!fs::is_directory(writable, ec)) throw IoError(path + ": cannot create the output directory " + dir.string());
  if (::access(writable.c_str(), W_OK) != 0)
    throw IoError(path + ": output directory " + writable.string() + " is not writable");
}

double free_space(const std::string& path) {
  struct statvfs vfs {};
  if (::statvfs(existing_ancestor(output_dir(path)).c_str(), &vfs) != 0) return -1;
  if (vfs.f_blocks == 0) return -1;  // no size to tell (ramfs, some FUSE and network file systems)
  return double(vfs.f_bavail) * double(vfs.f_frsize);
}

void check_free_space(const std::string& path, double bytes) { check_free_space({{path, bytes}}); }

void check_free_space(const std::vector<std::pair<std::string, double>>& files) {
  // Files grouped by the file system (device) they would be on, in order.
  std::vector<std::pair<dev_t, std::vector<std::size_t>>> groups;
  for (std::size_t f = 0; f < files.size(); ++f) {
    if (files[f].second <= 0) continue;
    struct stat st {};
    if (::stat(existing_ancestor(output_dir(files[f].first)).c_str(), &st) != 0) continue;
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == st.st_dev; });
    if (group == groups.end()) groups.push_back({st.st_dev, {f}});
    else group->second.push_back(f);
  }
  for (const auto& [device, members] : groups) {
    const double available = free_space(files[members.front()].first);
    if (available < 0) continue;  // unknown: a failing write still says so
    double needed = 0;
    std::string names;
    for (const std::size_t f : members) {
      needed += files[f].second + double(1 << 20);  // HDF5's metadata, dimension scales
      names += (names.empty() ? "" : " and ") + files[f].first;
    }
    if (needed <= available) continue;
    if (members.size() == 1)
      throw IoError(names + ": needs " + format_bytes(needed) + " of disk, the file system holding it has " +
                    format_bytes(available) + " free");
    throw IoError(names + ": need " + format_bytes(needed) + " of disk together, the file system holding them has " +
                  format_bytes(available) + " free");
  }
}

std::string replace_refusal(const std::string& path) {
  struct stat st {}, dir {};
  if (::lstat(path.c_str(), &st) != 0 || ::stat(output_dir(path).c_str(), &dir) != 0) return "";
  const uid_t me = ::geteuid();
  // Root passes the sticky bit's rule (CAP_FOWNER).
  if (me != 0 && (dir.st_mode & S_ISVTX) && st.st_uid != me && dir.st_uid != me)
    return fmt::format("it is owned by {}, in a folder with the sticky bit (mode {:o}, owned by {}), where only they "
                       "can replace or remove it",
                       user_name(st.st_uid), dir.st_mode & 07777, user_name(dir.st_uid));
  if (!S_ISREG(st.st_mode)) return "";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  int flags = 0;
  const bool known = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  ::close(fd);
  if (known && (flags & FS_IMMUTABLE_FL))
    return "it is immutable (chattr +i; owned by " + user_name(st.st_uid) + "): no one can replace it until that "
           "flag is cleared";
  if (known && (flags & FS_APPEND_FL))
    return "it is append-only (chattr +a; owned by " + user_name(st.st_uid) + "): no one can replace it until that "
           "flag is cleared";
  return "";
}

}  // namespace cvest::io
