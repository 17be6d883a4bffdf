#include "io/input/ChunkCache.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <ostream>

namespace cvest::io {

ChunkRow chunk_row_for_hdf5(const CubeStorage& storage, const InputShape& shape, std::size_t budget,
                            std::size_t default_cache, int readers) {
  ChunkRow row;
  if (storage.read_by != ReadBy::hdf5 || storage.chunk.size() != 3) return row;
  const Index ct = storage.chunk[0], ci = storage.chunk[1], ck = storage.chunk[2];
  // A date's slab per chunk, unfiltered: HDF5 reads any block's part of a
  // chunk its cache cannot hold straight from the file. Filtered, it
  // decodes the whole chunk for each part unless its cache holds it.
  if (ct <= 1 && ci >= shape.N && storage.filters.empty()) return row;
  // Id-major where a row is narrower than the ids (its dates' blocks first);
  // a row of whole dates is finished in date order.
  row.quantum = {ct, ci, ci < shape.N};
  row.quantum.hdf5_cache = true;
  // HDF5 caches chunks at the file's element size.
  const double bytes = double((shape.K + ck - 1) / ck) * double(ct * ci * ck) * double(element_size(shape.precision));
  const std::size_t needed = std::size_t(bytes) + (std::size_t(1) << 20);
  const std::size_t all_readers = std::size_t(std::max(readers, 1)) * std::size_t(bytes) + (std::size_t(1) << 20);
  if (all_readers <= default_cache) return row;
  if (all_readers <= budget / 2) {
    row.cache_bytes = all_readers;
  } else if (needed <= budget / 2) {
    row.cache_bytes = needed;
  } else {
    row.warning = fmt::format(
        "'discount' is read through HDF5 in chunks ({}, {}, {}); one row of them ({}) does not fit half of "
        "memory_budget ({}), so blocks read chunks again; memory_budget = \"{}\" would read each once",
        ct, ci, ck, format_bytes(double(needed)), format_bytes(double(budget) / 2), format_bytes(2.5 * double(needed)));
  }
  return row;
}

ChunkRow fit_chunk_cache(std::unique_ptr<const InputFile>& input, Precision precision, std::size_t budget,
                         std::size_t default_cache, int readers, std::ostream& progress) {
  const ChunkRow row = chunk_row_for_hdf5(input->discount_storage(precision), input->shape(), budget, default_cache,
                                          readers);
  if (row.cache_bytes > 0) {
    const std::string path = input->path(), multby = input->multby_name(), discount = input->discount_name();
    const DirectMode reads = input->reads();
    const std::string because = input->reads_because();
    const std::size_t held = input->held_bytes();
    input.reset();
    input = std::make_unique<const InputFile>(path, multby, discount, row.cache_bytes, reads, because, held);
  }
  if (!row.warning.empty()) fmt::print(progress, "cvest: warning: {}: {}\n", input->path(), row.warning);
  return row;
}

}  // namespace cvest::io
