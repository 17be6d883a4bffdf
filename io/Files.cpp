#include "io/Files.hpp"

#include "core/Interrupt.hpp"
#include "io/Faults.hpp"

#include <Kokkos_Core.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <libdeflate.h>
#include <lzf.h>
#include <mutex>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/statvfs.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace fs = std::filesystem;

namespace cvest::io {

void clean_up_after_killed_runs(const std::string& path) {
  for (const std::string& stale : remove_stale_temp_files(path))
    fmt::print(stderr, "cvest: removed {}, left by a run of {} on this host that no longer runs\n", stale, path);
}

namespace {

// Creates a new HDF5 file at a fresh temporary name beside `path`
// (temp_path_for; H5F_ACC_EXCL: never an existing name, and so never through
// a link planted there), registered with `guard`, and checks that what HDF5
// holds open is a regular file of ours at that name. `temp` is the name to
// try first (empty: a fresh one) and, on return, the name used.
// `page` > 0: objects of a page or more (an output's chunks) start on a page
// boundary, so the ranks of a distributed run, which split the output at
// chunk boundaries, never write into the same page (which NFS clients may
// write back whole, and Lustre locks).
File create_temp_file(const std::string& path, std::string& temp, TempFileGuard& guard, hsize_t page = 0) {
  const PropList access(H5Pcreate(H5P_FILE_ACCESS));
  if (page > 0) H5Pset_alignment(access.get(), page, page);
  constexpr int attempts = 16;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0 || temp.empty()) {
      temp = temp_path_for(path);
      guard.retarget(temp);
    }
    struct stat st {};
    if (::lstat(temp.c_str(), &st) == 0) continue;  // taken (a clash, or a name planted there): another name
    File file(H5Fcreate(temp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, access.get()));
    if (!file) {
      std::string why;
      if (::lstat(temp.c_str(), &st) != 0) throw IoError(path + ": cannot create (directory missing or not writable?)");
      if (!own_regular_file(temp, why)) continue;  // planted meanwhile: left alone, another name
      ::unlink(temp.c_str());  // HDF5 created it, then failed
      throw IoError(path + ": cannot create " + temp + " (disk full?)");
    }
    void* handle = nullptr;
    struct stat held {}, named {};
    if (H5Fget_vfd_handle(file.get(), access.get(), &handle) < 0 || !handle ||
        ::fstat(*static_cast<const int*>(handle), &held) != 0 || ::lstat(temp.c_str(), &named) != 0 ||
        !S_ISREG(held.st_mode) || held.st_uid != ::geteuid() || held.st_dev != named.st_dev ||
        held.st_ino != named.st_ino)
      throw IoError(path + ": " + temp + " is not the file this run just created there (replaced by another "
                           "process?); left as it is");
    return file;
  }
  throw IoError(path + ": cannot create a temporary file beside it: " + std::to_string(attempts) +
                " fresh names were all taken");
}

// What h5py's lzf filter records with it: its revision, liblzf's API
// version, and the chunk's bytes (which size the reader's buffer).
constexpr unsigned h5py_lzf_revision = 4;

// gzip: shuffle, deflate at gzip_level; lzf: shuffle, h5py's lzf (optional,
// so a chunk lzf cannot shrink is stored shuffled with the filter skipped, as
// h5py does).
Dataset create_dataset(const File& file, const std::string& name, Precision precision, const std::vector<hsize_t>& dims,
                       const std::vector<hsize_t>& chunk, Compression compression, int gzip_level,
                       const std::string& shown) {
  Dataspace space(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
  PropList create(H5Pcreate(H5P_DATASET_CREATE));
  // No creation and modification times in the object header: the same job
  // writes the same bytes, whenever and on however many ranks it runs.
  H5Pset_obj_track_times(create.get(), false);
  H5Pset_chunk(create.get(), int(chunk.size()), chunk.data());
  if (compression != Compression::none) H5Pset_shuffle(create.get());
  if (compression == Compression::gzip) H5Pset_deflate(create.get(), unsigned(gzip_level));
  if (compression == Compression::lzf) {
    hsize_t chunk_elements = 1;
    for (const hsize_t c : chunk) chunk_elements *= c;
    const unsigned values[3] = {h5py_lzf_revision, LZF_VERSION, unsigned(chunk_elements * element_size(precision))};
    // HDF5 here has no lzf filter: an optional one can still be named, and
    // cvest stores chunks it compressed itself.
    H5Pset_filter(create.get(), h5py_lzf_filter, H5Z_FLAG_OPTIONAL, 3, values);
  }
  // Nothing is pre-filled. Uncompressed chunks are allocated up front, so
  // their addresses are known and blocks can be written with pwrite.
  H5Pset_fill_time(create.get(), H5D_FILL_TIME_NEVER);
  if (compression == Compression::none) H5Pset_alloc_time(create.get(), H5D_ALLOC_TIME_EARLY);
  const hid_t type = precision == Precision::f64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE;
  PropList link(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(link.get(), 1);  // "results/cv": the group comes with it
  Dataset ds(H5Dcreate2(file.get(), name.c_str(), type, space.get(), link.get(), create.get(), H5P_DEFAULT));
  if (!ds) throw IoError(shown + ": cannot create dataset '" + name + "'");
  return ds;
}

// fsync of the file or directory at `path` (a file: never through a link);
// IoError (never retried: a failed fsync may have dropped the pages it could
// not write) naming `shown`.
void sync_file(const std::string& path, const std::string& shown, bool directory = false) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : O_NOFOLLOW));
  if (fd < 0) throw IoError(shown + ": cannot open " + path + " to sync it: " + std::strerror(errno));
  const int rc = fault_injected("fsync") ? (errno = EIO, -1) : ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) throw IoError(shown + ": sync failed: " + std::strerror(error));
}

