#include "io/Chunks.hpp"

#include "io/TempFiles.hpp"

#include "io/Faults.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>
#include <functional>
#include <fcntl.h>
#include <libdeflate.h>
#include <lzf.h>
#include <memory>
#include <mutex>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string>
#include <unistd.h>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace cvest::io {

namespace {

// The ids per chunk of a dataset stored in (1, ids, K) chunks, else 0.
Index chunk_ids_of(const PropList& create, Index K) {
  hsize_t chunk[3] = {0, 0, 0};
  if (H5Pget_layout(create.get()) != H5D_CHUNKED || H5Pget_chunk(create.get(), 3, chunk) != 3 || chunk[0] != 1 ||
      Index(chunk[2]) != K)
    return 0;
  return Index(chunk[1]);
}

}  // namespace

ssize_t pwrite_once(int fd, const void* buffer, std::size_t bytes, off_t at) {
  ssize_t put = ::pwrite(fd, buffer, bytes, at);
  if (fault_injected("write")) put = -1, errno = ENOSPC;
  if (fault_injected("write_eio")) put = -1, errno = EIO;
  return put;
}

void throw_write_failed(ssize_t put, const std::string& shown) {
  throw IoError(shown + ": write failed: " + std::string(put == 0 ? "no progress" : std::strerror(errno)) +
                (errno == ENOSPC ? " (disk full)" : ""));
}

void write_at(int fd, const void* buffer, std::size_t bytes, off_t at, const std::string& shown) {
  const auto* in = static_cast<const char*>(buffer);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t put = pwrite_once(fd, in + done, bytes - done, at + off_t(done));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) throw_write_failed(put, shown);
    done += std::size_t(put);
  }
}

std::vector<Filter> filters_of(const PropList& create) {
  std::vector<Filter> filters;
  for (int f = 0, n = H5Pget_nfilters(create.get()); f < n; ++f) {
    char name[64] = {};
    unsigned flags = 0, config = 0;
    std::size_t nvalues = 0;
    const H5Z_filter_t id =
        H5Pget_filter2(create.get(), unsigned(f), &flags, &nvalues, nullptr, sizeof name, name, &config);
    filters.push_back({id, name[0] ? name : "filter"});
  }
  return filters;
}

const Filter* missing_in_hdf5(const std::vector<Filter>& filters) {
  for (const Filter& f : filters)
    if (H5Zfilter_avail(f.id) <= 0) return &f;
  return nullptr;
}

bool hdf5_decodes(const Dataset& ds) { return !missing_in_hdf5(filters_of(PropList(H5Dget_create_plist(ds.get())))); }

namespace {

// Calls op(t, chunk_start, begin, end) for every piece of the block that lies
// in one (1, chunk_ids, K) chunk: date t, ids [begin, end) of the chunk that
// starts at chunk_start. Stops and returns false when op does.
template <class Op>
bool for_each_chunk_piece(const Block& b, Index chunk_ids, Op&& op) {
  for (Index t = b.dates.begin; t < b.dates.end; ++t)
    for (Index i = b.ids.begin; i < b.ids.end;) {
      const Index chunk_start = i - i % chunk_ids;
      const Index end = std::min(b.ids.end, chunk_start + chunk_ids);
      if (!op(t, chunk_start, i, end)) return false;
      i = end;
    }
  return true;
}

// The bytes of `ds` as cvest's own threads reach them. Through an external
// link a dataset lives in another file than the one the caller opened, so the
// descriptor is a fresh one for the file HDF5 holds it in; and a user block
// shifts a file's contents, which HDF5 1.10 adds to H5Dget_offset but leaves
// out of chunk addresses. False where that cannot be had (a file driver other
// than POSIX's), or where a user block's file reads differently at either
// base than HDF5 reads it (checked on its first chunk): HDF5 reads then.
struct FileBytes {
  int fd = -1;
  haddr_t chunk_base = 0;  // added to the chunk addresses HDF5 reports
  std::uint64_t size = 0;  // the file's bytes, user block included
};

bool chunk_base_of(const Dataset& ds, int fd, std::uint64_t file_size, haddr_t userblock, haddr_t& base) {
  base = userblock;
  Dataspace all(H5Dget_space(ds.get()));
  hsize_t nchunks = 0;
  if (H5Dget_num_chunks(ds.get(), all.get(), &nchunks) < 0) return false;
  if (nchunks == 0) return true;  // nothing to read yet
  hsize_t offset[H5S_MAX_RANK] = {};
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t size = 0;
  if (H5Dget_chunk_info(ds.get(), all.get(), 0, offset, &mask, &addr, &size) < 0 || addr == HADDR_UNDEF || size == 0 ||
      size > file_size)  // a damaged record: not allocated, HDF5 reads (and reports) it
    return false;
  // H5Dread_chunk copies as many bytes as the record its own lookup finds,
  // which in a damaged index need not be the record just listed, whatever
  // H5Dget_chunk_storage_size says (the input fuzzer's file: 2,928 bytes
  // copied for a record of 112). What it copies comes from the file, so it
  // reads into a mapping of the file's size: address space, touched only
  // where written. More than the record is damage.
  const std::size_t mapped = std::size_t(std::max<std::uint64_t>(file_size, size)) + sizeof(std::uint64_t);
  void* mapping = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) return false;
  const std::unique_ptr<void, std::function<void(void*)>> unmap(mapping, [mapped](void* m) { ::munmap(m, mapped); });
  unsigned char* hdf5s = static_cast<unsigned char*>(mapping);
  const std::uint64_t canary = 0x6376657374636876u;
  std::memcpy(hdf5s + size, &canary, sizeof canary);
  std::uint32_t filter_mask = 0;
  if (H5Dread_chunk(ds.get(), H5P_DEFAULT, offset, &filter_mask, hdf5s) < 0 ||
      std::memcmp(hdf5s + size, &canary, sizeof canary) != 0)
    return false;
  std::vector<unsigned char> ours(size);
  for (const haddr_t candidate : {userblock, haddr_t(0)}) {
    const ssize_t got = ::pread(fd, ours.data(), size, off_t(addr + candidate));
    if (got == ssize_t(size) && std::memcmp(ours.data(), hdf5s, size) == 0) {
      base = candidate;
      return true;
    }
  }
  return false;
}

