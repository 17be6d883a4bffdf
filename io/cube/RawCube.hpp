#pragma once
// Direct pread/pwrite access to a cube whose bytes lie in the file as in memory.
#include "core/Names.hpp"
#include "core/Plan.hpp"
#include "io/hdf5/ChunkFiles.hpp"
#include "io/os/DirectReader.hpp"
#include "io/os/DirectWriter.hpp"
#include "io/hdf5/Hdf5.hpp"

#include <atomic>
#include <cstdint>
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
  // (io/os/DirectWriter.hpp; `off_because`: why not, when off); a read-only
  // cube's is read past it as `direct` says (io/os/DirectReader.hpp; `off_because`:
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

}  // namespace cvest::io
