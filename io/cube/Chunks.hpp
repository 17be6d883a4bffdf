#pragma once
// A cube's bytes in an HDF5 file, moved by cvest's own threads: pread and
// pwrite where they lie as in memory (io/cube/RawCube.hpp), chunks decoded by the
// reading thread (io/cube/ChunkedCube.hpp, through io/codecs/), and the reader
// that picks the fastest path that applies (io/cube/CubeReader.hpp), falling back
// to HDF5's H5Dread; what they share is io/hdf5/ChunkFiles.hpp.
#include "io/hdf5/ChunkFiles.hpp"
#include "io/cube/ChunkedCube.hpp"
#include "io/cube/CubeReader.hpp"
#include "io/cube/RawCube.hpp"
#include "io/codecs/Codec.hpp"

namespace cvest::io {

// h5py's LZF filter, registered with The HDF Group under this id
// (io/codecs/Lzf.cpp).
inline constexpr H5Z_filter_t h5py_lzf_filter = 32000;

}  // namespace cvest::io
