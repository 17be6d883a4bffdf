#include "io/cube/RawCube.hpp"

#include "io/os/Faults.hpp"
#include "io/os/ReadWriteAt.hpp"
#include "io/os/TempFiles.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace cvest::io {

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

}  // namespace cvest::io
