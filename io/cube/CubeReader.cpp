#include "io/cube/CubeReader.hpp"

#include "io/codecs/Codec.hpp"

#include <algorithm>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace cvest::io {

namespace {
// A cell of chunks HDF5 may hold in its cache beyond a budget that holds
// none decoded by cvest: within the slack a run's RSS has over its budget
// (64 MiB), where a tiny budget would otherwise refuse small chunks.
constexpr double hdf5_chunk_slack = 16 << 20;
}  // namespace

double HeldChunk::holding_bytes(int cells, int threads) const {
  // A cell is decoded by one thread, a chunk at a time.
  return double(cells * per_cell) * double(bytes) + double(std::min(cells, std::max(threads, 1))) * double(decode_bytes);
}

double HeldChunk::part_holding_bytes(int cells, Index part_ids) const {
  const std::size_t part = bytes / std::size_t(ids) * std::size_t(part_ids);
  return double(cells * per_cell) * double(part) + double((cells + 1) * per_cell) * double(stream_bytes(part));
}

CubeReader::CubeReader(const Dataset& ds, const std::string& path, const std::string& name, Index N, Index K,
                       std::size_t scratch_bytes, DirectMode reads, const std::string& reads_because,
                       std::size_t held_bytes, bool holds)
    : ds_(ds), path_(path), name_(name), N_(N), K_(K) {
  Dataspace space(H5Dget_space(ds.get()));
  rank_ = H5Sget_simple_extent_ndims(space.get());
  if (hsize_t dims[3] = {0, 0, 0}; rank_ == 3 && H5Sget_simple_extent_dims(space.get(), dims, nullptr) == 3)
    T_ = Index(dims[0]);
  const PropList create(H5Dget_create_plist(ds.get()));
  const auto filters = filters_of(create);
  const bool hdf5_decodes = !missing_in_hdf5(filters);
  hsize_t chunk[3] = {0, 0, 0};
  if (H5Pget_layout(create.get()) == H5D_CHUNKED && H5Pget_chunk(create.get(), 3, chunk) == rank_ &&
      (rank_ == 2 || rank_ == 3)) {
    if (rank_ == 2) chunk[2] = chunk[1], chunk[1] = chunk[0], chunk[0] = 1;
    chunk_ = {Index(chunk[0]), Index(chunk[1]), Index(chunk[2])};
    const Datatype type(H5Dget_type(ds.get()));
    decoded_chunk_bytes_ = std::size_t(chunk_[0] * chunk_[1] * chunk_[2]) * H5Tget_size(type.get());
    filtered_ = !filters.empty();
    if (filters.empty()) plain_chunk_bytes_ = decoded_chunk_bytes_;
    const File file(H5Iget_file_id(ds.get()));
    hsize_t file_bytes = 0, userblock = 0;
    if (file && H5Fget_filesize(file.get(), &file_bytes) >= 0) file_bytes_ = file_bytes;
    const PropList file_create(file ? H5Fget_create_plist(file.get()) : -1);
    if (file_create && H5Pget_userblock(file_create.get(), &userblock) >= 0) userblock_ = userblock;
  }
  for (Precision p : {Precision::f64, Precision::f32}) {
    const int k = p == Precision::f64 ? 0 : 1;
    raw_[k] = RawCube::open(ds, path + ": dataset '" + name + "'", native_type(p), false, N, K, reads, reads_because);
    if (!raw_[k]) chunked_[k] = ChunkedCube::open(ds, path + ": dataset '" + name + "'", native_type(p), K);
    // Three buffers per decoding thread: the host threads, and as many
    // again in the team of the overlapped pipeline's reader. Over that
    // share, a job's discount is held decoded, each chunk once, while
    // blocks cut it (`holds`); other datasets (multBy, whose rows are read
    // again for every date; outputs read back) go through HDF5, unless it
    // cannot decode them.
    if (chunked_[k] && 6.0 * double(chunked_[k]->chunk_bytes()) * double(omp_get_max_threads()) >
                           double(scratch_bytes)) {
      if (holds) chunked_[k]->hold(1);
      else if (hdf5_decodes) chunked_[k].reset();
      // Where even one cell does not fit, HDF5 reads cells within the slack
      // (io/input/ChunkCache.hpp); larger ones stay held and the run is refused
      // (app/run/ChunkHolding.hpp): HDF5 read one-date chunks of 400 MB
      // for minutes, decoding each again for every block.
      const HeldChunk h = chunked_[k] ? held_chunk(p) : HeldChunk{};
      if (chunked_[k] && hdf5_decodes && h.holding_bytes(1, omp_get_max_threads()) > double(held_bytes) &&
          double(h.bytes) * h.per_cell <= hdf5_chunk_slack)
        chunked_[k].reset();
    }
  }
}

std::array<Index, 2> CubeReader::decoded_chunk(Precision precision) const {
  const auto& c = chunked_[precision == Precision::f64 ? 0 : 1];
  if (c && !c->holds()) return {c->chunk_dates(), c->chunk_ids()};
  return {0, 0};
}

