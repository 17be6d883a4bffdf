#pragma once
// A cube's bytes in an HDF5 file, moved by cvest's own threads: pread and
// pwrite where they lie as in memory (RawCube), chunks decoded by the
// reading thread (ChunkedCube), and the reader that picks the fastest path
// that applies (CubeReader), falling back to HDF5's H5Dread.
#include "core/Names.hpp"
#include "core/Plan.hpp"
#include "io/DirectReader.hpp"
#include "io/DirectWriter.hpp"
#include "io/Hdf5.hpp"

#include <array>
#include <sys/types.h>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace cvest::io {

// Direct pread/pwrite access to a (T, N, K) dataset whose bytes lie in the
// file exactly as in memory: no filters, the memory type, and either a
// contiguous layout or chunks of (1, ids, K). HDF5 (whose thread-safe build
// serialises every call behind one lock) then only answers where a chunk
// lives, and reading and writing run concurrently on separate threads.
class RawCube {
 public:
  // nullptr when the dataset does not qualify; HDF5 reads/writes are used then.
  // The file that holds the dataset is opened again (through an external
  // link, not the one the caller opened); `shown` names it in messages (the
  // final output name rather than its temporary file).
  // A writable cube's data goes past the page cache as `direct` says
  // (io/DirectWriter.hpp; `off_because`: why not, when off); a read-only
  // cube's is read past it as `direct` says (io/DirectReader.hpp; `off_because`:
  // why the mode is what it is).
  static std::unique_ptr<RawCube> open(const Dataset& ds, const std::string& shown, hid_t mem_type, bool writable,
                                       Index N, Index K, DirectMode direct = DirectMode::off,
                                       const std::string& off_because = "",
                                       std::size_t direct_memory = direct_write_memory(std::size_t(256) << 20));
  ~RawCube();
  RawCube(const RawCube&) = delete;
  RawCube& operator=(const RawCube&) = delete;
  // False when part of the block is not allocated in the file (the caller
  // then goes through HDF5, which supplies fill values).
  bool read(const Block& block, void* buffer) const;
  void write(const Block& block, const void* buffer) const;

  // Where every byte of the cube lies, for another process to write it (a
  // rank of a distributed run, which opens the file without HDF5): every
  // chunk's address resolved. IoError where the table would pass
  // max_cached_chunks entries.
  std::vector<std::uint64_t> placement() const;
  // The cube `placement` describes, in the file at `path` (not opened
  // through HDF5: HDF5 is asked nothing).
  // Closes the file now (for a writer: IoError where the file system reports
  // a failed write only then, as NFS does).
  void close();
  static std::unique_ptr<RawCube> open_placed(const std::string& path, const std::string& shown,
                                              const std::vector<std::uint64_t>& placement, bool writable,
                                              DirectMode direct = DirectMode::off,
                                              const std::string& off_because = "",
                                              std::size_t direct_memory = direct_write_memory(std::size_t(256) << 20));
  // How a writable cube's data reached the file (DirectWriter::text).
  const DirectWriter* writer() const { return direct_.get(); }
  // How a read-only cube's data was read (DirectReader::text); nullptr for a writable one.
  const DirectReader* reader() const { return reader_.get(); }

 private:
  RawCube() = default;
  template <class Op>
  bool for_each_run(const Block& block, Op&& op) const;
  hid_t ds_ = -1;
  std::string path_;
  int fd_ = -1;
  std::unique_ptr<DirectWriter> direct_;  // a writable cube's
  std::unique_ptr<DirectReader> reader_;  // a read-only cube's
  Index N_ = 0, K_ = 0, chunk_ids_ = 0;
  std::size_t es_ = 8;
  haddr_t contiguous_base_ = HADDR_UNDEF;
  haddr_t chunk_base_ = 0;  // a user block's size where HDF5's chunk addresses leave it out
  std::uint64_t input_bytes_ = 0;  // an input's size: its chunk records are checked against it (0: an output)
  Index T_ = 0;
  // Chunk addresses as HDF5 first answers them (0: not asked yet), so each
  // chunk costs one lookup behind HDF5's global lock however many blocks
  // touch it (a LayoutLeft block touches a piece of a chunk per date).
  // Chunks do not move: inputs are read-only, the output's storage is
  // allocated when it is created. Empty where the table would pass
  // max_cached_chunks entries.
  std::unique_ptr<std::atomic<haddr_t>[]> chunk_addresses_;
  Index chunks_per_date_ = 0;
  static constexpr Index max_cached_chunks = Index(1) << 22;
};

// Chunked datasets cvest decodes itself: chunks of any shape (dates, ids,
// columns), stored plain, deflated or lzf-compressed, either after a shuffle
// (what h5py, xarray and cvest write; lzf is h5py's own filter, which HDF5's
// library cannot read without h5py's plugin). HDF5, whose thread-safe build serialises every
// call behind one lock, only answers where a chunk lives; its bytes are read
// with pread, inflated, unshuffled and copied into the block on the calling
// thread, so several threads decode at once. Other filters, type
// conversions and byte orders: nullptr (HDF5 reads those).
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
  // The chunk at `origin` read and decoded (inflated, unshuffled) into this
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
  enum class Codec { none, deflate, lzf } codec_ = Codec::none;
  int codec_index_ = -1, shuffle_index_ = -1;  // positions in the filter pipeline; -1: absent
};

