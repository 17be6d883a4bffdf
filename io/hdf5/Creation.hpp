#pragma once
// How cvest's HDF5 files come to be: created exclusively at a fresh
// temporary name beside their final path, given their cube dataset
// (io/cube/CubeDataset.hpp), synced, and renamed into place by io::publish
// (io/os/Publish.hpp).
#include "io/hdf5/Hdf5.hpp"
#include "io/os/FileIdentity.hpp"
#include "io/os/Publish.hpp"
#include "io/os/TempFiles.hpp"

#include <string>

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
                      hsize_t page = 0);

// A new HDF5 file on its way to `path`, made by create_temp_file at a fresh
// temporary name (registered for the signal handlers), and removed unless
// it is put in place: publish() flushes and closes it and puts it at `path`
// by io::publish, replacing `replacing.found` only. Destroyed unpublished
// (a failure while it is written), it is closed and removed.
class NewFile {
 public:
  NewFile(const std::string& path, const Replacing& replacing, hsize_t page = 0);
  ~NewFile();
  NewFile(const NewFile&) = delete;
  NewFile& operator=(const NewFile&) = delete;
  const File& file() const { return file_; }
  // `what` names io::publish's fault points ("input"). IoError naming the
  // path where the flush fails (a full disk), or as io::publish throws.
  void publish(const std::string& what);

 private:
  std::string path_, temp_;
  Replacing replacing_;
  TempFileGuard guard_;
  FileIdentity made_;
  File file_;
  bool published_ = false;
};

}  // namespace cvest::io