bool CubeReader::rereads_chunks(Precision precision) const {
  const int k = precision == Precision::f64 ? 0 : 1;
  if (raw_[k] || !filtered_ || double(decoded_chunk_bytes_) <= hdf5_chunk_slack) return false;
  return !chunked_[k] || !chunked_[k]->holds();
}

HeldChunk CubeReader::held_chunk(Precision precision) const {
  const auto& c = chunked_[precision == Precision::f64 ? 0 : 1];
  if (!c || !c->holds()) return {};
  HeldChunk h{c->chunk_dates(), c->chunk_ids(), c->chunk_cols(), c->chunk_bytes(), c->decode_scratch_bytes(),
              int((K_ + c->chunk_cols() - 1) / c->chunk_cols()), {}};
  if (c->streams()) h.stream_bytes = [cube = c.get()](std::size_t part) { return cube->stream_bytes(part); };
  return h;
}

void CubeReader::hold(Precision precision, std::size_t chunks, Index part_ids) const {
  if (const auto& c = chunked_[precision == Precision::f64 ? 0 : 1]; c && c->holds()) c->hold(chunks, part_ids);
}

void CubeReader::begin_pass(Precision precision, const std::vector<Block>& blocks) const {
  if (const auto& c = chunked_[precision == Precision::f64 ? 0 : 1]) c->begin_pass(blocks);
}

std::array<std::uint64_t, 2> CubeReader::decodes(Precision precision) const {
  const auto& c = chunked_[precision == Precision::f64 ? 0 : 1];
  if (!c) return {0, 0};
  return {c->decodes(), c->distinct_decodes()};
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
  st.held = chunked_[k] && chunked_[k]->holds();
  st.held_part_ids = st.held ? chunked_[k]->part_ids() : 0;
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
    case ReadBy::decode:
      if (st.held_part_ids > 0)
        return text + "; decoded by cvest's threads a part of " + std::to_string(st.held_part_ids) +
               " ids at a time, each part once, held while the blocks that cut it run";
      return text + (st.held ? "; decoded by cvest's threads, each chunk once, held while the blocks that cut it run"
                             : "; decoded by cvest's threads");
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

bool CubeReader::reads_direct(Precision precision) const {
  const int k = precision == Precision::f64 ? 0 : 1;
  return raw_[k] && raw_[k]->reader()->direct();
}

void CubeReader::read(const Block& b, Precision precision, void* buffer) const {
  const int k = precision == Precision::f64 ? 0 : 1;
  if (raw_[k] && raw_[k]->read(b, buffer)) return;
  if (chunked_[k] && chunked_[k]->read(b, buffer)) return;
  // A chunk not stored: HDF5 fills it, once cvest has checked the others.
  if (chunked_[k]) chunked_[k]->check_stored(b);
  check_chunk_records(b);
  const std::string what = path_ + ": dataset '" + name_ + "'";
  if (rank_ == 2) read_hyperslab(ds_, native_type(precision), {b.ids.begin, 0}, {b.ids.size(), K_}, buffer, what);
  else read_hyperslab(ds_, native_type(precision), {b.dates.begin, b.ids.begin, 0}, {b.dates.size(), b.ids.size(), K_}, buffer, what);
}

bool CubeReader::read_whole(Precision precision, void* buffer) const {
  const int k = precision == Precision::f64 ? 0 : 1;
  const Block whole{{0, rank_ == 2 ? 1 : T_}, {0, N_}};
  const Index elements = chunk_[0] * chunk_[1] * chunk_[2];
  const bool in_place = !raw_[k] && !chunked_[k] && elements > 0 && chunk_[0] == 1 && chunk_[2] == K_ &&
                        N_ % chunk_[1] == 0 && decoded_chunk_bytes_ == std::size_t(elements) * element_size(precision);
  if (in_place) {
    if (const auto once = ChunkedCube::open(ds_, path_ + ": dataset '" + name_ + "'", native_type(precision), K_)) {
      once->read_once();
      if (once->read(whole, buffer)) return true;
      once->check_stored(whole);  // as read() does before HDF5 reads
    }
  }
  read(whole, precision, buffer);
  return false;
}

void CubeReader::check_chunk_records(const Block& b) const {
  if (chunk_[0] == 0) return;
  const std::string shown = path_ + ": dataset '" + name_ + "'";
  for (const auto& origin : chunk_origins(b, chunk_, K_)) {
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t stored = 0;
    if (!chunk_record(ds_.get(), rank_, origin, mask, addr, stored)) continue;  // not stored, or HDF5's read reports it
    check_chunk_record([&] { return chunk_text(shown, rank_, origin, chunk_); }, userblock_ + addr, stored,
                       file_bytes_, plain_chunk_bytes_);
  }
}

std::string decoders_text() { return codecs_text(); }


}  // namespace cvest::io
