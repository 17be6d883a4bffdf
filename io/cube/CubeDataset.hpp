#pragma once
// A cube's dataset as cvest creates it (an output's, a generated input's):
// chunked, plain or through the codecs' filters.
#include "core/Names.hpp"
#include "io/codecs/Codec.hpp"
#include "io/hdf5/Hdf5.hpp"

#include <functional>
#include <string>
#include <vector>

namespace cvest::io {

// The cube (or table) dataset `name` of `dims` in `chunk`s, plain or
// compressed with the filters io::pipeline_for names (gzip: shuffle, deflate;
// lzf: shuffle, h5py's lzf; blosc; bitshuffle-lz4), each optional as HDF5's
// setters and h5py make them, so a chunk a filter cannot shrink is stored
// without it. IoError naming `shown`, also where an HDF5 plugin's set_local
// recorded a filter otherwise than cvest codes it.
Dataset create_dataset(const File& file, const std::string& name, Precision precision, const std::vector<hsize_t>& dims,
                       const std::vector<hsize_t>& chunk, const CompressionSpec& compression, const std::string& shown);

// A generated input's cube in the new `file` (for messages: `path`):
// multBy (N, K) and discount (T, N, K) of `precision`, unfiltered, in chunks
// of a date of cube_chunk's ids, written a date at a time from `values`:
// values(0, 0) multBy's, values(1, t) discount's date t, each C order, of
// `precision` (the pointer read before the next call). `generator` is
// discount's attribute of that name. IoError naming the file and dataset.
void write_input_cube(const File& file, const std::string& path, Precision precision, Index T, Index N, Index K,
                      const std::function<const void*(int stream, Index date)>& values, const std::string& generator);

}  // namespace cvest::io
