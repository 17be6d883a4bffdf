#pragma once
#include "core/Plan.hpp"
#include "io/cube/RawCube.hpp"
#include "io/cube/StoredChunks.hpp"
#include "io/output/Journal.hpp"
#include "io/output/OutputFile.hpp"
#include "io/os/TempFiles.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <vector>

namespace cvest::io {

// Another rank's share of an output that rank 0 created (OutputFile, whose
// share() describes it): uncompressed blocks go by pwrite to their offsets
// in the temporary file; compressed chunks are compressed here and appended
// to this process's own part file (a temporary file beside the output,
// removed with this object), which rank 0 then stores into the output
// (OutputFile::store_part): HDF5 allocates a compressed chunk's space only
// when it is stored, and only one process may write the file's metadata.
class OutputShare {
 public:
  OutputShare(const OutputSpec& spec, const std::string& output_temp, const std::vector<std::uint64_t>& description);
  ~OutputShare();
  OutputShare(const OutputShare&) = delete;
  OutputShare& operator=(const OutputShare&) = delete;
  void write(const Block& block, const void* buffer);  // as OutputFile::write, from several threads at once
  // Closes the output (uncompressed) or the part file: IoError where a write
  // the file system held back fails now (NFS reports them at close).
  void close();
  const std::string& part_path() const { return part_path_; }  // empty for uncompressed output

 private:
  OutputSpec spec_;
  std::array<Index, 3> chunk_{};
  ChunkCoding coding_;
  std::unique_ptr<RawCube> raw_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<TempFileGuard> journal_guard_;
  std::string part_path_;
  std::unique_ptr<TempFileGuard> guard_;
  int fd_ = -1;
  bool closed_ = false;
  std::mutex append_;
  off_t part_bytes_ = 0;  // the part file's length so far (appended under append_)
};

}  // namespace cvest::io
