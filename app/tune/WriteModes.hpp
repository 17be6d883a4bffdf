#pragma once
// The write mode measured on the machine where it runs, as FFTW keeps its
// wisdom: `cvest tune` writes the same bytes past the page cache (O_DIRECT)
// and through it (then one fsync), interleaved, and records the medians and
// spread per CPU model, device and file system in the user's cache folder;
// `[output] direct = "auto"` takes the faster where a record matches the
// output's folder, and says so. A rule measured on one host was a guess on
// the next (1.6 GB: direct 0.75-0.92 s vs buffered 1.68-2.05 s on one VM,
// the opposite on another; docs/benchmarks.md). The same record holds reads
// of a file the page cache does not hold, both ways, for `[input] direct`.
#include "core/Names.hpp"

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace cvest::app {

struct WriteModeRecord {
  std::string key;   // write_mode_key: what the measurement holds for
  std::string date;  // YYYY-MM-DD
  double bytes = 0;  // written by each pass
  std::vector<double> direct_s, buffered_s;  // each pass's seconds, until on disk
  // Runs on an input of about the same bytes, not cached, read each way
  // (empty in a record written before reads were measured).
  std::vector<double> read_direct_s, read_buffered_s;
  bool direct() const;  // direct's median below the page cache's
  bool reads_measured() const { return !read_direct_s.empty() && !read_buffered_s.empty(); }
  bool read_direct() const;  // reads measured, direct's median below the cache's
  // "measured on this file system on DATE: past the page cache 0.80 s,
  // through it 1.90 s per 1.60 GB (medians of 5; 0.75-0.92 and 1.68-2.05)"
  std::string text() const;
  std::string read_text() const;  // the same for the reads
};

// "cpu MODEL; device NAME (MAJ:MIN); file system TYPE" of the folder's
// file system on this machine.
std::string write_mode_key(const std::string& folder);

// The write-mode records: write-modes.json in the user's cache folder
// (cache_file_path).
std::string write_mode_records_path();

// Every record. A file that cannot be read as records (damaged, not the
// user's): none, and `problem` says why in one line; no file: none, "".
std::vector<WriteModeRecord> read_write_mode_records(std::string& problem);

// The record for `folder` on this machine, if any (`problem` as above).
std::optional<WriteModeRecord> write_mode_record_for(const std::string& folder, std::string& problem);

// Adds `record` (replacing one of its key), the file put in place whole.
// IoError where it cannot be written.
void save_write_mode_record(const WriteModeRecord& record);

// Writes `bytes` into a new file in `folder` `repeats` times each way,
// alternating which goes first, each pass started with the device idle
// (the last one's file removed, synced, the device's busy time unchanged
// for half a second; a file system without a block device: a pause); the file is
// removed at the end. IoError where the folder refuses O_DIRECT (auto writes
// through the page cache there already) or a write fails.
WriteModeRecord measure_write_modes(const std::string& folder, double bytes, int repeats, std::ostream& progress);

// Waits until the device of `folder`'s file system is idle: synced, then
// its busy time unchanged for half a second (at most 30 s; a file system
// without a block device: a pause). CVEST_TUNE_NO_WAIT skips it (tests).
void wait_until_idle(const std::string& folder);

// What `auto` takes for an output of `bytes` in `folder`: what `cvest tune`
// measured on this machine's file system there (below), where
// it has; else (the stated default) direct writes where the output passes
// the write-back threshold, since below it the page cache takes the whole
// file without stalling and a final sync wrote it faster than direct writes
// did on one host (1.6 GB: 1.16 s against 2.09 s; 6.4 GB: direct 6.0-6.5 s
// against 11.7-14.5 s; docs/benchmarks.md). on and off stay; `because` says
// why an automatic choice went as it did (empty: the default, direct).
DirectMode choose_direct(DirectMode mode, double bytes, std::string& because, const std::string& folder = "");

// What `[input] direct = "auto"` takes for an input in `folder`: direct
// reads of what the cache does not hold unless `cvest tune` measured reads
// through the cache faster there; the stated default with no record is
// direct (cold inputs of 1.6, 6.8 and 24 GB: cvest 1.2-1.5x faster reading
// them direct; docs/benchmarks.md). on and off stay; `because` says
// why.
DirectMode choose_direct_reads(DirectMode mode, std::string& because, const std::string& folder);

}  // namespace cvest::app
