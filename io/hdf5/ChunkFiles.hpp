#pragma once
// What every path that moves a cube's bytes by itself shares, beside reads
// and writes at file offsets (io/os/ReadWriteAt.hpp): where a dataset's bytes
// are (its file, a user block's shift), a chunk's record in HDF5's index and
// its checks, and the filter pipeline a dataset declares.
#include "core/Plan.hpp"
#include "io/hdf5/Hdf5.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

namespace cvest::io {

// Byte offset of element (t, i, 0) in a block's C-order buffer of `row`-byte
// (K values) rows.
std::size_t offset_in_block(const Block& b, Index t, Index i, std::size_t row);

// A dataset's filter pipeline in order (`create`: its creation property
// list): each filter's id, HDF5's name for it and its record (client data).
// A filter's position is its bit in a chunk's filter mask.
struct Filter {
  H5Z_filter_t id;
  std::string name;
  std::vector<unsigned> values;
};
std::vector<Filter> filters_of(const PropList& create);
// The first filter of the pipeline this HDF5 cannot apply (h5py's lzf
// without its plugin), or nullptr.
const Filter* missing_in_hdf5(const std::vector<Filter>& filters);
// Whether this HDF5 can read `ds` itself (it has every filter `ds` needs).
bool hdf5_decodes(const Dataset& ds);

// The ids per chunk of a dataset stored in (1, ids, K) chunks, else 0.
Index chunk_ids_of(const PropList& create, Index K);

// Calls op(t, chunk_start, begin, end) for every piece of the block that lies
// in one (1, chunk_ids, K) chunk: date t, ids [begin, end) of the chunk that
// starts at chunk_start. Stops and returns false when op does.
template <class Op>
bool for_each_chunk_piece(const Block& b, Index chunk_ids, Op&& op) {
  for (Index t = b.dates.begin; t < b.dates.end; ++t)
    for (Index i = b.ids.begin; i < b.ids.end;) {
      const Index chunk_start = i - i % chunk_ids;
      const Index end = std::min(b.ids.end, chunk_start + chunk_ids);
      if (!op(t, chunk_start, i, end)) return false;
      i = end;
    }
  return true;
}

// The bytes of `ds` as cvest's own threads reach them. Through an external
// link a dataset lives in another file than the one the caller opened, so the
// descriptor is a fresh one for the file HDF5 holds it in; and a user block
// shifts a file's contents, which HDF5 1.10 adds to H5Dget_offset but leaves
// out of chunk addresses. False where that cannot be had (a file driver other
// than POSIX's), or where a user block's file reads differently at either
// base than HDF5 reads it (checked on its first chunk): HDF5 reads then.
struct FileBytes {
  int fd = -1;
  haddr_t chunk_base = 0;  // added to the chunk addresses HDF5 reports
  std::uint64_t size = 0;  // the file's bytes, user block included
};
bool file_bytes_of(const Dataset& ds, bool writable, FileBytes& out);

// "PATH: chunk at (t, i, k) (dates t-.., ids i-..)": the chunk at `origin`
// (dates, ids, columns) of a dataset of `rank` (2: ids and columns only) and
// chunk extent `chunk`, for messages.
std::string chunk_text(const std::string& shown, int rank, const std::array<Index, 3>& origin,
                       const std::array<Index, 3>& chunk);

// The origins (dates, ids, columns) of the chunks of extent `chunk` that a
// block of a dataset with K columns touches, in the file's order.
std::vector<std::array<Index, 3>> chunk_origins(const Block& b, const std::array<Index, 3>& chunk, Index K);

// HDF5's record of the chunk at `origin` of a dataset of `rank` (2: ids and
// columns only); false where it is not stored.
bool chunk_record(hid_t ds, int rank, const std::array<Index, 3>& origin, unsigned& mask, haddr_t& addr,
                  hsize_t& stored);

// A chunk's record in the chunk index, checked before anything reads it: it
// must lie inside the file and, when nothing filtered it (`plain_bytes` > 0),
// hold exactly a chunk's bytes. HDF5 1.10.8 trusts both: a damaged record
// made its H5Dread copy past a buffer and crash (found by the input fuzzer,
// tests/fuzz), and a huge size would be allocated before any read failed.
template <class Where>
void check_chunk_record(const Where& where, haddr_t addr, hsize_t stored, std::uint64_t file_bytes,
                        std::size_t plain_bytes) {
  if (file_bytes > 0 && (stored > file_bytes || addr > file_bytes - stored))
    throw IoError(where() + ": recorded as " + std::to_string(stored) + " bytes at offset " + std::to_string(addr) +
                  ", beyond the file's " + std::to_string(file_bytes) + " bytes (truncated or damaged)");
  if (plain_bytes > 0 && stored != plain_bytes)
    throw IoError(where() + ": recorded as " + std::to_string(stored) + " bytes, expected " +
                  std::to_string(plain_bytes) + " for an unfiltered chunk (damaged chunk index)");
}

}  // namespace cvest::io
