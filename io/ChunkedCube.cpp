#include "io/ChunkedCube.hpp"

#include "io/codecs/Codec.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <mutex>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace cvest::io {

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
  const std::size_t es = H5Tget_size(type.get());
  std::vector<const Codec*> codecs;
  std::vector<FilterUse> uses;
  // One filter that changes a chunk's size at most, and last (each undone
  // to a chunk's bytes); other pipelines are HDF5's to read.
  bool resized = false;
  for (const Filter& f : filters_of(create)) {
    const Codec* codec = codec_for(f.id);
    if (!codec || !codec->decodes(f.values) || resized) return nullptr;
    resized = !codec->keeps_size(f.values);
    codecs.push_back(codec);
    uses.push_back({f.values, es});
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
  cube->es_ = es;
  cube->codecs_ = std::move(codecs);
  cube->uses_ = std::move(uses);
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
  thread_local std::vector<unsigned char> packed, steps[2];  // scratch per thread
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
  // The filters undone last to first, each into the other scratch buffer;
  // every one gives a chunk's bytes.
  for (std::size_t f = codecs_.size(), next = 0; f-- > 0;) {
    if (mask & (1u << f)) continue;  // a set bit: skipped for this chunk
    std::vector<unsigned char>& into = steps[next];
    into.resize(chunk_bytes);
    if (!codecs_[f]->decode(data, size, uses_[f], into.data(), chunk_bytes))
      throw IoError(where() + ": not a valid " + codecs_[f]->name() + " stream of " + std::to_string(chunk_bytes) +
                    " bytes (" + std::to_string(size) + " stored)");
    data = into.data();
    size = chunk_bytes;
    next ^= 1;
  }
  if (size != chunk_bytes)
    throw IoError(where() + ": " + std::to_string(size) + " bytes, expected " + std::to_string(chunk_bytes));
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
}  // namespace cvest::io
