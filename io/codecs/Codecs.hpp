#pragma once
// The codecs' objects, one per file of io/codecs/, for the table in
// io/codecs/Codecs.cpp.
#include "io/codecs/Codec.hpp"

namespace cvest::io {

const Codec& shuffle_codec();         // HDF5's shuffle (2)
const Codec& deflate_codec();         // HDF5's deflate (1), by libdeflate
const Codec& lzf_codec();             // h5py's lzf (32000), by liblzf
const Codec& blosc_codec();           // Blosc (32001), by c-blosc
const Codec& bitshuffle_lz4_codec();  // bitshuffle (32008) with LZ4 inside, by liblz4

}  // namespace cvest::io
