#include "io/cube/ChunkedCube.hpp"

#include "io/codecs/Codec.hpp"
#include "io/os/ReadWriteAt.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <map>
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
  // The file's floats as they are, or converted as they are copied out
  // (float32 discount beside a float64 multBy: NumPy's promotion): native
  // floats of either width, both ways.
  const auto native_float = [](hid_t t) {
    return H5Tequal(t, H5T_NATIVE_DOUBLE) > 0 || H5Tequal(t, H5T_NATIVE_FLOAT) > 0;
  };
  if (H5Tequal(type.get(), mem_type) <= 0 && !(native_float(type.get()) && native_float(mem_type))) return nullptr;
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
    if (codec)
      if (const std::string error = codec->record_error(f.values); !error.empty())
        throw InputError(shown + ": " + error + " (" + f.name + ", HDF5 filter " + std::to_string(f.id) + ")");
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
  cube->mem_es_ = H5Tget_size(mem_type);
  const Dataspace space(H5Dget_space(ds.get()));
  hsize_t dims[3] = {1, 0, 0};
  H5Sget_simple_extent_dims(space.get(), rank == 3 ? dims : dims + 1, nullptr);
  cube->T_ = Index(dims[0]);
  cube->N_ = Index(dims[1]);
  // The most a chunk record may claim: each filter's bound, in the order
  // they stored it.
  std::size_t bound = cube->chunk_bytes();
  for (std::size_t f = 0; f < codecs.size(); ++f) bound = codecs[f]->max_stored(bound, uses[f]);
  cube->max_stored_ = bound;
  // Parts of a chunk are runs of its bytes only where it holds one date.
  cube->streams_ = chunk[0] == 1 && (codecs.empty() || (codecs.size() == 1 && codecs[0]->streams(uses[0])));
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

// copy_runs converting each of `n` values a run from From to To (C's
// conversion: exact widening, narrowing rounded to nearest, as HDF5's and
// NumPy's).
template <class From, class To>
void convert_runs(unsigned char* dst, std::size_t dst_step, const unsigned char* src, std::size_t src_step,
                  std::size_t rows, std::size_t n) {
  for (std::size_t r = 0; r < rows; ++r, dst += dst_step, src += src_step)
    for (std::size_t c = 0; c < n; ++c) {
      From v;
      std::memcpy(&v, src + c * sizeof(From), sizeof v);
      const To w = static_cast<To>(v);
      std::memcpy(dst + c * sizeof(To), &w, sizeof w);
    }
}

}  // namespace

bool ChunkedCube::streams_outer() const {
  return held_ && codecs_.size() > 1 && codecs_.back()->streams(uses_.back());
}

std::size_t ChunkedCube::decode_scratch_bytes() const {
  const std::size_t stored = streams_outer() ? codecs_.back()->stream_bytes(uses_.back(), chunk_bytes(), chunk_bytes())
                             : codecs_.empty() ? 0
                                               : std::min(max_stored_, largest_stored_);
  return stored + (codecs_.size() > 1 ? chunk_bytes() : 0);
}

std::size_t ChunkedCube::stream_bytes(std::size_t part) const {
  return codecs_.empty() ? 0 : codecs_[0]->stream_bytes(uses_[0], part, chunk_bytes());
}

void ChunkedCube::hold(std::size_t cells, Index part_ids) {
  const bool scanned = held_ != nullptr;
  held_ = std::make_unique<HeldChunks>(cells);
  part_ids_ = streams_ && part_ids > 0 && part_ids < chunk_[1] && chunk_[1] % part_ids == 0 ? part_ids : 0;
  if (scanned) return;
  // Held chunks are few and large: the largest one stored is what a decode
  // reads, where the index answers (each record a walk of the index: at
  // most a thousand of them; else the filters' bound).
  const Dataspace space(H5Dget_space(ds_));
  hsize_t count = 0;
  if (!space || H5Dget_num_chunks(ds_, space.get(), &count) < 0 || count > 1000) return;
  std::size_t largest = 0;
  for (hsize_t j = 0; j < count; ++j) {
    hsize_t offset[3] = {0, 0, 0}, stored = 0;
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    if (H5Dget_chunk_info(ds_, space.get(), j, offset, &mask, &addr, &stored) < 0) return;
    largest = std::max(largest, std::size_t(stored));
  }
  largest_stored_ = largest;  // a record above the bound is refused as it is read
}

