#include "io/os/WholeFile.hpp"

#include "core/Errors.hpp"
#include "io/os/FileIdentity.hpp"
#include "io/os/Publish.hpp"
#include "io/os/ReadWriteAt.hpp"
#include "io/os/TempFiles.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace cvest::io {

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

}  // namespace cvest::io
