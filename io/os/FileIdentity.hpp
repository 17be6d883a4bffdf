#pragma once
// A file's identity: device and inode.
#include <cstdint>
#include <string>

namespace cvest::io {

// What is at a path (device and inode), to tell the file a run found there
// from one that replaced it since.
struct FileIdentity {
  bool exists = false;
  std::uint64_t device = 0, inode = 0;
  static FileIdentity of(const std::string& path);  // what the path leads to (stat)
  static FileIdentity at(const std::string& path);  // the name itself, a link not followed (lstat)
  bool operator!=(const FileIdentity& o) const {
    return exists != o.exists || device != o.device || inode != o.inode;
  }
  bool operator==(const FileIdentity& o) const { return !(*this != o); }
};

}  // namespace cvest::io