void rename_into_place(const std::string& temp, const std::string& path, const FileIdentity& found, bool overwrite) {
  const FileIdentity now = FileIdentity::at(path);
  if (now.exists && (!overwrite || !found.exists || now != found))
    throw IoError(path + (found.exists ? ": was replaced by another process while this run wrote its output; left as "
                                         "it is, this run's output discarded"
                                       : ": appeared while this run wrote its output (another process wrote it); left "
                                         "as it is, this run's output discarded"));
  std::error_code ec;
  if (now.exists) {
    // What the run found at the start is replaced, and only that. It goes
    // first: ext4 flushes a file renamed over an existing one (auto_da_alloc)
    // inside rename, which took 1.8-2.4 s for a 1.6 GB output; renamed onto
    // a free name it is written back as any new file is.
    fs::remove(path, ec);
  }
  if (!rename_without_replacing(temp, path)) {
    const int error = errno;
    if (error == EEXIST)
      throw IoError(path + ": appeared while this run wrote its output (another process wrote it); left as it is, "
                           "this run's output discarded");
    throw IoError(path + ": cannot rename the finished output into place: " + std::strerror(error));
  }
}

// The directory an output at `path` goes in.
fs::path output_dir(const std::string& path) {
  return fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
}

// The nearest directory at or above `dir` that exists: where a directory not
// made yet would be made, and so the file system it would be on.
fs::path existing_ancestor(fs::path dir) {
  std::error_code ec;
  while (!fs::exists(dir, ec)) {
    if (!dir.has_parent_path()) return ".";  // "gen": made in the working directory
    if (dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  return dir;
}
}  // namespace

void check_output_path(const std::string& path, bool overwrite, bool create_dir, const std::string& to_replace) {
  std::error_code ec;
  // A result is put in place by renaming onto its path, which replaces a
  // link rather than the file it points at: refused, so neither happens unasked.
  if (fs::is_symlink(path, ec))
    throw InputError(path + ": output is a symbolic link (to " + fs::read_symlink(path, ec).string() +
                     "); cvest puts a finished file in place by renaming, which would replace the link, not write "
                     "where it points: give the target's own path, or remove the link");
  if (fs::exists(path, ec) && !overwrite) throw InputError(path + ": output exists; " + to_replace + " to replace it");
  if (fs::is_directory(path, ec)) throw InputError(path + ": output is a directory");
  const fs::path dir = output_dir(path);
  if (create_dir) {
    fs::create_directories(dir, ec);
    if (!fs::is_directory(dir, ec)) throw IoError(path + ": cannot create the output directory " + dir.string());
  }
  // Without creating it: the directory, or where it would be made, must be writable.
  const fs::path writable = create_dir ? dir : existing_ancestor(dir);
  if (!fs::is_directory(writable, ec)) throw IoError(path + ": cannot create the output directory " + dir.string());
  if (::access(writable.c_str(), W_OK) != 0)
    throw IoError(path + ": output directory " + writable.string() + " is not writable");
}

void write_whole_file(const std::string& path, const std::string& text, const std::string& what) {
  std::string temp = temp_path_for(path);
  TempFileGuard guard(temp);
  const int fd = create_exclusive_temp(path, temp, guard);
  if (fd < 0) throw IoError(path + ": cannot write " + what + ": " + std::strerror(errno));
  try {
    write_at(fd, text.data(), text.size(), 0, path);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::close(fd) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
    const int why = errno;
    ::unlink(temp.c_str());
    throw IoError(path + ": cannot write " + what + ": " + std::strerror(why));
  }
}

FileIdentity FileIdentity::of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
}

