#pragma once
// Chunked datasets decoded by cvest's own threads.
#include "core/Plan.hpp"
#include "io/hdf5/ChunkFiles.hpp"
#include "io/hdf5/Hdf5.hpp"
#include "io/cube/HeldChunks.hpp"
#include "io/codecs/Codec.hpp"

#include <array>
#include <atomic>
#include <condition_variable>
#include <map>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
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
// a chunk's size, byte orders and types other than native floats: nullptr
// (HDF5 reads those).
class ChunkedCube {
 public:
  // The file that holds the dataset is opened again for reading; `shown`
  // names it in messages. InputError where a filter's record is one its own
  // filter refuses.
  static std::unique_ptr<ChunkedCube> open(const Dataset& ds, const std::string& shown, hid_t mem_type, Index K);
  ~ChunkedCube();
  ChunkedCube(const ChunkedCube&) = delete;
  ChunkedCube& operator=(const ChunkedCube&) = delete;
  // A chunk's extent in dates and ids: a block of whole chunks decodes each
  // of its chunks once on the thread that reads it.
  Index chunk_dates() const { return chunk_[0]; }
  Index chunk_ids() const { return chunk_[1]; }
  Index chunk_cols() const { return chunk_[2]; }
  std::size_t chunk_bytes() const { return std::size_t(chunk_[0] * chunk_[1] * chunk_[2]) * es_; }
  // What decoding one chunk holds beside the decoded chunk: its stored
  // bytes (at most what the filters can store it in) and, with two filters
  // or more, a chunk's bytes between them.
  std::size_t decode_scratch_bytes() const;
  // Chunks that blocks cut, decoded once and held while their blocks run
  // (io/cube/HeldChunks.hpp), at most `cells` cells (the chunks of a date range
  // and id range, every column range) at once; without it a cut chunk is
  // decoded again for each block. `part_ids` (a divisor of the chunk's ids,
  // where streams()): a cell is that many ids of the chunks, decoded a part
  // at a time (io/codecs/ChunkStream.hpp); 0: whole chunks.
  void hold(std::size_t cells, Index part_ids = 0);
  bool holds() const { return held_ != nullptr; }
  Index part_ids() const { return part_ids_; }
  // Whether its chunks decode in parts: one date each, unfiltered or through
  // one filter that streams (deflate, Blosc, bitshuffle-LZ4).
  bool streams() const { return streams_; }
  // What one open stream holds beside parts of `part` bytes.
  std::size_t stream_bytes(std::size_t part) const;
  // A new pass over `blocks` (a job's, a verification's): the held chunks
  // learn what the pass copies out of each, the decode counts start again.
  void begin_pass(const std::vector<Block>& blocks);
  // Chunks decoded since the pass began, and how many different ones.
  std::uint64_t decodes() const { return decodes_.load(); }
  std::uint64_t distinct_decodes() const;
  // False when a chunk the block needs is not in the file (HDF5 supplies
  // fill values then).
  bool read(const Block& block, void* buffer) const;
  // Every chunk of `block` the file stores decoded (and dropped), each
  // once: a damaged one throws IoError as read() does. Before HDF5 reads a
  // block read() declined, so that HDF5's filters (plugins that trust the
  // sizes they read: Debian's bitshuffle overran a heap buffer on a fuzzed
  // file) only see chunks cvest's decoders took.
  void check_stored(const Block& block) const;
  // A cube read once (a multBy kept whole): the scratch a chunk's decoding
  // takes is let go after it instead of kept by each thread for the next
  // (a 400 MB chunk's stored bytes would stay for the whole run).
  void read_once() { keep_scratch_ = false; }

