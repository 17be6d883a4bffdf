#include "io/output/OutputFile.hpp"

#include "core/Interrupt.hpp"
#include "io/cube/CubeDataset.hpp"
#include "io/hdf5/Creation.hpp"
#include "io/os/Faults.hpp"
#include "io/os/Publish.hpp"
#include "io/output/PartFile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace fs = std::filesystem;

namespace cvest::io {

double output_bytes(const OutputSpec& spec) {
  return double(spec.T * spec.N * spec.K) * double(element_size(spec.precision));
}


namespace {
// Once per folder in a process: a run whose output's file system refuses
// O_DIRECT writes through the page cache (the run table says so each time).
void say_buffered(const std::string& path, const RawCube& raw) {
  static std::mutex m;
  static std::set<std::string> said;
  const std::string folder = fs::path(path).parent_path().string();
  const std::lock_guard lock(m);
  if (said.insert(folder).second)
    fmt::print(stderr, "cvest: {}: {}; writing the output through the page cache\n", path, raw.writer()->why_buffered());
}

}  // namespace

std::size_t journal_batch_bytes() {
  const char* text = std::getenv("CVEST_JOURNAL_BATCH");
  return text && *text ? parse_bytes(text) : std::size_t(256) << 20;
}

std::string journal_path(const std::string& temp, int rank) { return temp + ".journal-" + std::to_string(rank); }

std::string seal_path(const std::string& temp) { return temp + ".sealed"; }

std::vector<std::string> journals_of(const std::string& temp) {
  std::vector<std::string> found;
  const fs::path t(temp);
  const std::string prefix = t.filename().string() + ".journal-";
  std::error_code ec;
  for (fs::directory_iterator it(output_dir(temp), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::string why;
    if (name.compare(0, prefix.size(), prefix) == 0 && name.find(".new") == std::string::npos &&
        own_regular_file(it->path().string(), why))
      found.push_back(it->path().string());
  }
  return found;
}

namespace {

// Write-behind on the HDF5 file's own descriptor (sec2 driver), in batches
// of 32 MiB; CVEST_WRITE_BEHIND=0 turns it off (for measuring one against
// the other). The writeback_eio fault fails it with EIO at its first chunk.
std::unique_ptr<WriteBehind> write_behind_for(const File& file) {
  const char* off = std::getenv("CVEST_WRITE_BEHIND");
  if (off && std::string(off) == "0") return nullptr;
  PropList access(H5Fget_access_plist(file.get()));
  void* handle = nullptr;
  if (!access || H5Pget_driver(access.get()) != H5FD_SEC2 ||
      H5Fget_vfd_handle(file.get(), access.get(), &handle) < 0 || !handle)
    return nullptr;
  const int fd = *static_cast<const int*>(handle);
  if (fault_injected("writeback_eio"))
    return std::make_unique<WriteBehind>(fd, 1, [](int, off_t, off_t, unsigned) { return errno = EIO, -1; });
  return std::make_unique<WriteBehind>(fd, std::size_t(32) << 20);
}

}  // namespace

Fingerprint OutputFile::seal_fingerprint() const {
  Fingerprint sealed = spec_.fingerprint;
  sealed["storage"] = to_text(spec_.compression);
  for (const auto& [key, value] : spec_.attributes) sealed["attribute " + key] = value;
  return sealed;
}

void OutputFile::seal() {
  seal_guard_ = std::make_unique<TempFileGuard>(seal_path(temp_path_));
  seal_guard_->keep_on_terminate_as_record();
  Journal::seal(seal_path(temp_path_), temp_path_, seal_fingerprint());
}

OutputFile::OutputFile(const OutputSpec& spec) : spec_(spec), temp_path_(temp_path_for(spec.path)) {
  // A scheduler's SIGTERM keeps the file wherever a record of it (a journal
  // holding a block, a seal) is on disk, and only there: the handler looks.
  temp_guard_.keep_on_terminate_if_recorded();
  check_output_path(spec.path, spec.overwrite);
  found_ = FileIdentity::at(spec.path);  // all that overwrite = true may replace
  chunk_ = spec.chunk_ids > 0 ? std::array<Index, 3>{1, std::min(spec.chunk_ids, spec.N), spec.K}
                              : cube_chunk(spec.N, spec.K, element_size(spec.precision));
  const bool journaled = spec.compression.kind == Compression::none && !spec.fingerprint.empty();
  if (!spec.fingerprint.empty() && spec.resume && adopt_sealed_run()) {
    clean_up_after_killed_runs(spec.path);
    return;
  }
  const bool adopted = journaled && spec.resume && adopt_killed_run();
  if (!journaled && !spec.fingerprint.empty() && !stale_temp_files(spec.path, false).empty())
    fmt::print(stderr, "cvest: {}: a run that stopped left its temporary file; a compressed output is not resumed "
                       "(HDF5 records where a compressed chunk lies only as it is stored, so that file's index is "
                       "incomplete): starting over\n", spec.path);
  if (!adopted) {
    clean_up_after_killed_runs(spec.path);
    if (const double bytes = output_bytes(spec); bytes > 0) check_free_space(spec.path, bytes);
    file_ = create_temp_file(spec.path, temp_path_, temp_guard_, made_, output_page_bytes);
    try {
      ds_ = create_dataset(file_, spec.dataset, spec.precision, {hsize_t(spec.T), hsize_t(spec.N), hsize_t(spec.K)},
                           {hsize_t(chunk_[0]), hsize_t(chunk_[1]), hsize_t(chunk_[2])}, spec.compression,
                           spec.path);
    } catch (...) {
      discard_temp();
      throw;
    }
  }
  coding_ = chunk_coding(spec.compression, element_size(spec.precision),
                         std::size_t(chunk_[0] * chunk_[1] * chunk_[2]) * element_size(spec.precision));
  if (spec.compression.kind != Compression::none && file_) write_behind_ = write_behind_for(file_);
  // Uncompressed chunks are written as they are: no chunk cache, no copy;
  // straight to their file offsets when the raw path qualifies.
  if (spec.compression.kind == Compression::none) {
    // The chunk index goes to disk before a second descriptor writes data.
    if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0) {
      discard_temp();
      throw IoError(spec.path + ": cannot allocate the output (disk full?)");
    }
    try {
      raw_ = RawCube::open(ds_, spec.path, native_type(spec.precision), true, spec.N, spec.K, spec.direct,
                           spec.direct_because, spec.direct_memory);
    } catch (...) {  // direct = true where O_DIRECT is refused
      discard_temp();
      throw;
    }
    if (raw_ && !raw_->writer()->direct() && spec.direct == DirectMode::automatic) say_buffered(spec.path, *raw_);
  }
  if (journaled) {
    // Guarded before it exists (it appears whole, renamed into place): a
    // signal between its creation and the guard left it behind
    // (cli.interrupted caught that). A scheduler's SIGTERM keeps it and the
    // temporary file once it records a block (the handler looks: marking
    // the file kept only after the journal appeared once left a journal
    // without its file, seen in CI; a journal of no blocks resumes nothing);
    // SIGINT removes both.
    journal_guard_ = std::make_unique<TempFileGuard>(journal_path(temp_path_, spec.rank));
    journal_guard_->keep_on_terminate_as_record(LLONG_MAX);
    try {
      journal_ = std::make_unique<Journal>(journal_path(temp_path_, spec.rank), temp_path_, spec.fingerprint, resumed_,
                                           journal_batch_bytes());
    } catch (...) {
      discard_temp();
      throw;
    }
    // Over several ranks the others' journals may hold blocks while this
    // one holds none (their slots are in their processes): kept once it exists.
    journal_guard_->keep_on_terminate_as_record(spec.ranks > 1 ? 0 : journal_->header_bytes() + Journal::record_bytes - 1);
    stop_if_injected("output.journal_made");
    if (adopted) clean_up_after_killed_runs(spec.path);  // the old journals, now that this one holds their blocks
  }
}

void OutputFile::discard_temp() {
  ds_.reset();
  file_.reset();
  std::error_code ec;
  fs::remove(temp_path_, ec);
}

namespace {

// Whether compressing can pay on this machine: the coding's rate on this
// process's threads against the rate `cvest tune` measured the disk writing
// plain bytes at in the output's folder (handed in by the app). Below it,
// coding alone takes longer than writing the plain bytes would.
std::string compression_pays_text(const CodingStats& stats, const OutputSpec& spec) {
  const double plain = double(stats.plain_bytes.load()), stored = double(stats.stored_bytes.load());
  const int threads = std::max(1, omp_get_max_threads());
  const double coding_s = double(stats.nanoseconds.load()) * 1e-9 / threads;
  if (plain <= 0 || coding_s <= 0) return "";
  const double disk = spec.disk_bytes_per_s;
  if (disk <= 0)
    return "; the disk's plain rate here is not measured (`cvest tune " + output_dir(spec.path).string() +
           "` measures it), so whether compressing pays is not said";
  const double rate = plain / coding_s;
  return fmt::format("; coding ran at {:.2f} GB/s on {} threads, {} the {:.2f} GB/s the disk writes plain bytes at "
                     "here (cvest tune, {}): {}",
                     rate / 1e9, threads, rate > disk ? "above" : "below", disk / 1e9, spec.disk_measured_on,
                     rate > disk && stored < plain
                         ? fmt::format("compressed ({:.0f}% of the bytes), the output can reach the disk faster than "
                                       "plain", 100.0 * stored / plain)
                     : rate > disk ? std::string("but nothing was smaller compressed")
                                   : std::string("plain, the output would reach the disk faster"));
}

}  // namespace

std::string OutputFile::writes_text() const {
  if (sealed_) return "by a run that stopped before putting it in place";
  if (raw_) return raw_->writer()->text() + (journal_ ? "; " + journal_->text() : std::string());
  if (!writes_text_.empty()) return writes_text_;
  if (spec_.compression.kind == Compression::none) return "through HDF5 (H5Dwrite)";
  const std::string coded = coding_stats_.text();
  if (spec_.ranks > 1)  // the other ranks' coding is theirs: rank 0's share alone would mislead
    return "through HDF5 (compressed chunks" + (coded.empty() ? "" : "; rank 0's share: " + coded) + ")";
  return "through HDF5 (compressed chunks" + (coded.empty() ? "" : ": " + coded + " by cvest's threads") +
         compression_pays_text(coding_stats_, spec_) + ")";
}

OutputFile::~OutputFile() {
  raw_.reset();
  journal_.reset();
  if (!committed_) {
    // The records first: a SIGTERM meanwhile must not keep one without its file.
    std::error_code ec;
    for (const std::string& j : journals_of(temp_path_)) fs::remove(j, ec);
    fs::remove(seal_path(temp_path_), ec);
    discard_temp();
  }
}

void write_raw_block(RawCube& raw, Journal* journal, const OutputSpec& spec, const Block& b, const void* buffer) {
  raw.write(b, buffer);
  if (journal) journal->written(b, std::size_t(b.dates.size() * b.ids.size() * spec.K) * element_size(spec.precision));
}

void OutputFile::write(const Block& b, const void* buffer) {
  throw_if_interrupted();
  if (raw_) return write_raw_block(*raw_, journal_.get(), spec_, b, buffer);
  slow_write_if_injected();
  const std::string what = spec_.path + ": dataset '" + spec_.dataset + "'";
  const bool aligned = b.ids.begin % chunk_[1] == 0 && (b.ids.end % chunk_[1] == 0 || b.ids.end == spec_.N);
  if (!aligned) {
    write_hyperslab(ds_, native_type(spec_.precision), {b.dates.begin, b.ids.begin, 0},
                    {b.dates.size(), b.ids.size(), spec_.K}, buffer, what);
    return;
  }
  quiet_hdf5_errors();  // this thread's
  store_chunks(coding_, spec_.K, element_size(spec_.precision), chunk_, b, buffer,
               [&](const StoredChunk& c) { store(c); }, &coding_stats_);
}

void OutputFile::store(const StoredChunk& c) {
  const std::string what = spec_.path + ": dataset '" + spec_.dataset + "'";
  if (!c.data)
    throw IoError(what + ": compressing the chunk at " + origin_text(c) + " failed: " +
                  (c.error.empty() ? "out of memory?" : c.error));
  const hsize_t offset[3] = {hsize_t(c.t), hsize_t(c.i), 0};
  if (fault_injected("write") || H5Dwrite_chunk(ds_.get(), H5P_DEFAULT, c.skipped, offset, c.bytes, c.data) < 0) {
    // The failure's entries on this thread's HDF5 error stack hold strings
    // HDF5 1.10.8 never frees if the thread (a pipeline's writer) ends with
    // them there (LeakSanitizer on a full tmpfs): cleared now.
    H5Eclear2(H5E_DEFAULT);
    throw IoError(what + ": write of chunk at " + origin_text(c) + " failed (disk full?)");
  }
  if (write_behind_) {
    write_behind_->wrote(c.bytes);
    if (const int e = write_behind_->error())  // seen now, so a later fsync would not report it
      throw IoError(what + ": write failed: " + std::strerror(e) + (e == ENOSPC ? " (disk full)" : ""));
  }
}

std::vector<std::uint64_t> OutputFile::share() const {
  // The chunk's ids and the filters' count: the other ranks code chunks as
  // this rank's spec does (chunk_coding), and check that they agree.
  std::vector<std::uint64_t> description{std::uint64_t(chunk_[1]), coding_.codecs.size()};
  if (raw_) {
    const auto placement = raw_->placement();
    description.insert(description.end(), placement.begin(), placement.end());
  } else if (spec_.compression.kind == Compression::none) {
    throw IoError(spec_.path + ": the output cannot be written at its file offsets, which a distributed run needs");
  }
  return description;
}

void OutputFile::store_part(const std::string& part) {
  read_part(part, [&](const PartRecord& r, unsigned char* data) {
    if (r.kind == PartRecord::block)
      write_hyperslab(ds_, native_type(spec_.precision), {r.t0, r.i0, 0}, {r.t1 - r.t0, r.i1 - r.i0, spec_.K}, data,
                      spec_.path + ": dataset '" + spec_.dataset + "'");
    else
      store(StoredChunk{r.t0, r.i0, data, std::size_t(r.bytes), r.skipped, {}});
  });
}

void OutputFile::commit(const std::map<std::string, std::string>& attributes, hid_t scales_like) {
  writes_text_ = writes_text();
  raw_.reset();
  if (!sealed_) finish(attributes, scales_like);
  // Step by step (io/os/Publish.hpp): spec.path holds the old file or this one,
  // whole, throughout; the seal goes only once the name is on disk.
  publish(temp_path_, made_, spec_.path, {found_, spec_.overwrite}, "output", spec_.path, -1, [this] {
    // The file has its name: the temporary name now holds the replaced file
    // (or nothing), and the seal speaks of a file no longer there.
    temp_guard_.remove_on_terminate();
    if (seal_guard_) seal_guard_->remove_on_terminate();
  });
  committed_ = true;
  std::error_code ec;
  fs::remove(seal_path(temp_path_), ec);
  seal_guard_.reset();
}

void OutputFile::finish(const std::map<std::string, std::string>& attributes, hid_t scales_like) {
  // Metadata changes from here on: the journals go first (a file killed
  // while HDF5 rewrites its metadata is not resumed: it is written again).
  // A sync the journal's thread saw fail is this run's failure: the pages it
  // could not write may be gone, and the fsync below would not say so.
  if (journal_) journal_->close();
  journal_.reset();
  std::error_code ec;
  for (const std::string& j : journals_of(temp_path_)) fs::remove(j, ec);
  journal_guard_.reset();
  stop_if_injected("output.journal_gone");
  for (const auto& [k, v] : attributes) write_string_attribute(ds_.get(), k, v);
  const std::size_t slash = spec_.dataset.rfind('/');
  attach_dimension_scales(file_, ds_, slash == std::string::npos ? "" : spec_.dataset.substr(0, slash + 1),
                          {"date", "id", "col"}, {spec_.T, spec_.N, spec_.K}, spec_.path, scales_like);
  ds_.reset();
  if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0) throw IoError(spec_.path + ": flush failed (disk full?)");
  file_.reset();
  if (spec_.fingerprint.empty()) return;
  // HDF5 closes without syncing: the file is on disk whole before its seal
  // says so, and the seal before the rename it stands in for.
  sync_made(temp_path_, made_, spec_.path);
  seal();
  stop_if_injected("output.sealed");
  if (fault_injected("kill_at_commit")) ::raise(SIGKILL);
}

}  // namespace cvest::io