FileIdentity FileIdentity::at(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return {true, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
}

namespace {
// Opens the lock file at `lock` for OutputLock: created new (exclusive, ours)
// or, where one is there, opened without following a link and checked to be
// a regular file. `owned`: the running user's, so its holder line may be
// written and the file removed; another user's is only locked (flock
// changes no byte of it). IoError naming what is there otherwise.
int open_lock_file(const std::string& path, const std::string& lock, bool& owned) {
  int fd = create_exclusive(lock, O_RDWR);
  if (fd >= 0) return owned = true, fd;
  if (errno == EEXIST) {
    fd = ::open(lock.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) fd = ::open(lock.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  }
  if (fd < 0 && errno == ENOENT) return -1;  // its holder removed it meanwhile: try again
  if (fd < 0 && errno == ELOOP)
    throw IoError(path + ": the lock file " + lock + " is a symbolic link, which cvest does not follow; left as it "
                         "is: remove it (someone else may have planted it), or write elsewhere");
  if (fd < 0) throw IoError(path + ": cannot create the lock file " + lock + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(path + ": the lock file " + lock + " is not a regular file; left as it is: remove it, or write "
                         "elsewhere");
  }
  owned = st.st_uid == ::geteuid();
  return fd;
}
}  // namespace

OutputLock::OutputLock(const std::string& path) {
  const fs::path p(path);
  lock_path_ = (output_dir(path) / ("." + p.filename().string() + ".lock")).string();
  bool owned = false;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 100) throw IoError(path + ": cannot take the lock " + lock_path_ + " (it keeps being replaced)");
    fd_ = open_lock_file(path, lock_path_, owned);
    if (fd_ < 0) continue;
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      if (error != EWOULDBLOCK) {  // no locks on this file system: say so, go on
        fmt::print(stderr, "cvest: warning: {}: cannot lock {} ({}): two runs writing it at once will not be told "
                           "apart until the end\n", path, lock_path_, std::strerror(error));
        ::close(fd_);
        if (owned) ::unlink(lock_path_.c_str());
        fd_ = -1;
        lock_path_.clear();
        return;
      }
      char holder[256] = {};
      const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
      ::close(fd_);
      fd_ = -1;
      std::string who(holder, std::size_t(std::max<ssize_t>(n, 0)));
      while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
      throw IoError(path + ": another cvest run is writing it (" + (who.empty() ? "a process" : who) +
                    "); wait for it to finish, or write elsewhere");
    }
    // The last holder may have removed the file between our open and lock:
    // then this lock guards nothing; take the file now at the path.
    struct stat held {}, at_path {};
    if (::fstat(fd_, &held) == 0 && ::lstat(lock_path_.c_str(), &at_path) == 0 && held.st_ino == at_path.st_ino &&
        held.st_dev == at_path.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
  }
  owned_ = owned;
  if (!owned_) return;  // another user's file: locked, never written or removed
  guard_ = std::make_unique<TempFileGuard>(lock_path_);  // a signal removes it too
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me = fmt::format("pid {} on {}\n", ::getpid(), host);
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
    // Who holds it is only for the message of a run refused; the lock holds.
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  if (owned_) ::unlink(lock_path_.c_str());  // while still locked: a run waiting on this file retries on the path
  ::close(fd_);
}

double generated_bytes(const GenerateSpec& spec) {
  return double(spec.dates * spec.ids * spec.cols + spec.ids * spec.cols) * double(element_size(spec.precision));
}

double output_bytes(const OutputSpec& spec) {
  return spec.compression == Compression::gzip ? 0.0 : double(spec.T * spec.N * spec.K) * double(element_size(spec.precision));
}

double free_space(const std::string& path) {
  struct statvfs vfs {};
  if (::statvfs(existing_ancestor(output_dir(path)).c_str(), &vfs) != 0) return -1;
  if (vfs.f_blocks == 0) return -1;  // no size to tell (ramfs, some FUSE and network file systems)
  return double(vfs.f_bavail) * double(vfs.f_frsize);
}

void check_free_space(const std::string& path, double bytes) { check_free_space({{path, bytes}}); }

void check_free_space(const std::vector<std::pair<std::string, double>>& files) {
  // Files grouped by the file system (device) they would be on, in order.
  std::vector<std::pair<dev_t, std::vector<std::size_t>>> groups;
  for (std::size_t f = 0; f < files.size(); ++f) {
    if (files[f].second <= 0) continue;
    struct stat st {};
    if (::stat(existing_ancestor(output_dir(files[f].first)).c_str(), &st) != 0) continue;
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == st.st_dev; });
    if (group == groups.end()) groups.push_back({st.st_dev, {f}});
    else group->second.push_back(f);
  }
  for (const auto& [device, members] : groups) {
    const double available = free_space(files[members.front()].first);
    if (available < 0) continue;  // unknown: a failing write still says so
    double needed = 0;
    std::string names;
    for (const std::size_t f : members) {
      needed += files[f].second + double(1 << 20);  // HDF5's metadata, dimension scales
      names += (names.empty() ? "" : " and ") + files[f].first;
    }
    if (needed <= available) continue;
    if (members.size() == 1)
      throw IoError(names + ": needs " + format_bytes(needed) + " of disk, the file system holding it has " +
                    format_bytes(available) + " free");
    throw IoError(names + ": need " + format_bytes(needed) + " of disk together, the file system holding them has " +
                  format_bytes(available) + " free");
  }
}
// --- generated input --------------------------------------------------------

double generated_value(std::uint64_t seed, int stream, std::uint64_t index) {
  // splitmix64 of (seed, stream, index): reproducible and cheap.
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + (std::uint64_t(stream) << 60) + index * 0xD1B54A32D192ED03ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const double u = double(z >> 11) * 0x1.0p-53;  // [0, 1)
  return stream == 0 ? 0.5 + u : 0.05 + 0.95 * u;  // multBy in [0.5, 1.5), discount in [0.05, 1)
}

