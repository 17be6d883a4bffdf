#include "io/os/DirectIo.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/vfs.h>

namespace cvest::io {

std::string file_system_type(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return "";
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0x01021994: return "tmpfs";
    case 0x6969: return "NFS";
    case 0xFF534D42: case 0xFE534D42: return "CIFS/SMB";
    case 0x65735546: return "FUSE";
    case 0x794c7630: return "overlayfs";
    case 0x01021997: return "9p";
    case 0x858458f6: return "ramfs";
    case 0xEF53: return "ext4";
    case 0x58465342: return "XFS";
    case 0x9123683E: return "Btrfs";
    default: return fmt::format("type {:#x}", static_cast<unsigned long>(fs.f_type));
  }
}

std::string file_system_of(int fd) {
  const std::string type = file_system_type(fd);
  return type.empty() ? "its file system" : "its file system (" + type + ")";
}

int reopen_direct(int fd, int access) {
  return ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), access | O_DIRECT | O_CLOEXEC);
}

std::string why_not_direct(int fd, int error) {
  return error == EINVAL ? file_system_of(fd) + " refuses O_DIRECT"
                         : std::string("cannot open it with O_DIRECT: ") + std::strerror(error);
}

}  // namespace cvest::io