bool file_bytes_of(const Dataset& ds, bool writable, FileBytes& out) {
  File file(H5Iget_file_id(ds.get()));
  if (!file) return false;
  PropList access(H5Fget_access_plist(file.get()));
  if (!access || H5Pget_driver(access.get()) != H5FD_SEC2) return false;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file.get(), access.get(), &handle) < 0 || !handle) return false;
  const int hdf5_fd = *static_cast<const int*>(handle);
  // The same file opened again: a descriptor with its own offset and advice.
  int fd = ::open(("/proc/self/fd/" + std::to_string(hdf5_fd)).c_str(), (writable ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) fd = ::fcntl(hdf5_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return false;
  struct stat st {};
  const std::uint64_t size = ::fstat(fd, &st) == 0 ? std::uint64_t(st.st_size) : 0;
  hsize_t userblock = 0;
  PropList create(H5Fget_create_plist(file.get()));
  if (!create || H5Pget_userblock(create.get(), &userblock) < 0) userblock = 0;
  haddr_t base = 0;
  if (userblock > 0 && H5Pget_layout(PropList(H5Dget_create_plist(ds.get())).get()) == H5D_CHUNKED &&
      !chunk_base_of(ds, fd, size, haddr_t(userblock), base)) {
    ::close(fd);
    return false;
  }
  out = {fd, base, size};
  return true;
}

// "PATH: chunk at (t, i, k) (dates t-.., ids i-..)": the chunk at `origin`
// (dates, ids, columns) of a dataset of `rank` (2: ids and columns only) and
// chunk extent `chunk`, for messages.
std::string chunk_text(const std::string& shown, int rank, const std::array<Index, 3>& origin,
                       const std::array<Index, 3>& chunk) {
  const auto [t, i, k] = origin;
  return shown + ": chunk at (" + (rank == 3 ? std::to_string(t) + ", " : std::string()) + std::to_string(i) + ", " +
         std::to_string(k) + ") (" +
         (rank == 3 ? "dates " + std::to_string(t) + "-" + std::to_string(t + chunk[0] - 1) + ", " : std::string()) +
         "ids " + std::to_string(i) + "-" + std::to_string(i + chunk[1] - 1) + ")";
}

// The origins (dates, ids, columns) of the chunks of extent `chunk` that a
// block of a dataset with K columns touches, in the file's order.
std::vector<std::array<Index, 3>> chunk_origins(const Block& b, const std::array<Index, 3>& chunk, Index K) {
  const auto [ct, ci, ck] = chunk;
  std::vector<std::array<Index, 3>> origins;
  for (Index tc = b.dates.begin - b.dates.begin % ct; tc < b.dates.end; tc += ct)
    for (Index ic = b.ids.begin - b.ids.begin % ci; ic < b.ids.end; ic += ci)
      for (Index kc = 0; kc < K; kc += ck) origins.push_back({tc, ic, kc});
  return origins;
}

// HDF5's record of the chunk at `origin` of a dataset of `rank` (2: ids and
// columns only); false where it is not stored.
bool chunk_record(hid_t ds, int rank, const std::array<Index, 3>& origin, unsigned& mask, haddr_t& addr,
                  hsize_t& stored) {
  const hsize_t coord3[3] = {hsize_t(origin[0]), hsize_t(origin[1]), hsize_t(origin[2])};
  addr = HADDR_UNDEF;
  return H5Dget_chunk_info_by_coord(ds, rank == 3 ? coord3 : coord3 + 1, &mask, &addr, &stored) >= 0 &&
         addr != HADDR_UNDEF;
}

// A chunk's record in the chunk index, checked before anything reads it: it
// must lie inside the file and, when nothing filtered it (`plain_bytes` > 0),
// hold exactly a chunk's bytes. HDF5 1.10.8 trusts both: a damaged record
// made its H5Dread copy past a buffer and crash (found by the input fuzzer,
// tests/fuzz), and a huge size would be allocated before any read failed.
template <class Where>
void check_chunk_record(const Where& where, haddr_t addr, hsize_t stored, std::uint64_t file_bytes,
                        std::size_t plain_bytes) {
  if (file_bytes > 0 && (stored > file_bytes || addr > file_bytes - stored))
    throw IoError(where() + ": recorded as " + std::to_string(stored) + " bytes at offset " + std::to_string(addr) +
                  ", beyond the file's " + std::to_string(file_bytes) + " bytes (truncated or damaged)");
  if (plain_bytes > 0 && stored != plain_bytes)
    throw IoError(where() + ": recorded as " + std::to_string(stored) + " bytes, expected " +
                  std::to_string(plain_bytes) + " for an unfiltered chunk (damaged chunk index)");
}

}  // namespace

