#pragma once
// A stored chunk decoded in parts: the plain bytes of one part at a time,
// reading only the stored bytes that part needs. A one-date chunk of 400 MB
// (h5py's chunks=(1, N, K)) then costs the budget a part, not the chunk:
// deflate is inflated as a stream, Blosc's and bitshuffle's own blocks are
// decoded where a part needs them, unfiltered chunks read as they lie.
// Filters that scatter every element over the whole chunk (HDF5's shuffle,
// lzf's single block) have no parts: Codec::streams says which do.
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace cvest::io {

// `bytes` of the stored chunk from `offset` into `into` (IoError on failure).
using ReadStored = std::function<void(std::size_t offset, std::size_t bytes, unsigned char* into)>;

// The stored chunk read forward in pieces of `buffer` bytes: what a part
// needs of it next, without holding the chunk.
class StoredBytes {
 public:
  StoredBytes(ReadStored read, std::size_t stored, std::size_t buffer = std::size_t(1) << 20);
  std::size_t stored() const { return stored_; }
  // `bytes` from `offset` on, valid until the next call; nullptr where the
  // chunk ends first. Reading forward reads each byte once.
  const unsigned char* at(std::size_t offset, std::size_t bytes);
  // `bytes` from `offset` straight into `into` (no buffer kept).
  void read(std::size_t offset, std::size_t bytes, unsigned char* into) const { read_(offset, bytes, into); }

 private:
  ReadStored read_;
  std::size_t stored_ = 0, buffer_ = 0;
  std::vector<unsigned char> data_;
  std::size_t begin_ = 0;  // the stored offset of data_[0]
};

class ChunkStream {
 public:
  virtual ~ChunkStream() = default;
  // The chunk's plain bytes [from, from + bytes) into `out`. In order (each
  // part after the last) each stored byte is read and decoded once; an
  // earlier part starts the stream again (restarts() counts it). False
  // where the stored bytes are not what the filter writes (damaged).
  bool part(std::size_t from, std::size_t bytes, unsigned char* out);
  int restarts() const { return restarts_; }
  // Whether parts cost least in order (a stream), or come from anywhere.
  bool in_order() const { return !random_access(); }

 protected:
  // Where the stream is (plain bytes decoded so far); back to the start.
  virtual std::size_t position() const = 0;
  virtual void rewind() = 0;
  // The next `bytes` plain bytes into `out`, or past them where `out` is null.
  virtual bool next(std::size_t bytes, unsigned char* out) = 0;
  // Random access (the part's own blocks): `next` is not used.
  virtual bool random_access() const { return false; }
  virtual bool at(std::size_t from, std::size_t bytes, unsigned char* out) {
    (void)from, (void)bytes, (void)out;
    return false;
  }

 private:
  int restarts_ = 0;
};

// A stream whose parts decode anywhere, in any order (Blosc's blocks,
// unfiltered bytes): `at` is all there is.
class RandomAccessStream : public ChunkStream {
 protected:
  std::size_t position() const final { return 0; }
  void rewind() final {}
  bool next(std::size_t, unsigned char*) final { return false; }
  bool random_access() const final { return true; }
  bool at(std::size_t from, std::size_t bytes, unsigned char* out) override = 0;
};

// An unfiltered chunk's parts, read where they lie.
std::unique_ptr<ChunkStream> plain_stream(ReadStored read, std::size_t stored);

}  // namespace cvest::io
