#pragma once
// The output cube: written to a temporary file beside its path (uncompressed
// chunks by cvest's threads at their offsets, past the page cache where that
// pays, io/os/DirectWriter.hpp; compressed ones through HDF5), journaled for
// resuming (io/output/Resume.cpp), renamed into place only after success.
// Other ranks' shares of it: io/output/OutputShare.hpp. How a cube's bytes
// move: io/cube/.
#include "core/Plan.hpp"
#include "io/cube/RawCube.hpp"
#include "io/os/Disk.hpp"
#include "io/os/FileIdentity.hpp"
#include "io/hdf5/Hdf5.hpp"
#include "io/output/Journal.hpp"
#include "io/cube/StoredChunks.hpp"
#include "io/os/WriteBehind.hpp"
#include "io/os/TempFiles.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cvest::io {

struct OutputSpec {
  std::string path, dataset = "cv";
  Index T = 0, N = 0, K = 0;
  Precision precision = Precision::f64;
  CompressionSpec compression;  // io/codecs/
  Index chunk_ids = 0;  // 0: about 1 MiB chunks
  bool overwrite = false;
  // Uncompressed output: the blocks written are journaled beside the
  // temporary file under this fingerprint (io/output/Journal.hpp), and a killed
  // run's file whose journals have the same is resumed (unless `resume` is
  // false: then it is removed and the run starts over). Empty: no journal.
  Fingerprint fingerprint;
  bool resume = true;
  int rank = 0;  // whose journal: `.journal-RANK` beside the temporary file
  int ranks = 1;  // how many write it (rank 0 cannot see the others' journals fill)
  // What commit writes as the cube's attributes: with the fingerprint and the
  // storage, what a sealed output must have been written with to be taken
  // over (it is put in place as it is).
  std::map<std::string, std::string> attributes = {};
  // Uncompressed data past the page cache (io/os/DirectWriter.hpp), as the
  // app settled it for this machine (app/run/WriteMode.hpp): on, off, or
  // automatic: past it where O_DIRECT is granted, else through it.
  DirectMode direct = DirectMode::automatic;
  std::string direct_because = "";  // why it was settled so, for the writes' report ("": nothing to say)
  // The rate `cvest tune` measured the disk writing plain bytes at in the
  // output's folder (the faster of its two ways; 0: not measured there) and
  // its date, handed in by the app: whether compressing pays (writes_text).
  // Two fields, not a struct: GCC 12 warns of a nested one's string as
  // maybe uninitialized in brace-initialized specs.
  double disk_bytes_per_s = 0;
  std::string disk_measured_on = "";  // YYYY-MM-DD
  // What the direct writer's aligned copies may take (a run's plan counts it
  // in memory_budget: direct_write_memory).
  std::size_t direct_memory = direct_write_memory(std::size_t(256) << 20);
};

// Bytes of blocks the journal records at a time (io/output/Journal.hpp): 256 MiB,
// or CVEST_JOURNAL_BATCH (e.g. "1MiB": every block, as the tests kill runs
// between blocks).
std::size_t journal_batch_bytes();

// The journal of `rank` for the temporary file `temp`.
std::string journal_path(const std::string& temp, int rank);
// The seal of the finished temporary file `temp` (Journal::seal).
std::string seal_path(const std::string& temp);
// The journals beside the temporary file `temp`, of every rank: regular
// files of the running user's only (a link or another user's file at such a
// name is neither read nor removed).
std::vector<std::string> journals_of(const std::string& temp);

// Objects of an output of this size or more (its chunks) start on a
// boundary of it: a distributed run's ranks then share no page.
inline constexpr std::size_t output_page_bytes = 4096;