void read_at(int fd, void* buffer, std::size_t bytes, off_t at, const std::string& shown) {
  auto* out = static_cast<char*>(buffer);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t got = ::pread(fd, out + done, bytes - done, at + off_t(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw IoError(shown + ": read at byte " + std::to_string(at + off_t(done)) + " failed: " +
                    (got == 0 ? std::string("file is truncated") : std::string(std::strerror(errno))));
    done += std::size_t(got);
  }
}

std::size_t offset_in_block(const Block& b, Index t, Index i, std::size_t row) {
  return (std::size_t((t - b.dates.begin) * b.ids.size()) + std::size_t(i - b.ids.begin)) * row;
}

// --- raw access -----------------------------------------------------------------

std::unique_ptr<RawCube> RawCube::open(const Dataset& ds, const std::string& shown, hid_t mem_type, bool writable,
                                       Index N, Index K, DirectMode direct, const std::string& off_because,
                                       std::size_t direct_memory) {
  Datatype type(H5Dget_type(ds.get()));
  if (H5Tequal(type.get(), mem_type) <= 0) return nullptr;
  PropList create(H5Dget_create_plist(ds.get()));
  if (H5Pget_nfilters(create.get()) != 0) return nullptr;
  std::unique_ptr<RawCube> raw(new RawCube);
  raw->N_ = N;
  raw->K_ = K;
  raw->es_ = H5Tget_size(type.get());
  const H5D_layout_t layout = H5Pget_layout(create.get());
  if (layout == H5D_CONTIGUOUS) {
    raw->contiguous_base_ = H5Dget_offset(ds.get());
    if (raw->contiguous_base_ == HADDR_UNDEF) return nullptr;
  } else if (layout == H5D_CHUNKED) {
    raw->chunk_ids_ = chunk_ids_of(create, K);
    if (raw->chunk_ids_ == 0) return nullptr;
    hsize_t dims[3] = {};
    const Dataspace space(H5Dget_space(ds.get()));
    if (H5Sget_simple_extent_dims(space.get(), dims, nullptr) < 0) return nullptr;  // read through HDF5 instead
    raw->T_ = Index(dims[0]);
    raw->chunks_per_date_ = (N + raw->chunk_ids_ - 1) / raw->chunk_ids_;
    const Index chunks = Index(dims[0]) * raw->chunks_per_date_;
    if (chunks <= max_cached_chunks) {
      raw->chunk_addresses_.reset(new std::atomic<haddr_t>[std::size_t(chunks)]);
      for (Index c = 0; c < chunks; ++c) raw->chunk_addresses_[std::size_t(c)].store(0, std::memory_order_relaxed);
    }
  } else {
    return nullptr;
  }
  raw->ds_ = ds.get();
  raw->path_ = shown;
  FileBytes bytes;
  if (!file_bytes_of(ds, writable, bytes)) return nullptr;
  raw->fd_ = bytes.fd;
  raw->chunk_base_ = bytes.chunk_base;
  if (!writable) raw->input_bytes_ = bytes.size;
  if (!writable) ::posix_fadvise(raw->fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  if (writable) raw->direct_ = std::make_unique<DirectWriter>(raw->fd_, direct, shown, off_because, direct_memory);
  else raw->reader_ = std::make_unique<DirectReader>(raw->fd_, direct, shown, off_because);
  return raw;
}

RawCube::~RawCube() {
  direct_.reset();
  reader_.reset();
  if (fd_ >= 0) ::close(fd_);
}

void RawCube::close() {
  if (fd_ < 0) return;
  direct_.reset();
  reader_.reset();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw IoError(path_ + ": write failed: " + std::strerror(errno));
}

std::vector<std::uint64_t> RawCube::placement() const {
  std::vector<std::uint64_t> p{std::uint64_t(N_), std::uint64_t(K_), es_, std::uint64_t(chunk_ids_),
                               std::uint64_t(chunks_per_date_), contiguous_base_, chunk_base_};
  if (contiguous_base_ != HADDR_UNDEF) return p;
  if (!chunk_addresses_)
    throw IoError(fmt::format("{}: {} chunks are more than a distributed run hands its ranks ({}); set [output] "
                              "chunk_ids larger", path_, T_ * chunks_per_date_, max_cached_chunks));
  quiet_hdf5_errors();
  for (Index t = 0; t < T_; ++t)
    for (Index c = 0; c < chunks_per_date_; ++c) {
      std::atomic<haddr_t>& cached = chunk_addresses_[std::size_t(t * chunks_per_date_ + c)];
      haddr_t addr = cached.load(std::memory_order_relaxed);
      if (addr == 0) {
        const hsize_t coord[3] = {hsize_t(t), hsize_t(c * chunk_ids_), 0};
        unsigned mask = 0;
        hsize_t size = 0;
        addr = HADDR_UNDEF;
        if (H5Dget_chunk_info_by_coord(ds_, coord, &mask, &addr, &size) < 0 || addr == HADDR_UNDEF || mask != 0)
          throw IoError(fmt::format("{}: output chunk ({}, {}, 0) is not allocated", path_, t, c * chunk_ids_));
        cached.store(addr, std::memory_order_relaxed);
      }
      p.push_back(addr);
    }
  return p;
}

std::unique_ptr<RawCube> RawCube::open_placed(const std::string& path, const std::string& shown,
                                              const std::vector<std::uint64_t>& p, bool writable,
                                              DirectMode direct, const std::string& off_because,
                                              std::size_t direct_memory) {
  if (p.size() < 7) throw std::logic_error("cvest: a cube placement of fewer than 7 fields");
  std::unique_ptr<RawCube> raw(new RawCube);
  raw->N_ = Index(p[0]);
  raw->K_ = Index(p[1]);
  raw->es_ = std::size_t(p[2]);
  raw->chunk_ids_ = Index(p[3]);
  raw->chunks_per_date_ = Index(p[4]);
  raw->contiguous_base_ = haddr_t(p[5]);
  raw->chunk_base_ = haddr_t(p[6]);
  if (raw->contiguous_base_ == HADDR_UNDEF) {
    const std::size_t chunks = p.size() - 7;
    raw->T_ = raw->chunks_per_date_ > 0 ? Index(chunks) / raw->chunks_per_date_ : 0;
    raw->chunk_addresses_.reset(new std::atomic<haddr_t>[chunks]);
    for (std::size_t c = 0; c < chunks; ++c) raw->chunk_addresses_[c].store(haddr_t(p[7 + c]), std::memory_order_relaxed);
  }
  raw->path_ = shown;
  std::string why;  // another process's temporary file of this run: ours, and never through a link
  raw->fd_ = open_own_file(path, writable ? O_WRONLY : O_RDONLY, why);
  if (raw->fd_ < 0) throw IoError(shown + ": cannot open " + path + ": it is " + why);
  if (writable) raw->direct_ = std::make_unique<DirectWriter>(raw->fd_, direct, shown, off_because, direct_memory);
  else raw->reader_ = std::make_unique<DirectReader>(raw->fd_, direct, shown, off_because);
  return raw;
}

// Calls op(file_offset, bytes, offset_in_block_buffer) for every contiguous
// run of the block in the file; false when a chunk is not allocated.
template <class Op>
bool RawCube::for_each_run(const Block& b, Op&& op) const {
  quiet_hdf5_errors();  // this thread's, as it asks HDF5 where chunks are
  const std::size_t row = std::size_t(K_) * es_;
  if (contiguous_base_ != HADDR_UNDEF) {
    for (Index t = b.dates.begin; t < b.dates.end; ++t)
      op(off_t(contiguous_base_ + (std::size_t(t * N_ + b.ids.begin)) * row), std::size_t(b.ids.size()) * row,
         offset_in_block(b, t, b.ids.begin, row));
    return true;
  }
  return for_each_chunk_piece(b, chunk_ids_, [&](Index t, Index chunk_start, Index i, Index end) {
    std::atomic<haddr_t>* cached =
        chunk_addresses_ ? &chunk_addresses_[std::size_t(t * chunks_per_date_ + chunk_start / chunk_ids_)] : nullptr;
    haddr_t addr = cached ? cached->load(std::memory_order_relaxed) : 0;
    if (addr == 0) {  // address 0 is the superblock's, never a chunk's
      const hsize_t coord[3] = {hsize_t(t), hsize_t(chunk_start), 0};
      unsigned mask = 0;
      hsize_t size = 0;
      addr = HADDR_UNDEF;
      if (H5Dget_chunk_info_by_coord(ds_, coord, &mask, &addr, &size) < 0 || addr == HADDR_UNDEF || mask != 0)
        return false;
      if (input_bytes_ > 0)  // an input's record, before reading a chunk's bytes where it says
        check_chunk_record([&] { return chunk_text(path_, 3, {t, chunk_start, 0}, {1, chunk_ids_, K_}); }, addr, size,
                           input_bytes_, std::size_t(chunk_ids_ * K_) * es_);
      if (cached) cached->store(addr, std::memory_order_relaxed);
    }
    op(off_t(chunk_base_ + addr + std::size_t(i - chunk_start) * row), std::size_t(end - i) * row,
       offset_in_block(b, t, i, row));
    return true;
  });
}

bool RawCube::read(const Block& b, void* buffer) const {
  auto* out = static_cast<char*>(buffer);
  return for_each_run(b, [&](off_t at, std::size_t bytes, std::size_t into) {
    if (reader_) reader_->read(out + into, bytes, at);
    else read_at(fd_, out + into, bytes, at, path_);
  });
}

void RawCube::write(const Block& b, const void* buffer) const {
  const auto* in = static_cast<const char*>(buffer);
  if (fault_injected("kill")) ::raise(SIGKILL);
  slow_write_if_injected();
  // Runs that follow each other in the file and in the buffer (a date's
  // chunks, allocated in order) go as one write: direct writes are
  // synchronous, and larger ones keep the device busier.
  off_t run_at = 0;
  std::size_t run_bytes = 0, run_from = 0;
  const auto flush = [&] {
    if (run_bytes > 0) direct_->write(in + run_from, run_bytes, run_at);
    run_bytes = 0;
  };
  const bool complete = for_each_run(b, [&](off_t at, std::size_t bytes, std::size_t from) {
    if (run_bytes > 0 && at == run_at + off_t(run_bytes) && from == run_from + run_bytes) {
      run_bytes += bytes;
      return;
    }
    flush();
    run_at = at, run_bytes = bytes, run_from = from;
  });
  if (!complete) throw IoError(path_ + ": output chunk not allocated");
  flush();
}
// --- deflated chunks ------------------------------------------------------------

namespace {

libdeflate_decompressor* thread_decompressor() {
  struct Decompressor {
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    ~Decompressor() { libdeflate_free_decompressor(d); }
  };
  thread_local Decompressor mine;
  return mine.d;
}

// HDF5's shuffle filter stores byte j of every element together (plane j),
// which lets deflate see runs of exponent bytes. Shuffle builds the planes,
// !Shuffle undoes them; one pass with whole elements in order, unrolled for
// doubles and floats.
template <bool Shuffle, std::size_t Element>
void byte_planes_fixed(const unsigned char* in, std::size_t n, unsigned char* out) {
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < Element; ++j) {
      if constexpr (Shuffle) out[j * n + i] = in[i * Element + j];
      else out[i * Element + j] = in[j * n + i];
    }
}

template <bool Shuffle>
void byte_planes(const unsigned char* in, std::size_t bytes, std::size_t element, unsigned char* out) {
  const std::size_t n = bytes / element;
  if (element == 8) return byte_planes_fixed<Shuffle, 8>(in, n, out);
  if (element == 4) return byte_planes_fixed<Shuffle, 4>(in, n, out);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < element; ++j) {
      if constexpr (Shuffle) out[j * n + i] = in[i * element + j];
      else out[i * element + j] = in[j * n + i];
    }
}

}  // namespace

