#pragma once
// A part file: what another rank of a distributed run compressed, appended
// piece by piece (io/output/OutputShare.hpp), for rank 0 to store into the
// output (OutputFile::store_part).
#include <cstdint>
#include <functional>
#include <string>
#include <sys/types.h>

namespace cvest::io {

// A part file's record before each piece's bytes: a stored chunk at
// (dates.begin, ids.begin), or a block that is not of whole chunks, in
// C order, which HDF5 merges into its chunks (read, modify, compress).
struct PartRecord {
  enum Kind : std::uint32_t { chunk = 0, block = 1 };
  std::int64_t t0, t1, i0, i1;
  std::uint64_t bytes;
  std::uint32_t skipped, kind;
};

// Appends record `r` and its `r.bytes` of `data` at `at` of `fd` (the
// caller holds its lock); the part file's new length. IoError naming `shown`.
off_t append_part(int fd, off_t at, const PartRecord& r, const void* data, const std::string& shown);

// Calls each(record, bytes) for every piece of the part file `part`, in the
// order written. IoError where it is not the user's own regular file or a
// piece is cut short.
void read_part(const std::string& part, const std::function<void(const PartRecord&, unsigned char*)>& each);

}  // namespace cvest::io