 private:
  ChunkedCube() = default;
  // The chunk at `origin` read and decoded (every filter undone) into
  // `out` (chunk_bytes() of it); false where it is not in the file.
  bool decode_chunk(const std::array<Index, 3>& origin, unsigned char* out) const;
  // Whether a held chunk's outer filter (of two or more) is undone from a
  // stream (io/codecs/ChunkStream.hpp) rather than from its stored bytes.
  bool streams_outer() const;
  // The chunk's record, checked (IoError where it lies outside the file or
  // claims more than its filters store); false where it is not stored.
  bool stored_chunk(const std::array<Index, 3>& origin, unsigned& mask, haddr_t& addr, hsize_t& stored) const;
  // Reads of the stored chunk at `addr` (its record's), for a stream;
  // `shown` names it in errors.
  ReadStored stored_reader(haddr_t addr, const std::string& shown) const;
  // Plain bytes [from, from + bytes) of the chunk at `origin` into `out`,
  // from the chunk's stream (opened on first use, closed after the last
  // part the dataset has); false where it is not in the file.
  bool decode_part(const std::array<Index, 3>& origin, std::size_t from, std::size_t bytes, unsigned char* out) const;
  // The cells a block reads from (their origins, columns 0) and a cell's
  // extent: chunks, or parts of part_ids_ ids.
  std::vector<std::array<Index, 3>> cells_of(const Block& b) const;
  std::array<Index, 3> cell_extent() const { return {chunk_[0], part_ids_ > 0 ? part_ids_ : chunk_[1], chunk_[2]}; }
  // Its part of block `b` copied into `out` (the block's C-order buffer);
  // decoded straight there where the chunk lies in the block whole, as the
  // chunk lays it out (its_place).
  bool decode_into(const Block& b, const std::array<Index, 3>& origin, unsigned char* out) const;
  // Where the chunk at `origin` starts in block `b`'s buffer, if all of it
  // lies there as one run in its own order; nullptr otherwise.
  unsigned char* its_place(const Block& b, const std::array<Index, 3>& origin, unsigned char* out) const;
  // `data`: what lies at `origin` of the chunks, `extent` of it (a chunk, a part).
  void copy_piece(const Block& b, const std::array<Index, 3>& origin, const std::array<Index, 3>& extent,
                  const unsigned char* data, unsigned char* out) const;
  // The block's part of the held cell at `cell` (its chunks of every
  // column range) copied into `out`.
  bool held_into(const Block& b, const std::array<Index, 3>& cell, unsigned char* out) const;
  // Elements of what lies at `origin` (`extent` of it) in block `b`; of the
  // cell at `cell` (all columns).
  std::uint64_t piece_elements(const Block& b, const std::array<Index, 3>& origin,
                               const std::array<Index, 3>& extent) const;
  std::uint64_t cell_piece(const Block& b, const std::array<Index, 3>& cell) const;
  void count_decode(const std::array<Index, 3>& origin) const;
  hid_t ds_ = -1;
  std::string path_;
  int fd_ = -1;
  haddr_t chunk_base_ = 0;
  std::uint64_t file_bytes_ = 0;
  Index T_ = 1, N_ = 0, K_ = 0;
  std::array<Index, 3> chunk_{};  // dates, ids, columns (a rank-2 (ids, K) dataset: one date)
  int rank_ = 3;
  std::size_t es_ = 8;      // the file's element bytes (chunks are decoded at them)
  std::size_t mem_es_ = 8;  // the block's (converted as copied where they differ)
  // The pipeline's filters in order: each one's codec and record; a
  // chunk's mask bit k set: filter k skipped for it.
  std::vector<const Codec*> codecs_;
  std::vector<FilterUse> uses_;
  std::size_t max_stored_ = 0;  // what a chunk record may claim
  std::size_t largest_stored_ = SIZE_MAX;  // the largest the index records (held chunks)
  std::unique_ptr<HeldChunks> held_;
  bool streams_ = false;
  bool keep_scratch_ = true;  // read_once
  Index part_ids_ = 0;
  // The chunks being decoded in parts, each stream used by one thread at a time.
  struct OpenStream {
    std::mutex lock;
    std::condition_variable moved;  // a part decoded (or given up)
    std::size_t next = 0;           // where the last part ended
    std::unique_ptr<ChunkStream> stream;
  };
  mutable std::mutex streams_lock_;
  mutable std::map<std::array<Index, 3>, std::shared_ptr<OpenStream>> streams_open_;
  mutable std::atomic<std::uint64_t> decodes_{0};
  mutable std::mutex seen_lock_;
  mutable std::set<std::array<Index, 3>> seen_;
  // check_stored's: one call at a time (a whole chunk's scratch each, as
  // the H5Dread after it takes), each chunk checked once.
  mutable std::mutex checked_lock_;
  mutable std::set<std::array<Index, 3>> checked_;
};

}  // namespace cvest::io