std::unique_ptr<ChunkedCube> ChunkedCube::open(const Dataset& ds, const std::string& shown, hid_t mem_type,
                                               Index K) {
  Datatype type(H5Dget_type(ds.get()));
  if (H5Tequal(type.get(), mem_type) <= 0) return nullptr;
  PropList create(H5Dget_create_plist(ds.get()));
  hsize_t chunk[3] = {0, 0, 0};
  if (H5Pget_layout(create.get()) != H5D_CHUNKED) return nullptr;
  const int rank = H5Pget_chunk(create.get(), 3, chunk);
  if (rank == 2) chunk[2] = chunk[1], chunk[1] = chunk[0], chunk[0] = 1;  // (ids, K) as one date
  else if (rank != 3) return nullptr;
  // Partial edge chunks stored without the filters (an HDF5 option the
  // chunk's filter mask does not record): HDF5 reads those.
  unsigned chunk_opts = 0;
  if (H5Pget_chunk_opts(create.get(), &chunk_opts) < 0 || (chunk_opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS))
    return nullptr;
  Codec codec = Codec::none;
  int codec_index = -1, shuffle = -1;
  const auto filters = filters_of(create);
  for (int f = 0; f < int(filters.size()); ++f) {
    const H5Z_filter_t id = filters[std::size_t(f)].id;
    if ((id == H5Z_FILTER_DEFLATE || id == h5py_lzf_filter) && codec_index < 0) {
      codec = id == h5py_lzf_filter ? Codec::lzf : Codec::deflate;
      codec_index = f;
    } else if (id == H5Z_FILTER_SHUFFLE && shuffle < 0 && codec_index < 0) {
      shuffle = f;  // shuffle, then compress
    } else {
      return nullptr;
    }
  }
  std::unique_ptr<ChunkedCube> cube(new ChunkedCube);
  FileBytes bytes;
  if (!file_bytes_of(ds, false, bytes)) return nullptr;
  cube->fd_ = bytes.fd;
  cube->chunk_base_ = bytes.chunk_base;
  cube->file_bytes_ = bytes.size;
  ::posix_fadvise(cube->fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  cube->ds_ = ds.get();
  cube->path_ = shown;
  cube->K_ = K;
  cube->chunk_ = {Index(chunk[0]), Index(chunk[1]), Index(chunk[2])};
  cube->rank_ = rank;
  cube->es_ = H5Tget_size(type.get());
  cube->codec_ = codec;
  cube->codec_index_ = codec_index;
  cube->shuffle_index_ = shuffle;
  return cube;
}

ChunkedCube::~ChunkedCube() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// Copies `rows` runs of `bytes` from `src` (runs `src_step` bytes apart) to
// `dst` (runs `dst_step` apart): a chunk's columns into a block's rows.
// Fixed sizes for the one-column chunks h5py chooses by default.
template <std::size_t Bytes>
void copy_runs_fixed(unsigned char* dst, std::size_t dst_step, const unsigned char* src, std::size_t src_step,
                     std::size_t rows) {
  for (std::size_t r = 0; r < rows; ++r, dst += dst_step, src += src_step) std::memcpy(dst, src, Bytes);
}

void copy_runs(unsigned char* dst, std::size_t dst_step, const unsigned char* src, std::size_t src_step,
               std::size_t rows, std::size_t bytes) {
  if (bytes == 8) return copy_runs_fixed<8>(dst, dst_step, src, src_step, rows);
  if (bytes == 4) return copy_runs_fixed<4>(dst, dst_step, src, src_step, rows);
  for (std::size_t r = 0; r < rows; ++r, dst += dst_step, src += src_step) std::memcpy(dst, src, bytes);
}

}  // namespace