class OutputFile {
 public:
  explicit OutputFile(const OutputSpec& spec);  // creates the temporary file
  ~OutputFile();                                // removes it unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  Index chunk_ids() const { return chunk_[1]; }
  // Blocks a killed run left on disk that this one resumed: not to be written again.
  const std::vector<Block>& resumed() const { return resumed_; }
  // A killed run's output, finished and sealed (io/output/Journal.hpp) but not put
  // in place: nothing is to be written, and commit only puts it in place.
  bool sealed() const { return sealed_; }
  // How the data reached the file: past the page cache or through it, and
  // why (DirectWriter::text), or through HDF5 (compressed chunks).
  std::string writes_text() const;
  // C order (dates, ids, K). May run on several threads at once: uncompressed
  // output goes by pwrite to fixed offsets, gzip chunks are compressed on the
  // calling thread and stored with H5Dwrite_chunk (HDF5 serialises that call).
  void write(const Block& block, const void* buffer);
  // Attributes and dimension scales (those of `scales_like`'s dimensions
  // where it has them, see attach_dimension_scales), close, sync, seal, and
  // put in place at spec.path (io::publish): never onto a file that appeared
  // since it started, and with overwrite = true over the one it found then
  // only, in one rename. IoError (exit 3) otherwise, the file at spec.path
  // left as it is.
  void commit(const std::map<std::string, std::string>& attributes, hid_t scales_like = H5I_INVALID_HID);

  // Distributed runs (app/Ranks.hpp): the temporary file, and what another
  // process needs to write its share of the output (io/output/OutputShare.hpp): where
  // every uncompressed byte lies, or how chunks are compressed.
  const std::string& temp_path() const { return temp_path_; }
  std::vector<std::uint64_t> share() const;
  // Stores what another rank's OutputShare appended to its part file
  // `part`, in the order it was written: compressed chunks (H5Dwrite_chunk)
  // and blocks not of whole chunks (merged into their chunks by HDF5).
  void store_part(const std::string& part);

 private:
  void store(const StoredChunk& chunk);
  OutputSpec spec_;
  std::string temp_path_;
  TempFileGuard temp_guard_{temp_path_};  // removed if a signal stops the process
  File file_;
  Dataset ds_;
  std::array<Index, 3> chunk_{};
  FileIdentity found_;  // what was at spec.path when it started: all that overwrite = true replaces
  FileIdentity made_;   // the temporary file, as this run created (or took over) it
  bool sealed_ = false;
  std::unique_ptr<TempFileGuard> seal_guard_;
  bool committed_ = false;
  std::unique_ptr<RawCube> raw_;
  ChunkCoding coding_;  // the filters its chunks go through (compressed output)
  CodingStats coding_stats_;  // this process's coding of them
  std::unique_ptr<WriteBehind> write_behind_;  // compressed chunks handed to writeback as they come
  std::vector<Block> resumed_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<TempFileGuard> journal_guard_;
  std::string writes_text_;  // kept as commit closes the raw cube
  // Closes the unfinished output and removes its temporary file.
  void discard_temp();
  // Takes over a killed run's temporary file whose journals match, if any.
  bool adopt_killed_run();
  // Takes over a killed run's sealed output of this job, if any.
  bool adopt_sealed_run();
  bool take_over(const std::string& candidate, const FileIdentity& named);
  // Attributes, dimension scales, close, sync, seal.
  void finish(const std::map<std::string, std::string>& attributes, hid_t scales_like);
  // What a seal records: the fingerprint, the storage and the attributes.
  Fingerprint seal_fingerprint() const;
  // Seals the temporary file (Journal::seal), guarded: a signal removes the
  // seal unless it is a scheduler's SIGTERM.
  void seal();
};

// At most the plain size of the output, compressed or not (a chunk a filter
// cannot shrink is stored without it).
double output_bytes(const OutputSpec& spec);

// An uncompressed block at its offsets, recorded for resuming once on disk
// (by the output and by its shares alike).
void write_raw_block(RawCube& raw, Journal* journal, const OutputSpec& spec, const Block& b, const void* buffer);

}  // namespace cvest::io