void ChunkedCube::begin_pass(const std::vector<Block>& blocks) {
  decodes_ = 0;
  {
    const std::lock_guard lock(seen_lock_);
    seen_.clear();
  }
  if (!held_) return;
  {
    const std::lock_guard lock(streams_lock_);
    streams_open_.clear();  // a pass cut short left them part way
  }
  std::vector<std::pair<HeldChunks::Key, std::uint64_t>> expected;
  for (const Block& b : blocks)
    for (const auto& cell : cells_of(b)) expected.emplace_back(cell, cell_piece(b, cell));
  held_->begin_pass(expected);
}

std::vector<std::array<Index, 3>> ChunkedCube::cells_of(const Block& b) const {
  const auto [ct, ci, ck] = cell_extent();
  (void)ck;
  std::vector<std::array<Index, 3>> cells;
  for (Index t = b.dates.begin - b.dates.begin % ct; t < b.dates.end; t += ct)
    for (Index i = b.ids.begin - b.ids.begin % ci; i < b.ids.end; i += ci) cells.push_back({t, i, 0});
  return cells;
}

std::uint64_t ChunkedCube::distinct_decodes() const {
  const std::lock_guard lock(seen_lock_);
  return seen_.size();
}

void ChunkedCube::count_decode(const std::array<Index, 3>& origin) const {
  ++decodes_;
  const std::lock_guard lock(seen_lock_);
  seen_.insert(origin);
}

std::uint64_t ChunkedCube::piece_elements(const Block& b, const std::array<Index, 3>& origin,
                                          const std::array<Index, 3>& extent) const {
  const Index t = std::min(origin[0] + extent[0], b.dates.end) - std::max(origin[0], b.dates.begin);
  const Index i = std::min(origin[1] + extent[1], b.ids.end) - std::max(origin[1], b.ids.begin);
  return std::uint64_t(t) * std::uint64_t(i) * std::uint64_t(std::min(extent[2], K_ - origin[2]));
}

std::uint64_t ChunkedCube::cell_piece(const Block& b, const std::array<Index, 3>& cell) const {
  return piece_elements(b, {cell[0], cell[1], 0}, cell_extent()) / std::uint64_t(std::min(chunk_[2], K_)) *
         std::uint64_t(K_);
}

bool ChunkedCube::stored_chunk(const std::array<Index, 3>& origin, unsigned& mask, haddr_t& addr,
                               hsize_t& stored) const {
  const auto where = [&] { return chunk_text(path_, rank_, origin, chunk_); };
  quiet_hdf5_errors();  // this thread's (a team's threads are new to HDF5)
  if (!chunk_record(ds_, rank_, origin, mask, addr, stored) || stored == 0) return false;
  // (its decoders check the sizes they produce)
  check_chunk_record(where, chunk_base_ + addr, stored, file_bytes_, 0);
  if (stored > max_stored_)
    throw IoError(where() + ": recorded as " + std::to_string(stored) + " bytes, more than its filters store a chunk "
                  "of " + std::to_string(chunk_bytes()) + " bytes in (at most " + std::to_string(max_stored_) +
                  "; damaged chunk index)");
  return true;
}

ReadStored ChunkedCube::stored_reader(haddr_t addr, const std::string& shown) const {
  return [fd = fd_, at = off_t(chunk_base_ + addr), shown](std::size_t offset, std::size_t n, unsigned char* into) {
    read_at(fd, into, n, at + off_t(offset), shown);
  };
}