const unsigned char* ChunkedCube::decoded(const std::array<Index, 3>& origin) const {
  thread_local std::vector<unsigned char> packed, inflated, plain;  // scratch per thread
  const std::size_t chunk_bytes = this->chunk_bytes();
  const auto where = [&] { return chunk_text(path_, rank_, origin, chunk_); };
  quiet_hdf5_errors();  // this thread's (a team's threads are new to HDF5)
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t stored = 0;
  if (!chunk_record(ds_, rank_, origin, mask, addr, stored) || stored == 0) return nullptr;
  check_chunk_record(where, addr, stored, file_bytes_, 0);  // (its decoders check the sizes they produce)
  packed.resize(stored);
  read_at(fd_, packed.data(), stored, off_t(chunk_base_ + addr), where());
  const unsigned char* data = packed.data();
  std::size_t size = stored;
  if (codec_index_ >= 0 && !(mask & (1u << codec_index_))) {  // a set bit: skipped for this chunk
    inflated.resize(chunk_bytes);
    std::size_t got = 0;
    const bool ok =
        codec_ == Codec::deflate
            ? libdeflate_zlib_decompress(thread_decompressor(), data, size, inflated.data(), chunk_bytes, &got) ==
                  LIBDEFLATE_SUCCESS
            : (got = lzf_decompress(data, unsigned(size), inflated.data(), unsigned(chunk_bytes))) > 0;
    if (!ok || got != chunk_bytes)
      throw IoError(where() + ": not a valid " + (codec_ == Codec::deflate ? "deflate" : "lzf") + " stream of " +
                    std::to_string(chunk_bytes) + " bytes");
    data = inflated.data();
    size = got;
  }
  if (size != chunk_bytes)
    throw IoError(where() + ": " + std::to_string(size) + " bytes, expected " + std::to_string(chunk_bytes));
  if (shuffle_index_ >= 0 && !(mask & (1u << shuffle_index_))) {
    plain.resize(chunk_bytes);
    byte_planes<false>(data, chunk_bytes, es_, plain.data());
    data = plain.data();
  }
  return data;
}

