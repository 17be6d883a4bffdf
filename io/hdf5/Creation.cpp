#include "io/hdf5/Creation.hpp"

#include "core/Errors.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace cvest::io {

// Creates a new HDF5 file at a fresh temporary name beside `path`
// (temp_path_for; H5F_ACC_EXCL: never an existing name, and so never through
// a link planted there), registered with `guard`, and checks that what HDF5
// holds open is a regular file of ours at that name. `temp` is the name to
// try first (empty: a fresh one) and, on return, the name used; `made`, the
// file's identity (what io::publish checks it against).
// `page` > 0: objects of a page or more (an output's chunks) start on a page
// boundary, so the ranks of a distributed run, which split the output at
// chunk boundaries, never write into the same page (which NFS clients may
// write back whole, and Lustre locks).
File create_temp_file(const std::string& path, std::string& temp, TempFileGuard& guard, FileIdentity& made,
                      hsize_t page) {
  const PropList access(H5Pcreate(H5P_FILE_ACCESS));
  if (page > 0) check(H5Pset_alignment(access.get(), page, page), "H5Pset_alignment", path);
  constexpr int attempts = 16;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0 || temp.empty()) {
      temp = temp_path_for(path);
      guard.retarget(temp);
    }
    struct stat st {};
    if (::lstat(temp.c_str(), &st) == 0) continue;  // taken (a clash, or a name planted there): another name
    File file(H5Fcreate(temp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, access.get()));
    if (!file) {
      std::string why;
      if (::lstat(temp.c_str(), &st) != 0) throw IoError(path + ": cannot create (directory missing or not writable?)");
      if (!own_regular_file(temp, why)) continue;  // planted meanwhile: left alone, another name
      ::unlink(temp.c_str());  // HDF5 created it, then failed
      throw IoError(path + ": cannot create " + temp + " (disk full?)");
    }
    void* handle = nullptr;
    struct stat held {}, named {};
    if (H5Fget_vfd_handle(file.get(), access.get(), &handle) < 0 || !handle ||
        ::fstat(*static_cast<const int*>(handle), &held) != 0 || ::lstat(temp.c_str(), &named) != 0 ||
        !S_ISREG(held.st_mode) || held.st_uid != ::geteuid() || held.st_dev != named.st_dev ||
        held.st_ino != named.st_ino)
      throw IoError(path + ": " + temp + " is not the file this run just created there (replaced by another "
                           "process?); left as it is");
    made = {true, std::uint64_t(held.st_dev), std::uint64_t(held.st_ino)};
    return file;
  }
  throw IoError(path + ": cannot create a temporary file beside it: " + std::to_string(attempts) +
                " fresh names were all taken");
}

NewFile::NewFile(const std::string& path, const Replacing& replacing, hsize_t page)
    : path_(path), temp_(temp_path_for(path)), replacing_(replacing), guard_(temp_),
      file_(create_temp_file(path, temp_, guard_, made_, page)) {}

NewFile::~NewFile() {
  if (published_) return;
  file_.reset();
  // Only the file this made: where publish failed part way, the temporary
  // name may hold the file it replaced or another process's.
  if (!(FileIdentity::at(temp_) == made_)) return;
  std::error_code ec;
  std::filesystem::remove(temp_, ec);
}

void NewFile::publish(const std::string& what) {
  if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0) throw IoError(path_ + ": flush failed (disk full?)");
  file_.reset();
  io::publish(temp_, made_, path_, replacing_, what, path_);
  published_ = true;
}

}  // namespace cvest::io
