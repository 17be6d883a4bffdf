#pragma once
// Reading a cube's blocks by the fastest path that applies.
#include "core/Names.hpp"
#include "core/Plan.hpp"
#include "io/cube/ChunkedCube.hpp"
#include "io/hdf5/Hdf5.hpp"
#include "io/cube/RawCube.hpp"

#include <array>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cvest::io {

// How a dataset is stored and which path reads it: a report says so, so that
// a slow read can be told from a slow machine.
struct CubeStorage {
  StorageLayout layout = StorageLayout::contiguous;
  std::vector<Index> chunk;          // empty unless chunked
  std::vector<std::string> filters;  // HDF5's names, in pipeline order
  ReadBy read_by = ReadBy::hdf5;     // none: HDF5 lacks a filter it would need (`unreadable` names it)
  std::string unreadable;
  bool held = false;                 // decoded chunks held while blocks cut them (io/cube/HeldChunks.hpp)
  Index held_part_ids = 0;           // held a part of so many ids at a time (0: whole chunks)
};
std::string to_text(const CubeStorage& storage);  // "chunks (2, 12500, 1), deflate; decoded by cvest's threads"

// Chunks too large for a block's share of the budget, decoded once each and
// held while the blocks that cut them run: their extent, what one held chunk
// and its decoding take, and how many make up a cell (the chunks of one date
// range and id range across the columns, which a block needs together).
struct HeldChunk {
  Index dates = 0, ids = 0, cols = 0;
  std::size_t bytes = 0, decode_bytes = 0;
  int per_cell = 1;
  // Where the chunks decode in parts (ChunkedCube::streams): what an open
  // stream holds beside parts of `part` bytes; empty where they do not.
  std::function<std::size_t(std::size_t part)> stream_bytes;
  // Held chunks of `cells` cells and their decoding: a cell's decode under
  // way per reading thread at most.
  double holding_bytes(int cells, int threads) const;
  // Held parts of `part_ids` ids, `cells` cells of them, and the streams
  // open meanwhile: each held cell's chunks', and those of one more begun.
  double part_holding_bytes(int cells, Index part_ids) const;
};

// Reads blocks of a (T, N, K) dataset (or id ranges of an (N, K) one, as
// blocks of one date) in C order, converted to the asked
// precision, by the fastest path that applies: pread straight into the block
// (RawCube), decoding whole chunks on the calling thread (ChunkedCube), else
// H5Dread. Safe from several threads.
class CubeReader {
 public:
  // `scratch_bytes`: what decoding whole chunks may hold (three chunk-sized
  // buffers per decoding thread, in place of HDF5's chunk cache); larger
  // chunks are held decoded (held_chunk) where cvest has their filters,
  // else read through H5Dread.
  // `reads`: whether bytes read with pread go past the page cache
  // (io/os/DirectReader.hpp; `reads_because` says why, for reads_text).
  // `holds`: large chunks may be held decoded (a job's discount, whose
  // passes say what they read: begin_pass); `held_bytes`: what one cell of
  // held chunks and its decoding may take;
  // over it HDF5 reads the chunks where it has their filters and a cell
  // alone fits (a row in its chunk cache, io/input/ChunkCache.hpp), else they are
  // held all the same (a run refuses them: app/run/ChunkHolding.hpp).
  CubeReader(const Dataset& ds, const std::string& path, const std::string& name, Index N, Index K,
             std::size_t scratch_bytes = std::size_t(64) << 20, DirectMode reads = DirectMode::off,
             const std::string& reads_because = "", std::size_t held_bytes = SIZE_MAX, bool holds = false);
  // IoError naming the chunk where the chunk index records a chunk outside
  // the file (or, unfiltered, of the wrong size): checked before HDF5 reads
  // chunks, which HDF5 1.10.8 does not (it crashed on such a file).
  void read(const Block& block, Precision precision, void* buffer) const;
  // All of it (an (N, K) table, or every date), read once: chunks HDF5
  // would decode are decoded by cvest's decoders (a kept multBy: Dask's one
  // 400 MB gzip chunk took HDF5's zlib seconds), one thread a chunk,
  // straight into `buffer`, where every chunk lies in it whole (all
  // columns, no conversion, no edge chunk): what decoding holds beside it
  // is then the stored bytes of a chunk a thread, at most `buffer`'s size
  // (else HDF5 reads it, as before). True where cvest decoded it so.
  bool read_whole(Precision precision, void* buffer) const;
  // The (dates, ids) extent of the chunks it decodes itself whole, a block
  // at a time; {0, 0} when it reads otherwise (any block shape is then as
  // good as another, or they are held: held_chunk).
  std::array<Index, 2> decoded_chunk(Precision precision) const;
  // The chunks it holds decoded for the blocks that cut them (bytes 0: none).
  HeldChunk held_chunk(Precision precision) const;
  // At most `chunks` held at once (1 until said), in reads at `precision`;
  // `part_ids`: parts of so many ids each (0: whole chunks).
  void hold(Precision precision, std::size_t chunks, Index part_ids = 0) const;
  // A new pass over `blocks`: what each held chunk gives the pass, and the
  // decode counts started again.
  void begin_pass(Precision precision, const std::vector<Block>& blocks) const;
  // Chunks it decoded since the pass began, and how many different ones
  // (equal: each decoded once); {0, 0} where it decodes none.
  std::array<std::uint64_t, 2> decodes(Precision precision) const;
  CubeStorage storage(Precision precision) const;
  // How its bytes were read: DirectReader::text, or the page cache's path.
  std::string reads_text(Precision precision) const;
  // Whether reading a few of its rows decodes a chunk larger than HDF5's
  // slack (16 MiB) whole each time (HDF5's read of a filtered chunk no cache
  // holds, or cvest's of one not held): Dask's to_hdf5 of an (N, K) array
  // in one 400 MB gzip chunk. Read such a dataset once, whole.
  bool rereads_chunks(Precision precision) const;
  // Whether its bytes are read past the page cache (each read then waits on
  // the device).
  bool reads_direct(Precision precision) const;

 private:
  const Dataset& ds_;
  std::string path_, name_;
  Index T_ = 1, N_ = 0, K_ = 0;  // its extent (T_ 1 for an (N, K) table)
  int rank_ = 3;  // 2: an (N, K) table, read as one date
  std::unique_ptr<RawCube> raw_[2];            // per precision asked, when it qualifies
  std::unique_ptr<ChunkedCube> chunked_[2];    // idem
  // What the chunk records of blocks HDF5 reads are checked against: the
  // chunk extent (dates, ids, columns; zeros when not chunked), an
  // unfiltered chunk's bytes (0 when filtered), the file's bytes.
  std::array<Index, 3> chunk_{};
  std::size_t plain_chunk_bytes_ = 0;
  std::size_t decoded_chunk_bytes_ = 0;  // a chunk's bytes decoded, filtered or not
  bool filtered_ = false;
  std::uint64_t file_bytes_ = 0;
  haddr_t userblock_ = 0;  // chunk addresses count from its end
  void check_chunk_records(const Block& block) const;
};

// What cvest decodes itself, with the libraries' versions, for `cvest info`:
// "shuffle, deflate (libdeflate 1.14), lzf (liblzf 1.5), ...".
std::string decoders_text();

}  // namespace cvest::io
