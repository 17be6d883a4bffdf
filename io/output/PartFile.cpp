#include "io/output/PartFile.hpp"

#include "core/Errors.hpp"
#include "io/os/ReadWriteAt.hpp"
#include "io/os/TempFiles.hpp"

#include <fcntl.h>
#include <memory>
#include <unistd.h>
#include <vector>

namespace cvest::io {

off_t append_part(int fd, off_t at, const PartRecord& r, const void* data, const std::string& shown) {
  write_at(fd, &r, sizeof r, at, shown);
  write_at(fd, data, std::size_t(r.bytes), at + off_t(sizeof r), shown);
  return at + off_t(sizeof r + r.bytes);
}

void read_part(const std::string& part, const std::function<void(const PartRecord&, unsigned char*)>& each) {
  std::string why;
  const int fd = open_own_file(part, O_RDONLY, why);
  if (fd < 0) throw IoError(part + ": cannot open another rank's chunks: it is " + why);
  const std::unique_ptr<int, void (*)(int*)> closing(new int(fd), [](int* f) { ::close(*f), delete f; });
  std::vector<unsigned char> data;
  for (off_t at = 0;;) {
    PartRecord r{};
    const ssize_t got = ::pread(fd, &r, sizeof r, at);
    if (got == 0) return;
    if (got != ssize_t(sizeof r)) throw IoError(part + ": truncated record at byte " + std::to_string(at));
    data.resize(std::size_t(r.bytes));
    if (::pread(fd, data.data(), data.size(), at + off_t(sizeof r)) != ssize_t(data.size()))
      throw IoError(part + ": truncated chunk at byte " + std::to_string(at));
    each(r, data.data());
    at += off_t(sizeof r + data.size());
  }
}

}  // namespace cvest::io