void generate_input(const std::string& path, const GenerateSpec& spec, bool overwrite) {
  if (spec.dates <= 0 || spec.ids <= 0 || spec.cols <= 0)
    throw InputError(path + ": generate needs positive dates, ids and cols");
  check_output_path(path, overwrite, true, "pass --overwrite");  // a deck's input is generated only where missing
  const FileIdentity found = FileIdentity::at(path);
  clean_up_after_killed_runs(path);
  check_free_space(path, generated_bytes(spec));
  std::string temp = temp_path_for(path);
  TempFileGuard guard(temp);
  File file = create_temp_file(path, temp, guard);
  try {
    const auto chunk = cube_chunk(spec.ids, spec.cols, element_size(spec.precision));
    const hsize_t T = spec.dates, N = spec.ids, K = spec.cols;
    Dataset m = create_dataset(file, "multBy", spec.precision, {N, K}, {hsize_t(chunk[1]), K}, Compression::none, 0, path);
    Dataset d = create_dataset(file, "discount", spec.precision, {T, N, K}, {1, hsize_t(chunk[1]), K}, Compression::none, 0, path);
    using Host = Kokkos::DefaultHostExecutionSpace;
    const Index NK = spec.ids * spec.cols;
    const std::uint64_t seed = spec.seed;
    const bool f64 = spec.precision == Precision::f64;
    // One date of values at a time (a 10M x 5 date is 400 MB in double).
    Kokkos::View<double*, Kokkos::HostSpace> vd(Kokkos::view_alloc("cvest::generate::values", Kokkos::WithoutInitializing), NK);
    Kokkos::View<float*, Kokkos::HostSpace> vf(Kokkos::view_alloc("cvest::generate::values_f32", Kokkos::WithoutInitializing), f64 ? 0 : NK);
    const auto fill = [&](int stream, Index base) {
      Kokkos::parallel_for("cvest::generate::fill", Kokkos::RangePolicy<Host, Kokkos::IndexType<Index>>(0, NK), [=](Index j) {
        const double v = generated_value(seed, stream, std::uint64_t(base + j));
        if (f64) vd(j) = v;
        else vf(j) = float(v);
      });
      Kokkos::fence();
      return f64 ? static_cast<const void*>(vd.data()) : static_cast<const void*>(vf.data());
    };
    write_hyperslab(m, native_type(spec.precision), {0, 0}, {spec.ids, spec.cols}, fill(0, 0), path + ": dataset 'multBy'");
    for (Index t = 0; t < spec.dates; ++t) {
      slow_write_if_injected();
      write_hyperslab(d, native_type(spec.precision), {t, 0, 0}, {1, spec.ids, spec.cols}, fill(1, t * NK),
                      path + ": dataset 'discount'");
    }
    write_string_attribute(d.get(), "generator", "cvest generate seed=" + std::to_string(spec.seed));
    d.reset();
    m.reset();
    if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) throw IoError(path + ": flush failed (disk full?)");
    file.reset();
    rename_into_place(temp, path, found, overwrite);
  } catch (...) {
    file.reset();
    std::error_code ec;
    fs::remove(temp, ec);
    throw;
  }
}

// --- output -------------------------------------------------------------------

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

// The bit of H5Dwrite_chunk's filter mask that says `filter` was skipped for
// a chunk: its position in the dataset's pipeline.
unsigned filter_mask_bit(const Dataset& ds, H5Z_filter_t filter) {
  const auto filters = filters_of(PropList(H5Dget_create_plist(ds.get())));
  for (std::size_t f = 0; f < filters.size(); ++f)
    if (filters[f].id == filter) return 1u << f;
  throw std::logic_error("cvest: the output's filter pipeline lacks the filter it was created with");
}
}  // namespace

std::size_t journal_batch_bytes() {
  const char* text = std::getenv("CVEST_JOURNAL_BATCH");
  return text && *text ? parse_bytes(text) : std::size_t(256) << 20;
}

std::string journal_path(const std::string& temp, int rank) { return temp + ".journal-" + std::to_string(rank); }

namespace {
// The journals beside the temporary file `temp`, of every rank: regular
// files of the running user's only (a link or another user's file at such a
// name is neither read nor removed).
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
}  // namespace