bool ChunkedCube::decode_part(const std::array<Index, 3>& origin, std::size_t from, std::size_t bytes,
                              unsigned char* out) const {
  std::shared_ptr<OpenStream> open;
  {
    const std::lock_guard lock(streams_lock_);
    auto& slot = streams_open_[origin];
    if (!slot) slot = std::make_shared<OpenStream>();
    open = slot;
  }
  std::unique_lock lock(open->lock);  // a chunk's parts one thread at a time
  const std::size_t row_bytes = std::size_t(chunk_[2]) * es_;
  const auto where = [&] { return chunk_text(path_, rank_, origin, chunk_); };
  const bool filtered = !codecs_.empty();
  if (!open->stream) {
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t stored = 0;
    if (!stored_chunk(origin, mask, addr, stored)) return false;
    ReadStored read = stored_reader(addr, where());
    if (!filtered || (mask & 1u)) {  // stored as it is (the filter skipped for this chunk)
      if (stored != chunk_bytes())
        throw IoError(where() + ": " + std::to_string(stored) + " bytes, expected " + std::to_string(chunk_bytes()));
      open->stream = plain_stream(std::move(read), stored);
    } else {
      open->stream = codecs_[0]->stream(uses_[0], stored, chunk_bytes(), std::move(read));
      if (!open->stream) throw IoError(where() + ": its " + codecs_[0]->name() + " record cannot be read in parts");
    }
  }
  // ... and in order: the part where the stream stands, taken by another
  // thread (HeldChunks marks it before that thread gets here), is waited
  // for, else this part would pass over it and it would start the stream
  // again. (Polled too: a claim given up elsewhere says nothing here.)
  while (open->stream && open->stream->in_order() && from > open->next && held_ &&
         held_->decoding({origin[0], origin[1] + Index(open->next / row_bytes), 0}))
    open->moved.wait_for(lock, std::chrono::milliseconds(10));
  struct Moved {
    OpenStream& open;
    ~Moved() { open.moved.notify_all(); }
  } moved{*open};
  const int restarts = open->stream->restarts();
  if (!open->stream->part(from, bytes, out))
    throw IoError(where() + ": not a valid " + (filtered ? codecs_[0]->name() : std::string("plain")) +
                  " stream of " + std::to_string(chunk_bytes()) + " bytes (its bytes from " + std::to_string(from) +
                  " to " + std::to_string(from + bytes) + ")");
  decodes_ += std::uint64_t(open->stream->restarts() - restarts);  // an earlier part decoded again from the start
  open->next = from + bytes;
  // The dataset's last part of this chunk: the stream is done.
  if (from + bytes >= std::size_t(std::min(chunk_[1], N_ - origin[1])) * row_bytes) {
    const std::lock_guard streams(streams_lock_);
    streams_open_.erase(origin);
  }
  return true;
}