bool ChunkedCube::decode_into(const Block& b, const std::array<Index, 3>& origin, unsigned char* out) const {
  const unsigned char* data = decoded(origin);
  if (!data) return false;
  // The part of the chunk inside the block: dates [t0, t1), ids [i0, i1),
  // columns [kc, kc + nk).
  const Index ct = chunk_[0], ci = chunk_[1], ck = chunk_[2];
  const Index tc = origin[0], ic = origin[1], kc = origin[2];
  const std::size_t row = std::size_t(K_) * es_, chunk_row = std::size_t(ck) * es_;
  const Index t0 = std::max(tc, b.dates.begin), t1 = std::min(tc + ct, b.dates.end);
  const Index i0 = std::max(ic, b.ids.begin), i1 = std::min(ic + ci, b.ids.end);
  const std::size_t nk_bytes = std::size_t(std::min(ck, K_ - kc)) * es_;
  for (Index t = t0; t < t1; ++t) {
    const unsigned char* src = data + (std::size_t((t - tc) * ci) + std::size_t(i0 - ic)) * chunk_row;
    unsigned char* dst = out + offset_in_block(b, t, i0, row) + std::size_t(kc) * es_;
    if (ck == K_) std::memcpy(dst, src, std::size_t(i1 - i0) * row);  // whole rows: one run
    else copy_runs(dst, row, src, chunk_row, std::size_t(i1 - i0), nk_bytes);
  }
  return true;
}