bool OutputFile::adopt_killed_run() {
  for (const std::string& candidate : stale_temp_files(spec_.path, false)) {
    const std::vector<std::string> journals = journals_of(candidate);
    if (journals.empty()) continue;  // killed before its first journal: nothing to resume
    std::vector<Block> done;
    std::string why;
    bool matches = true;
    for (const std::string& j : journals) {
      const auto blocks = Journal::read(j, candidate, spec_.fingerprint, why);
      if (!blocks) {
        matches = false;
        break;
      }
      done.insert(done.end(), blocks->begin(), blocks->end());
    }
    if (!matches) {
      fmt::print(stderr, "cvest: not resuming {} (left by a run that stopped): {}; starting over\n", candidate, why);
      continue;
    }
    if (done.empty()) {  // stopped before its first block was recorded: nothing to continue from
      fmt::print(stderr, "cvest: not resuming {} (left by a run that stopped): it recorded no finished blocks; "
                         "starting over\n", candidate);
      continue;
    }
    // Taken over under this run's own (fresh) name, and only the file its
    // journals named: one swapped in meanwhile is left where it now is.
    const FileIdentity named = FileIdentity::at(candidate);
    if (!rename_without_replacing(candidate, temp_path_)) continue;
    if (FileIdentity::at(temp_path_) != named) {
      fmt::print(stderr, "cvest: not resuming {}: it was replaced while this run took it over; left as {}, starting "
                         "over\n", candidate, temp_path_);
      temp_path_ = temp_path_for(spec_.path);
      temp_guard_.retarget(temp_path_);
      return false;
    }
    File file(H5Fopen(temp_path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    Dataset ds(file ? H5Dopen2(file.get(), spec_.dataset.c_str(), H5P_DEFAULT) : H5I_INVALID_HID);
    if (!ds) {
      fmt::print(stderr, "cvest: not resuming {}: its file does not open as HDF5; starting over\n", candidate);
      std::error_code ec;
      fs::remove(temp_path_, ec);
      continue;
    }
    file_ = std::move(file);
    ds_ = std::move(ds);
    resumed_ = std::move(done);
    double bytes = 0;
    for (const Block& b : resumed_) bytes += double(b.dates.size() * b.ids.size() * spec_.K);
    fmt::print(stderr, "cvest: resuming {}: {} blocks ({}) are on disk from a run that stopped ({})\n", spec_.path,
               resumed_.size(), format_bytes(bytes * double(element_size(spec_.precision))), candidate);
    return true;
  }
  return false;
}

OutputFile::OutputFile(const OutputSpec& spec) : spec_(spec), temp_path_(temp_path_for(spec.path)) {
  check_output_path(spec.path, spec.overwrite);
  found_ = FileIdentity::at(spec.path);  // all that overwrite = true may replace
  chunk_ = spec.chunk_ids > 0 ? std::array<Index, 3>{1, std::min(spec.chunk_ids, spec.N), spec.K}
                              : cube_chunk(spec.N, spec.K, element_size(spec.precision));
  const bool journaled = spec.compression == Compression::none && !spec.fingerprint.empty();
  const bool adopted = journaled && spec.resume && adopt_killed_run();
  if (!journaled && !spec.fingerprint.empty() && !stale_temp_files(spec.path, false).empty())
    fmt::print(stderr, "cvest: {}: a run that stopped left its temporary file; a compressed output is not resumed "
                       "(HDF5 records where a compressed chunk lies only as it is stored, so that file's index is "
                       "incomplete): starting over\n", spec.path);
  if (!adopted) {
    clean_up_after_killed_runs(spec.path);
    if (const double bytes = output_bytes(spec); bytes > 0) check_free_space(spec.path, bytes);
    file_ = create_temp_file(spec.path, temp_path_, temp_guard_, output_page_bytes);
    try {
      ds_ = create_dataset(file_, spec.dataset, spec.precision, {hsize_t(spec.T), hsize_t(spec.N), hsize_t(spec.K)},
                           {hsize_t(chunk_[0]), hsize_t(chunk_[1]), hsize_t(chunk_[2])}, spec.compression,
                           spec.gzip_level, spec.path);
    } catch (...) {
      file_.reset();
      std::error_code ec;
      fs::remove(temp_path_, ec);
      throw;
    }
  }
  if (spec.compression == Compression::lzf) lzf_skipped_mask_ = filter_mask_bit(ds_, h5py_lzf_filter);
  // Uncompressed chunks are written as they are: no chunk cache, no copy;
  // straight to their file offsets when the raw path qualifies.
  if (spec.compression == Compression::none) {
    // The chunk index goes to disk before a second descriptor writes data.
    if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0) {
      ds_.reset();
      file_.reset();
      std::error_code ec;
      fs::remove(temp_path_, ec);
      throw IoError(spec.path + ": cannot allocate the output (disk full?)");
    }
    std::string because;
    const DirectWrites direct = choose_direct(spec.direct, output_bytes(spec), because);
    try {
      raw_ = RawCube::open(ds_, spec.path, native_type(spec.precision), true, spec.N, spec.K, direct, because);
    } catch (...) {  // direct = true where O_DIRECT is refused
      ds_.reset();
      file_.reset();
      std::error_code ec;
      fs::remove(temp_path_, ec);
      throw;
    }
    if (raw_ && !raw_->writer()->direct() && direct == DirectWrites::automatic) say_buffered(spec.path, *raw_);
  }
  if (journaled) {
    // Guarded before it exists (it appears whole, renamed into place): a
    // signal between its creation and the guard left it behind
    // (cli.interrupted caught that). A scheduler's SIGTERM keeps it and,
    // once it exists, the temporary file for the next run; SIGINT removes both.
    journal_guard_ = std::make_unique<TempFileGuard>(journal_path(temp_path_, spec.rank));
    journal_guard_->keep_on_terminate(true);
    try {
      journal_ = std::make_unique<Journal>(journal_path(temp_path_, spec.rank), temp_path_, spec.fingerprint, resumed_,
                                           journal_batch_bytes());
    } catch (...) {
      ds_.reset();
      file_.reset();
      std::error_code ec;
      fs::remove(temp_path_, ec);
      throw;
    }
    temp_guard_.keep_on_terminate(true);
    if (adopted) clean_up_after_killed_runs(spec.path);  // the old journals, now that this one holds their blocks
  }
}

std::string OutputFile::writes_text() const {
  if (raw_) return raw_->writer()->text();
  if (!writes_text_.empty()) return writes_text_;
  return spec_.compression == Compression::none ? "through HDF5 (H5Dwrite)" : "through HDF5 (compressed chunks)";
}

OutputFile::~OutputFile() {
  raw_.reset();
  journal_.reset();
  if (!committed_) {
    ds_.reset();
    file_.reset();
    std::error_code ec;
    fs::remove(temp_path_, ec);
    for (const std::string& j : journals_of(temp_path_)) fs::remove(j, ec);
  }
}

namespace {

// zlib streams (what HDF5's deflate filter reads) from libdeflate: whole
// buffers, as chunks are, at about twice zlib's speed for the same ratio.
// One compressor per thread and level, kept for the thread's life.
libdeflate_compressor* thread_compressor(int level) {
  struct Compressor {
    int level = -1;
    libdeflate_compressor* c = nullptr;
    ~Compressor() { libdeflate_free_compressor(c); }
  };
  thread_local Compressor mine;
  if (mine.level != level) {
    libdeflate_free_compressor(mine.c);
    mine.c = libdeflate_alloc_compressor(level);
    mine.level = mine.c ? level : -1;
  }
  return mine.c;
}

}  // namespace

namespace {

// A chunk as it goes into the file: its first date and id, the bytes as
// stored (compressed or not; nullptr where compression failed) and
// H5Dwrite_chunk's mask of the filters skipped.
struct StoredChunk {
  Index t, i;
  const unsigned char* data;
  std::size_t bytes;
  unsigned skipped;
};

// A block of whole (1, chunk_ids, K) chunks as stored chunks, in order. A
// gzip chunk is shuffled and deflated outside HDF5's global lock (the byte
// order of HDF5's shuffle filter, a zlib stream as its deflate filter
// writes): the threads of the per-thread pipeline each compress their own
// blocks, and a reader never waits for a compression. Called from outside a
// parallel region (the overlapped pipeline's writer thread), a block's
// chunks are compressed by an OpenMP team, then stored in order. Scratch
// buffers are per thread.
template <class Store>
void store_chunks(const OutputSpec& spec, const std::array<Index, 3>& chunk, unsigned lzf_skipped_mask, const Block& b,
                  const void* buffer, Store&& store) {
  const std::size_t es = element_size(spec.precision);
  const auto* bytes = static_cast<const unsigned char*>(buffer);
  const std::size_t chunk_bytes = std::size_t(chunk[1] * spec.K) * es;
  struct Piece {
    Index t, i;
    std::size_t stored;  // bytes to store; 0 when compression failed
    unsigned skipped;    // filters not applied (H5Dwrite_chunk's mask): lzf when it could not shrink the chunk
  };
  std::vector<Piece> pieces;
  for (Index t = b.dates.begin; t < b.dates.end; ++t)
    for (Index i = b.ids.begin; i < b.ids.end; i += chunk[1]) pieces.push_back({t, i, 0, 0});
  // The chunk's bytes as stored: compressed into `out` when gzip or lzf,
  // else in place.
  const auto prepare = [&](Piece& p, std::vector<unsigned char>& out) -> const unsigned char* {
    std::size_t& stored = p.stored;
    thread_local std::vector<unsigned char> pad, shuffled;
    const Index ids = std::min(chunk[1], b.ids.end - p.i);
    const unsigned char* src = bytes + offset_in_block(b, p.t, p.i, std::size_t(spec.K) * es);
    if (ids < chunk[1]) {  // the last, partial chunk travels padded to full size
      pad.resize(chunk_bytes);
      std::memcpy(pad.data(), src, std::size_t(ids * spec.K) * es);
      std::memset(pad.data() + std::size_t(ids * spec.K) * es, 0, chunk_bytes - std::size_t(ids * spec.K) * es);
      src = pad.data();
    }
    stored = chunk_bytes;
    if (spec.compression == Compression::none) return src;
    shuffled.resize(chunk_bytes);
    shuffle_bytes(src, chunk_bytes, es, shuffled.data());
    if (spec.compression == Compression::lzf) {
      out.resize(chunk_bytes);
      stored = lzf_compress(shuffled.data(), unsigned(chunk_bytes), out.data(), unsigned(chunk_bytes - 1));
      if (stored == 0) {  // no smaller: stored shuffled, lzf skipped
        std::memcpy(out.data(), shuffled.data(), chunk_bytes);
        stored = chunk_bytes;
        p.skipped = lzf_skipped_mask;
      }
      return out.data();
    }
    libdeflate_compressor* compressor = thread_compressor(spec.gzip_level);
    stored = 0;
    if (compressor) {
      out.resize(libdeflate_zlib_compress_bound(compressor, chunk_bytes));
      stored = libdeflate_zlib_compress(compressor, shuffled.data(), chunk_bytes, out.data(), out.size());
    }
    return stored ? out.data() : nullptr;
  };
#ifdef _OPENMP
  if (spec.compression != Compression::none && pieces.size() > 1 && !omp_in_parallel()) {
    // This thread's buffers, named before the team starts: inside it a
    // thread_local name would be each team thread's own.
    thread_local std::vector<std::vector<unsigned char>> packed_by_writer;
    auto& packed_ahead = packed_by_writer;
    packed_ahead.resize(std::max(packed_ahead.size(), pieces.size()));
    const long n = long(pieces.size());
#pragma omp parallel for schedule(dynamic)
    for (long k = 0; k < n; ++k) prepare(pieces[std::size_t(k)], packed_ahead[std::size_t(k)]);
    for (std::size_t k = 0; k < pieces.size(); ++k)
      store(StoredChunk{pieces[k].t, pieces[k].i, pieces[k].stored ? packed_ahead[k].data() : nullptr,
                        pieces[k].stored, pieces[k].skipped});
    return;
  }
#endif
  thread_local std::vector<unsigned char> compressed;
  for (Piece& p : pieces) {
    const unsigned char* data = prepare(p, compressed);
    store(StoredChunk{p.t, p.i, data, p.stored, p.skipped});
  }
}

std::string chunk_name(const StoredChunk& c) { return fmt::format("({}, {}, 0)", c.t, c.i); }

// A part file's record before each piece's bytes: a stored chunk at
// (dates.begin, ids.begin), or a block that is not of whole chunks, in
// C order, which HDF5 merges into its chunks (read, modify, compress).
struct PartRecord {
  enum Kind : std::uint32_t { chunk = 0, block = 1 };
  std::int64_t t0, t1, i0, i1;
  std::uint64_t bytes;
  std::uint32_t skipped, kind;
};

}  // namespace

void OutputFile::write(const Block& b, const void* buffer) {
  throw_if_interrupted();
  if (raw_) {
    raw_->write(b, buffer);
    if (journal_)
      journal_->written(b, std::size_t(b.dates.size() * b.ids.size() * spec_.K) * element_size(spec_.precision));
    return;
  }
  slow_write_if_injected();
  const std::string what = spec_.path + ": dataset '" + spec_.dataset + "'";
  const bool aligned = b.ids.begin % chunk_[1] == 0 && (b.ids.end % chunk_[1] == 0 || b.ids.end == spec_.N);
  if (!aligned) {
    write_hyperslab(ds_, native_type(spec_.precision), {b.dates.begin, b.ids.begin, 0},
                    {b.dates.size(), b.ids.size(), spec_.K}, buffer, what);
    return;
  }
  quiet_hdf5_errors();  // this thread's
  store_chunks(spec_, chunk_, lzf_skipped_mask_, b, buffer, [&](const StoredChunk& c) { store(c.t, c.i, c.data, c.bytes, c.skipped); });
}

void OutputFile::store(Index t, Index i, const void* data, std::size_t bytes, unsigned skipped) {
  const std::string what = spec_.path + ": dataset '" + spec_.dataset + "'";
  const StoredChunk c{t, i, nullptr, bytes, skipped};
  if (!data) throw IoError(what + ": compressing the chunk at " + chunk_name(c) + " failed (out of memory?)");
  const hsize_t offset[3] = {hsize_t(t), hsize_t(i), 0};
  if (fault_injected("write") || H5Dwrite_chunk(ds_.get(), H5P_DEFAULT, skipped, offset, bytes, data) < 0) {
    // The failure's entries on this thread's HDF5 error stack hold strings
    // HDF5 1.10.8 never frees if the thread (a pipeline's writer) ends with
    // them there (LeakSanitizer on a full tmpfs): cleared now.
    H5Eclear2(H5E_DEFAULT);
    throw IoError(what + ": write of chunk at " + chunk_name(c) + " failed (disk full?)");
  }
}

std::vector<std::uint64_t> OutputFile::share() const {
  std::vector<std::uint64_t> description{std::uint64_t(chunk_[1]), lzf_skipped_mask_};
  if (raw_) {
    const auto placement = raw_->placement();
    description.insert(description.end(), placement.begin(), placement.end());
  } else if (spec_.compression == Compression::none) {
    throw IoError(spec_.path + ": the output cannot be written at its file offsets, which a distributed run needs");
  }
  return description;
}

void OutputFile::store_part(const std::string& part) {
  std::string why;
  const int fd = open_own_file(part, O_RDONLY, why);
  if (fd < 0) throw IoError(part + ": cannot open another rank's chunks: it is " + why);
  const std::unique_ptr<int, void (*)(int*)> closing(new int(fd), [](int* f) { ::close(*f), delete f; });
  std::vector<unsigned char> data;
  for (off_t at = 0;;) {
    PartRecord r{};
    const ssize_t got = ::pread(fd, &r, sizeof r, at);
    if (got == 0) return;
    if (got != ssize_t(sizeof r)) throw IoError(part + ": truncated record at byte " + std::to_string(at));
    data.resize(std::size_t(r.bytes));
    if (::pread(fd, data.data(), data.size(), at + off_t(sizeof r)) != ssize_t(data.size()))
      throw IoError(part + ": truncated chunk at byte " + std::to_string(at));
    if (r.kind == PartRecord::block)
      write_hyperslab(ds_, native_type(spec_.precision), {r.t0, r.i0, 0}, {r.t1 - r.t0, r.i1 - r.i0, spec_.K},
                      data.data(), spec_.path + ": dataset '" + spec_.dataset + "'");
    else
      store(r.t0, r.i0, data.data(), data.size(), r.skipped);
    at += off_t(sizeof r + data.size());
  }
}

OutputShare::OutputShare(const OutputSpec& spec, const std::string& output_temp,
                         const std::vector<std::uint64_t>& description)
    : spec_(spec) {
  if (description.size() < 2) throw std::logic_error("cvest: an output share without its description");
  chunk_ = {1, Index(description[0]), spec.K};
  lzf_skipped_mask_ = unsigned(description[1]);
  if (description.size() > 2) {
    std::string because;
    const DirectWrites direct = choose_direct(spec.direct, output_bytes(spec), because);
    raw_ = RawCube::open_placed(output_temp, spec.path, {description.begin() + 2, description.end()}, true, direct,
                                because);
    if (!spec.fingerprint.empty()) {
      journal_guard_ = std::make_unique<TempFileGuard>(journal_path(output_temp, spec.rank));
      journal_guard_->keep_on_terminate(true);
      journal_ = std::make_unique<Journal>(journal_path(output_temp, spec.rank), output_temp, spec.fingerprint,
                                           std::vector<Block>{}, journal_batch_bytes());
    }
    return;
  }
  // A fresh name, created exclusively (retried on a clash): never through a
  // link, never another file.
  part_path_ = temp_path_for(spec.path);
  guard_ = std::make_unique<TempFileGuard>(part_path_);
  fd_ = create_exclusive_temp(spec.path, part_path_, *guard_);
  if (fd_ < 0) {
    const int error = errno;
    const std::string tried = part_path_;
    part_path_.clear();  // not ours: the destructor leaves it
    throw IoError(spec.path + ": cannot create " + tried + ": " + std::strerror(error));
  }
}

OutputShare::~OutputShare() {
  raw_.reset();
  if (fd_ >= 0 && !closed_) ::close(fd_);
  if (!part_path_.empty()) {
    std::error_code ec;
    fs::remove(part_path_, ec);
  }
}

void OutputShare::close() {
  if (raw_) {
    if (journal_) journal_->close();  // a sync it saw fail fails this rank
    raw_->close();
    return;
  }
  if (closed_) return;
  closed_ = true;
  if (::close(fd_) != 0) throw IoError(part_path_ + ": write failed: " + std::strerror(errno));
}

void OutputShare::write(const Block& b, const void* buffer) {
  throw_if_interrupted();
  if (raw_) {
    raw_->write(b, buffer);
    if (journal_)
      journal_->written(b, std::size_t(b.dates.size() * b.ids.size() * spec_.K) * element_size(spec_.precision));
    return;
  }
  const auto append = [&](const PartRecord& r, const void* data) {
    const std::lock_guard lock(append_);
    write_at(fd_, &r, sizeof r, part_bytes_, part_path_);
    write_at(fd_, data, std::size_t(r.bytes), part_bytes_ + off_t(sizeof r), part_path_);
    part_bytes_ += off_t(sizeof r + r.bytes);
  };
  const bool aligned = b.ids.begin % chunk_[1] == 0 && (b.ids.end % chunk_[1] == 0 || b.ids.end == spec_.N);
  if (!aligned) {  // rank 0 merges it into its chunks, as OutputFile::write does in one process
    const std::size_t bytes = std::size_t(b.dates.size() * b.ids.size() * spec_.K) * element_size(spec_.precision);
    append({b.dates.begin, b.dates.end, b.ids.begin, b.ids.end, bytes, 0, PartRecord::block}, buffer);
    return;
  }
  store_chunks(spec_, chunk_, lzf_skipped_mask_, b, buffer, [&](const StoredChunk& c) {
    if (!c.data) throw IoError(spec_.path + ": compressing the chunk at " + chunk_name(c) + " failed (out of memory?)");
    append({c.t, c.t + 1, c.i, c.i + chunk_[1], c.bytes, c.skipped, PartRecord::chunk}, c.data);
  });
}

void OutputFile::commit(const std::map<std::string, std::string>& attributes, hid_t scales_like) {
  writes_text_ = writes_text();
  raw_.reset();
  // Metadata changes from here on: a run killed now leaves nothing to resume.
  // A sync the journal's thread saw fail is this run's failure: the pages it
  // could not write may be gone, and the fsync below would not say so.
  if (journal_) journal_->close();
  journal_.reset();
  std::error_code ec;
  for (const std::string& j : journals_of(temp_path_)) fs::remove(j, ec);
  journal_guard_.reset();
  for (const auto& [k, v] : attributes) write_string_attribute(ds_.get(), k, v);
  const std::size_t slash = spec_.dataset.rfind('/');
  attach_dimension_scales(file_, ds_, slash == std::string::npos ? "" : spec_.dataset.substr(0, slash + 1),
                          {"date", "id", "col"}, {spec_.T, spec_.N, spec_.K}, spec_.path, scales_like);
  ds_.reset();
  if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0) throw IoError(spec_.path + ": flush failed (disk full?)");
  file_.reset();
  // HDF5 closes without syncing: the output is on disk before it has its
  // name, and the name is on disk before the run says it is done.
  sync_file(temp_path_, spec_.path);
  if (fault_injected("kill_at_commit")) ::raise(SIGKILL);
  rename_into_place(temp_path_, spec_.path, found_, spec_.overwrite);
  sync_file(output_dir(spec_.path).string(), spec_.path, true);
  committed_ = true;
}

}  // namespace cvest::io
