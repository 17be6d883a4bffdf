#pragma once
// HDF5's chunk cache for an input whose chunks HDF5 reads itself (too large
// for cvest's decoding scratch, other filters, a conversion): each block's
// H5Dread reads, and inflates, every chunk it touches unless the cache still
// holds it. So blocks stay inside one row of chunks (the chunks of a date
// range and id range, across the columns), go id-major so a row is finished
// before the next, and the cache holds one row: each chunk is then read
// once, not once per block (Dask's default (100, 33554, 5) gzip chunks: 100
// times). A row per reading thread where that fits half the budget (threads
// near a row's end would otherwise evict each other's), else one; where not
// even one fits, `warning` says the budget that would hold it.
#include "core/Plan.hpp"
#include "io/cube/CubeReader.hpp"
#include "io/input/Input.hpp"

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>

namespace cvest::io {

struct ChunkRow {
  BlockQuantum quantum{0, 0};   // ids 0: not chunks HDF5 reads
  std::size_t cache_bytes = 0;  // 0: the default cache is enough
  std::string warning;
};

ChunkRow chunk_row_for_hdf5(const CubeStorage& storage, const InputShape& shape, std::size_t budget,
                            std::size_t default_cache, int readers);

// The row for `input` (opened with `default_cache`, read at `precision`) by a
// run or a check; where HDF5 reads its chunks and that cache cannot hold a
// row of them, `input` is opened again with one that can (closed first: HDF5
// shares a dataset opened twice, chunk cache and all). The warning goes to
// `progress`.
ChunkRow fit_chunk_cache(std::unique_ptr<const InputFile>& input, Precision precision, std::size_t budget,
                         std::size_t default_cache, int readers, std::ostream& progress);

}  // namespace cvest::io
