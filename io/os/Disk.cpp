#include "io/os/Disk.hpp"

#include "core/Errors.hpp"
#include "core/Plan.hpp"
#include "io/cube/Chunks.hpp"
#include "io/os/Publish.hpp"
#include "io/os/TempFiles.hpp"


#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace cvest::io {


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

void write_whole_file(const std::string& path, const std::string& text, const std::string& what) {
  clean_up_after_killed_runs(path);  // a report a killed run left at its temporary name
  std::string temp = temp_path_for(path);
  TempFileGuard guard(temp);
  const int fd = create_exclusive_temp(path, temp, guard);
  if (fd < 0) throw IoError(path + ": cannot write " + what + ": " + std::strerror(errno));
  try {
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw IoError(path + ": cannot write " + what + ": " + std::strerror(errno));
    write_at(fd, text.data(), text.size(), 0, path);
    // Whatever is at the path now is replaced (a report is rewritten by every run).
    publish(temp, {true, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)}, path, {FileIdentity::at(path), true},
            what, path, fd);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  ::close(fd);
}

FileIdentity FileIdentity::of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
}

FileIdentity FileIdentity::at(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return {true, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
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

}  // namespace cvest::io