bool ChunkedCube::read(const Block& b, void* buffer) const {
  auto* out = static_cast<unsigned char*>(buffer);
  const auto chunks = chunk_origins(b, chunk_, K_);
#ifdef _OPENMP
  if (chunks.size() > 1 && !omp_in_parallel()) {
    // The overlapped pipeline's reader thread (outside any parallel region):
    // an OpenMP team decodes the block's chunks, as the writer's team
    // compresses them; on a device build the host cores are free for it.
    // Inside the per-thread pipeline each thread decodes its own blocks.
    std::atomic<bool> complete{true};
    std::exception_ptr error;
    std::mutex error_lock;
    const long n = long(chunks.size());
#pragma omp parallel for schedule(dynamic)
    for (long j = 0; j < n; ++j) {
      if (!complete.load()) continue;
      try {
        if (!decode_into(b, chunks[std::size_t(j)], out)) complete = false;
      } catch (...) {
        const std::lock_guard lock(error_lock);
        if (!error) error = std::current_exception();
        complete = false;
      }
    }
    if (error) std::rethrow_exception(error);
    return complete;
  }
#endif
  for (const auto& origin : chunks)
    if (!decode_into(b, origin, out)) return false;
  return true;
}

CubeReader::CubeReader(const Dataset& ds, const std::string& path, const std::string& name, Index N, Index K,
                       std::size_t scratch_bytes, DirectMode reads, const std::string& reads_because)
    : ds_(ds), path_(path), name_(name), K_(K) {
  Dataspace space(H5Dget_space(ds.get()));
  rank_ = H5Sget_simple_extent_ndims(space.get());
  const PropList create(H5Dget_create_plist(ds.get()));
  const auto filters = filters_of(create);
  const bool hdf5_decodes = !missing_in_hdf5(filters);
  hsize_t chunk[3] = {0, 0, 0};
  if (H5Pget_layout(create.get()) == H5D_CHUNKED && H5Pget_chunk(create.get(), 3, chunk) == rank_ &&
      (rank_ == 2 || rank_ == 3)) {
    if (rank_ == 2) chunk[2] = chunk[1], chunk[1] = chunk[0], chunk[0] = 1;
    chunk_ = {Index(chunk[0]), Index(chunk[1]), Index(chunk[2])};
    const Datatype type(H5Dget_type(ds.get()));
    if (filters.empty()) plain_chunk_bytes_ = std::size_t(chunk_[0] * chunk_[1] * chunk_[2]) * H5Tget_size(type.get());
    const File file(H5Iget_file_id(ds.get()));
    hsize_t file_bytes = 0;
    if (file && H5Fget_filesize(file.get(), &file_bytes) >= 0) file_bytes_ = file_bytes;
  }
  for (Precision p : {Precision::f64, Precision::f32}) {
    const int k = p == Precision::f64 ? 0 : 1;
    raw_[k] = RawCube::open(ds, path + ": dataset '" + name + "'", native_type(p), false, N, K, reads, reads_because);
    if (!raw_[k]) chunked_[k] = ChunkedCube::open(ds, path + ": dataset '" + name + "'", native_type(p), K);
    // Three buffers per decoding thread: the host threads, and as many
    // again in the team of the overlapped pipeline's reader. Over that share
    // HDF5 reads instead, unless it cannot (lzf without h5py's plugin).
    if (chunked_[k] && hdf5_decodes &&
        6.0 * double(chunked_[k]->chunk_bytes()) * double(omp_get_max_threads()) >
            double(scratch_bytes))
      chunked_[k].reset();
  }
}