bool ChunkedCube::decode_chunk(const std::array<Index, 3>& origin, unsigned char* out) const {
  // Scratch per thread, kept for the next chunk; a held chunk's is its
  // own, let go as the chunk is decoded (the budget counts one per decode).
  thread_local std::vector<unsigned char> kept_packed, kept_between;
  std::vector<unsigned char> own_packed, own_between;
  const bool own = held_ || !keep_scratch_;
  auto& packed = own ? own_packed : kept_packed;
  auto& between = own ? own_between : kept_between;
  const std::size_t chunk_bytes = this->chunk_bytes();
  const auto where = [&] { return chunk_text(path_, rank_, origin, chunk_); };
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t stored = 0;
  if (!stored_chunk(origin, mask, addr, stored)) return false;
  // The filters this chunk went through, undone last to first: the last
  // one undone writes `out`, the others the scratch between.
  std::vector<std::size_t> applied;
  for (std::size_t f = codecs_.size(); f-- > 0;)
    if (!(mask & (1u << f))) applied.push_back(f);  // a set bit: skipped for this chunk
  if (applied.empty()) {
    if (stored != chunk_bytes)
      throw IoError(where() + ": " + std::to_string(stored) + " bytes, expected " + std::to_string(chunk_bytes));
    read_at(fd_, out, stored, off_t(chunk_base_ + addr), where());
    return true;
  }
  // Two filters in a row write alternately into `between` and `out`, so
  // that the last writes `out`.
  const auto into_for = [&](std::size_t j) {
    if (j + 1 == applied.size() || (applied.size() - 1 - j) % 2 == 0) return out;
    between.resize(chunk_bytes);
    return between.data();
  };
  const unsigned char* data = nullptr;
  std::size_t size = 0, first = 0;
  if (streams_outer() && applied.size() > 1 && applied[0] == codecs_.size() - 1) {
    // A held chunk through a shuffle and gzip (h5py's shuffle=True): the
    // outer filter undone from the file a MiB at a time, its stored bytes
    // never held beside the chunk and the bytes between.
    unsigned char* into = into_for(0);
    const auto stream = codecs_[applied[0]]->stream(uses_[applied[0]], stored, chunk_bytes, stored_reader(addr, where()));
    if (!stream || !stream->part(0, chunk_bytes, into))
      throw IoError(where() + ": not a valid " + codecs_[applied[0]]->name() + " stream of " +
                    std::to_string(chunk_bytes) + " bytes (" + std::to_string(stored) + " stored)");
    data = into;
    size = chunk_bytes;
    first = 1;
  } else {
    packed.resize(stored);
    read_at(fd_, packed.data(), stored, off_t(chunk_base_ + addr), where());
    data = packed.data();
    size = stored;
  }
  for (std::size_t j = first; j < applied.size(); ++j) {
    const std::size_t f = applied[j];
    unsigned char* into = into_for(j);
    if (!codecs_[f]->decode(data, size, uses_[f], into, chunk_bytes))
      throw IoError(where() + ": not a valid " + codecs_[f]->name() + " stream of " + std::to_string(chunk_bytes) +
                    " bytes (" + std::to_string(size) + " stored)");
    data = into;
    size = chunk_bytes;
  }
  return true;
}

void ChunkedCube::copy_piece(const Block& b, const std::array<Index, 3>& origin, const std::array<Index, 3>& extent,
                             const unsigned char* data, unsigned char* out) const {
  // The part of the chunk inside the block: dates [t0, t1), ids [i0, i1),
  // columns [kc, kc + nk).
  const Index ct = extent[0], ci = extent[1], ck = extent[2];
  const Index tc = origin[0], ic = origin[1], kc = origin[2];
  const std::size_t row = std::size_t(K_) * mem_es_, chunk_row = std::size_t(ck) * es_;
  const Index t0 = std::max(tc, b.dates.begin), t1 = std::min(tc + ct, b.dates.end);
  const Index i0 = std::max(ic, b.ids.begin), i1 = std::min(ic + ci, b.ids.end);
  const std::size_t nk = std::size_t(std::min(ck, K_ - kc)), rows = std::size_t(i1 - i0);
  for (Index t = t0; t < t1; ++t) {
    const unsigned char* src = data + (std::size_t((t - tc) * ci) + std::size_t(i0 - ic)) * chunk_row;
    unsigned char* dst = out + offset_in_block(b, t, i0, row) + std::size_t(kc) * mem_es_;
    if (es_ != mem_es_) {
      if (es_ == 4) convert_runs<float, double>(dst, row, src, chunk_row, rows, nk);
      else convert_runs<double, float>(dst, row, src, chunk_row, rows, nk);
    } else if (ck == K_) {
      std::memcpy(dst, src, rows * row);  // whole rows: one run
    } else {
      copy_runs(dst, row, src, chunk_row, rows, nk * es_);
    }
  }
}