// A dataset's filter pipeline in order (`create`: its creation property
// list): each filter's id and HDF5's name for it. A filter's position is its
// bit in a chunk's filter mask.
struct Filter {
  H5Z_filter_t id;
  std::string name;
};
std::vector<Filter> filters_of(const PropList& create);
// The first filter of the pipeline this HDF5 cannot apply (h5py's lzf
// without its plugin), or nullptr.
const Filter* missing_in_hdf5(const std::vector<Filter>& filters);
// Whether this HDF5 can read `ds` itself (it has every filter `ds` needs).
bool hdf5_decodes(const Dataset& ds);

// How a dataset is stored and which path reads it: a report says so, so that
// a slow read can be told from a slow machine.
struct CubeStorage {
  StorageLayout layout = StorageLayout::contiguous;
  std::vector<Index> chunk;          // empty unless chunked
  std::vector<std::string> filters;  // HDF5's names, in pipeline order
  ReadBy read_by = ReadBy::hdf5;     // none: HDF5 lacks a filter it would need (`unreadable` names it)
  std::string unreadable;
};
std::string to_text(const CubeStorage& storage);  // "chunks (2, 12500, 1), deflate; decoded by cvest's threads"

// Reads blocks of a (T, N, K) dataset (or id ranges of an (N, K) one, as
// blocks of one date) in C order, converted to the asked
// precision, by the fastest path that applies: pread straight into the block
// (RawCube), decoding whole chunks on the calling thread (ChunkedCube), else
// H5Dread. Safe from several threads.
class CubeReader {
 public:
  // `scratch_bytes`: what decoding may hold (three chunk-sized buffers per
  // decoding thread, in place of HDF5's chunk cache); larger chunks go
  // through H5Dread.
  // `reads`: whether bytes read with pread go past the page cache
  // (io/DirectReader.hpp; `reads_because` says why, for reads_text).
  CubeReader(const Dataset& ds, const std::string& path, const std::string& name, Index N, Index K,
             std::size_t scratch_bytes = std::size_t(64) << 20, DirectMode reads = DirectMode::off,
             const std::string& reads_because = "");
  // IoError naming the chunk where the chunk index records a chunk outside
  // the file (or, unfiltered, of the wrong size): checked before HDF5 reads
  // chunks, which HDF5 1.10.8 does not (it crashed on such a file).
  void read(const Block& block, Precision precision, void* buffer) const;
  // The (dates, ids) extent of the chunks it decodes itself; {0, 0} when it
  // reads otherwise (any block shape is then as good as another).
  std::array<Index, 2> decoded_chunk() const;
  CubeStorage storage(Precision precision) const;
  // How its bytes were read: DirectReader::text, or the page cache's path.
  std::string reads_text(Precision precision) const;

 private:
  const Dataset& ds_;
  std::string path_, name_;
  Index K_ = 0;
  int rank_ = 3;  // 2: an (N, K) table, read as one date
  std::unique_ptr<RawCube> raw_[2];            // per precision asked, when it qualifies
  std::unique_ptr<ChunkedCube> chunked_[2];    // idem
  // What the chunk records of blocks HDF5 reads are checked against: the
  // chunk extent (dates, ids, columns; zeros when not chunked), an
  // unfiltered chunk's bytes (0 when filtered), the file's bytes.
  std::array<Index, 3> chunk_{};
  std::size_t plain_chunk_bytes_ = 0;
  std::uint64_t file_bytes_ = 0;
  void check_chunk_records(const Block& block) const;
};

// h5py's LZF filter, registered with The HDF Group under this id. HDF5's
// library has no such filter; cvest reads and writes its chunks itself
// (liblzf), and h5py (so xarray's h5netcdf engine and Dask) reads them.
inline constexpr H5Z_filter_t h5py_lzf_filter = 32000;

// What cvest decodes itself, with the libraries' versions, for `cvest info`:
// "deflate (libdeflate 1.14), lzf (liblzf 1.5), shuffle".
std::string decoders_text();

// pread of all `bytes` at `at` of `fd`, retried where interrupted or short;
// IoError naming `shown` (a file that ends first: "file is truncated").
void read_at(int fd, void* buffer, std::size_t bytes, off_t at, const std::string& shown);
// pwrite of all `bytes` at `at`, retried where interrupted or short; IoError
// naming `shown` (ENOSPC said as a full disk). The output's writes, where
// CVEST_FAULT's write and write_eio points fail them (io/Faults.hpp).
void write_at(int fd, const void* buffer, std::size_t bytes, off_t at, const std::string& shown);
// One pwrite, the same fault points applied: bytes written, or -1 with errno
// set (the caller retries or reports, as write_at does).
ssize_t pwrite_once(int fd, const void* buffer, std::size_t bytes, off_t at);
// write_at's IoError for a pwrite that returned `put` (errno set when < 0).
[[noreturn]] void throw_write_failed(ssize_t put, const std::string& shown);

// Byte offset of element (t, i, 0) in a block's C-order buffer of `row`-byte
// (K values) rows.
std::size_t offset_in_block(const Block& b, Index t, Index i, std::size_t row);

// HDF5's shuffle filter order: byte j of every element together (plane j),
// which lets deflate see runs of exponent bytes.
void shuffle_bytes(const unsigned char* in, std::size_t bytes, std::size_t element, unsigned char* out);

}  // namespace cvest::io
