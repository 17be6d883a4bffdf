#pragma once
// Chunked datasets decoded by cvest's own threads.
#include "core/Plan.hpp"
#include "io/ChunkFiles.hpp"
#include "io/Hdf5.hpp"
#include "io/codecs/Codec.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cvest::io {

// Chunked datasets cvest decodes itself: chunks of any shape (dates, ids,
// columns), stored plain or through filters io/codecs/ has (shuffle,
// deflate, h5py's lzf, Blosc, bitshuffle; what h5py, hdf5plugin, xarray and
// cvest write, lzf, Blosc and bitshuffle being plugins HDF5's library may
// lack). HDF5, whose thread-safe build serialises every call behind one
// lock, only answers where a chunk lives; its bytes are read with pread,
// decoded and copied into the block on the calling thread, so several
// threads decode at once. Other filters, more than one filter that changes
// a chunk's size, type conversions and byte orders: nullptr (HDF5 reads those).
class ChunkedCube {
 public:
  // The file that holds the dataset is opened again for reading; `shown`
  // names it in messages.
  static std::unique_ptr<ChunkedCube> open(const Dataset& ds, const std::string& shown, hid_t mem_type, Index K);
  ~ChunkedCube();
  ChunkedCube(const ChunkedCube&) = delete;
  ChunkedCube& operator=(const ChunkedCube&) = delete;
  // A chunk's extent in dates and ids: a block of whole chunks decodes each
  // of its chunks once; one that cuts a chunk decodes it again for the next.
  Index chunk_dates() const { return chunk_[0]; }
  Index chunk_ids() const { return chunk_[1]; }
  std::size_t chunk_bytes() const { return std::size_t(chunk_[0] * chunk_[1] * chunk_[2]) * es_; }
  // False when a chunk the block needs is not in the file (HDF5 supplies
  // fill values then).
  bool read(const Block& block, void* buffer) const;

 private:
  ChunkedCube() = default;
  // The chunk at `origin` read and decoded (every filter undone) into this
  // thread's scratch: chunk_bytes() of them; nullptr where it is not in the file.
  const unsigned char* decoded(const std::array<Index, 3>& origin) const;
  // Its part of block `b` copied into `out` (the block's C-order buffer).
  bool decode_into(const Block& b, const std::array<Index, 3>& origin, unsigned char* out) const;
  hid_t ds_ = -1;
  std::string path_;
  int fd_ = -1;
  haddr_t chunk_base_ = 0;
  std::uint64_t file_bytes_ = 0;
  Index K_ = 0;
  std::array<Index, 3> chunk_{};  // dates, ids, columns (a rank-2 (ids, K) dataset: one date)
  int rank_ = 3;
  std::size_t es_ = 8;
  // The pipeline's filters in order: each one's codec and record; a
  // chunk's mask bit k set: filter k skipped for it.
  std::vector<const Codec*> codecs_;
  std::vector<FilterUse> uses_;
};

}  // namespace cvest::io