unsigned char* ChunkedCube::its_place(const Block& b, const std::array<Index, 3>& origin, unsigned char* out) const {
  const Index tc = origin[0], ic = origin[1];
  const bool inside = tc >= b.dates.begin && tc + chunk_[0] <= b.dates.end && ic >= b.ids.begin &&
                      ic + chunk_[1] <= b.ids.end;
  // Its rows whole (every column, at the block's element size), and its
  // dates one after the other in the block (one date, or the block's ids
  // exactly the chunk's).
  const bool one_run = chunk_[2] == K_ && es_ == mem_es_ && (chunk_[0] == 1 || b.ids.size() == chunk_[1]);
  if (!inside || !one_run) return nullptr;
  return out + offset_in_block(b, tc, ic, std::size_t(K_) * mem_es_);
}

bool ChunkedCube::decode_into(const Block& b, const std::array<Index, 3>& origin, unsigned char* out) const {
  if (unsigned char* place = its_place(b, origin, out)) {  // no scratch, no copy
    if (!decode_chunk(origin, place)) return false;
    count_decode(origin);
    return true;
  }
  thread_local std::vector<unsigned char> kept_chunk;
  std::vector<unsigned char> own_chunk;
  auto& whole_chunk = keep_scratch_ ? kept_chunk : own_chunk;
  whole_chunk.resize(chunk_bytes());
  if (!decode_chunk(origin, whole_chunk.data())) return false;
  count_decode(origin);
  copy_piece(b, origin, chunk_, whole_chunk.data(), out);
  return true;
}

bool ChunkedCube::held_into(const Block& b, const std::array<Index, 3>& cell, unsigned char* out) const {
  // The cell's chunks (one per column range), or the same part of each,
  // decoded once, by the first block that needs them, and held together
  // for the others: a block needs them all, so they are held and let go as
  // one.
  struct NotStored {};
  const std::array<Index, 3> extent = cell_extent();
  const std::size_t bytes = std::size_t(extent[0] * extent[1] * extent[2]) * es_;
  const Index per_cell = (K_ + chunk_[2] - 1) / chunk_[2];
  try {
    held_->use(
        cell, bytes * std::size_t(per_cell), cell_piece(b, cell), cell_piece(Block{{0, T_}, {0, N_}}, cell),
        [&](const HeldChunks::Key& at, unsigned char* into) {
          for (Index j = 0; j < per_cell; ++j) {
            const std::array<Index, 3> origin{at[0], at[1], j * chunk_[2]};
            if (part_ids_ == 0) {
              if (!decode_chunk(origin, into + std::size_t(j) * bytes)) throw NotStored{};
              count_decode(origin);
              continue;
            }
            // A part: the chunk's ids from at[1] on (one date: a run of its bytes).
            const std::array<Index, 3> chunk{at[0], at[1] - at[1] % chunk_[1], j * chunk_[2]};
            const std::size_t from = std::size_t(at[1] - chunk[1]) * std::size_t(chunk_[2]) * es_;
            if (!decode_part(chunk, from, bytes, into + std::size_t(j) * bytes)) throw NotStored{};
            count_decode(origin);
          }
        },
        [&](const unsigned char* data) {
          for (Index j = 0; j < per_cell; ++j)
            copy_piece(b, {cell[0], cell[1], j * chunk_[2]}, extent, data + std::size_t(j) * bytes, out);
        });
  } catch (const NotStored&) {
    return false;  // HDF5 reads the block, fill values and all
  }
  return true;
}

void ChunkedCube::check_stored(const Block& b) const {
  const std::lock_guard lock(checked_lock_);
  std::vector<unsigned char> scratch;
  for (const auto& origin : chunk_origins(b, chunk_, K_)) {
    if (checked_.count(origin)) continue;
    scratch.resize(chunk_bytes());
    decode_chunk(origin, scratch.data());  // false: not stored (HDF5 fills it)
    checked_.insert(origin);
  }
}

bool ChunkedCube::read(const Block& b, void* buffer) const {
  auto* out = static_cast<unsigned char*>(buffer);
  const auto chunks = chunk_origins(b, chunk_, K_);
  if (held_) {
    for (const auto& cell : cells_of(b))
      if (!held_into(b, cell, out)) return false;
    return true;
  }
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