std::array<Index, 2> CubeReader::decoded_chunk() const {
  for (const auto& c : chunked_)
    if (c) return {c->chunk_dates(), c->chunk_ids()};
  return {0, 0};
}

CubeStorage CubeReader::storage(Precision precision) const {
  CubeStorage st;
  PropList create(H5Dget_create_plist(ds_.get()));
  const H5D_layout_t layout = H5Pget_layout(create.get());
  st.layout = layout == H5D_CHUNKED                         ? StorageLayout::chunked
              : layout == H5D_COMPACT                       ? StorageLayout::compact
              : layout == H5D_VIRTUAL                       ? StorageLayout::virtual_dataset
              : H5Pget_external_count(create.get()) > 0     ? StorageLayout::external
                                                            : StorageLayout::contiguous;
  if (layout == H5D_CHUNKED) {
    hsize_t chunk[3] = {0, 0, 0};
    const int rank = H5Pget_chunk(create.get(), 3, chunk);
    for (int d = 0; d < rank; ++d) st.chunk.push_back(Index(chunk[d]));
  }
  const auto filters = filters_of(create);
  for (const Filter& f : filters) st.filters.push_back(f.name);
  const int k = precision == Precision::f64 ? 0 : 1;
  st.read_by = raw_[k] ? ReadBy::pread : chunked_[k] ? ReadBy::decode : ReadBy::hdf5;
  if (const Filter* missing = missing_in_hdf5(filters); missing && st.read_by == ReadBy::hdf5) {
    st.read_by = ReadBy::none;
    st.unreadable = missing->name + " (HDF5 filter " + std::to_string(missing->id) + ")";
  }
  return st;
}

std::string to_text(const CubeStorage& st) {
  std::string text = st.layout == StorageLayout::virtual_dataset ? "virtual (VDS)"
                     : st.layout == StorageLayout::external        ? "in external raw files"
                     : st.chunk.empty()                            ? std::string(to_string(st.layout))
                                                                   : "chunks (";
  for (std::size_t d = 0; d < st.chunk.size(); ++d)
    text += std::to_string(st.chunk[d]) + (d + 1 < st.chunk.size() ? ", " : ")");
  for (const auto& f : st.filters) text += ", " + f;
  switch (st.read_by) {
    case ReadBy::pread: return text + "; read with pread";
    case ReadBy::decode: return text + "; decoded by cvest's threads";
    case ReadBy::hdf5: return text + "; read by HDF5 (H5Dread, one thread at a time)";
    case ReadBy::none: break;
  }
  return text + "; unreadable here: HDF5 lacks " + st.unreadable;
}

std::string CubeReader::reads_text(Precision precision) const {
  const int k = precision == Precision::f64 ? 0 : 1;
  if (raw_[k]) return raw_[k]->reader()->text();
  if (chunked_[k]) return "through the page cache (chunks decoded by cvest's threads)";
  return "through the page cache, by HDF5";
}

void CubeReader::read(const Block& b, Precision precision, void* buffer) const {
  const int k = precision == Precision::f64 ? 0 : 1;
  if (raw_[k] && raw_[k]->read(b, buffer)) return;
  if (chunked_[k] && chunked_[k]->read(b, buffer)) return;
  check_chunk_records(b);
  const std::string what = path_ + ": dataset '" + name_ + "'";
  if (rank_ == 2) read_hyperslab(ds_, native_type(precision), {b.ids.begin, 0}, {b.ids.size(), K_}, buffer, what);
  else read_hyperslab(ds_, native_type(precision), {b.dates.begin, b.ids.begin, 0}, {b.dates.size(), b.ids.size(), K_}, buffer, what);
}

void CubeReader::check_chunk_records(const Block& b) const {
  if (chunk_[0] == 0) return;
  const std::string shown = path_ + ": dataset '" + name_ + "'";
  for (const auto& origin : chunk_origins(b, chunk_, K_)) {
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t stored = 0;
    if (!chunk_record(ds_.get(), rank_, origin, mask, addr, stored)) continue;  // not stored, or HDF5's read reports it
    check_chunk_record([&] { return chunk_text(shown, rank_, origin, chunk_); }, addr, stored, file_bytes_,
                       plain_chunk_bytes_);
  }
}

std::string decoders_text() {
  return std::string("deflate (libdeflate ") + LIBDEFLATE_VERSION_STRING + "), lzf (liblzf " +
         std::to_string(LZF_VERSION >> 8) + "." + std::to_string(LZF_VERSION & 0xff) + "), shuffle";
}

void shuffle_bytes(const unsigned char* in, std::size_t bytes, std::size_t element, unsigned char* out) {
  byte_planes<true>(in, bytes, element, out);
}

}  // namespace cvest::io
