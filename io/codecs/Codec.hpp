#pragma once
// The chunk filters cvest applies on its own threads, byte for byte as the
// HDF5 filter of the same id (built in, or a registered plugin) would, so
// HDF5 (whose thread-safe build runs one call at a time) only stores and
// finds chunks. One file per codec in io/codecs/, its encoder and decoder
// side by side; the table that names them is io/codecs/Codecs.cpp, so a new
// codec is one file and a line there.
#include "core/Names.hpp"
#include "io/codecs/ChunkStream.hpp"

#include <hdf5.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace cvest::io {

// What one filter needs to code a chunk: its record in the dataset (HDF5's
// client data, cd_values, as the filter's own set_local writes them; to
// encode, Codec::values' for the output) and the element's bytes.
struct FilterUse {
  std::vector<unsigned> values;
  std::size_t element = 8;
};

class Codec {
 public:
  virtual ~Codec() = default;
  virtual H5Z_filter_t id() const = 0;
  // As HDF5 and h5py name it: "deflate", "shuffle", "lzf", "blosc", "bitshuffle".
  virtual std::string name() const = 0;
  // The library and version behind it, for `cvest info`.
  virtual std::string library() const = 0;
  // The filter's record to create an output of `element`-byte values in
  // chunks of `chunk_bytes` with (every filter optional, as HDF5's own
  // setters and h5py make them: a chunk a filter cannot shrink is stored
  // without it, its bit set in the chunk's filter mask). Where this process's
  // HDF5 has the filter (`registered`: a plugin), its set_local rewrites the
  // record as the dataset is created, and expects what users pass it.
  virtual std::vector<unsigned> values(const CompressionSpec& spec, std::size_t element, std::size_t chunk_bytes,
                                       bool registered) const = 0;
  // Whether chunks a filter recorded with `values` come out of it at the
  // size they went in (shuffles), and whether this codec decodes them at all
  // (else HDF5 reads the dataset, where it has the filter).
  virtual bool keeps_size(const std::vector<unsigned>& values) const = 0;
  virtual bool decodes(const std::vector<unsigned>& /*values*/) const { return true; }
  // What is wrong with a record this codec's own filter would refuse (empty
  // where nothing): said as an error, never read with a default in its place.
  virtual std::string record_error(const std::vector<unsigned>& /*values*/) const { return ""; }
  // The most bytes the filter can store a chunk of `plain` bytes in: a
  // chunk record that claims more is damaged, refused before anything is
  // allocated for it. Generous: a bound, not the encoder's exact worst case.
  virtual std::size_t max_stored(std::size_t plain, const FilterUse& use) const = 0;
  // `bytes` of `in` filtered into `out` (resized to fit). Returns the bytes
  // to store, or 0 where they would be no fewer (stored unfiltered, the
  // filter's mask bit set). std::bad_alloc or std::runtime_error on failure.
  virtual std::size_t encode(const unsigned char* in, std::size_t bytes, const FilterUse& use,
                             std::vector<unsigned char>& out) const = 0;
  // `stored` bytes of `in` undone into `out`, exactly `plain` bytes of it.
  // False where the bytes are not what this filter writes (damaged).
  virtual bool decode(const unsigned char* in, std::size_t stored, const FilterUse& use, unsigned char* out,
                      std::size_t plain) const = 0;
  // Whether a chunk it stored (as the last filter, alone) decodes in parts
  // (io/codecs/ChunkStream.hpp); the stream over one of `stored` bytes
  // holding `plain`, reading through `read`; and what an open stream
  // holds while it decodes parts of `part` bytes (its buffers, not the part).
  virtual bool streams(const FilterUse& /*use*/) const { return false; }
  virtual std::unique_ptr<ChunkStream> stream(const FilterUse& /*use*/, std::size_t /*stored*/, std::size_t /*plain*/,
                                              ReadStored /*read*/) const {
    return nullptr;
  }
  virtual std::size_t stream_bytes(const FilterUse& /*use*/, std::size_t /*part*/, std::size_t /*plain*/) const {
    return 0;
  }
};

// The codec for HDF5 filter `id`, or nullptr where cvest has none.
const Codec* codec_for(H5Z_filter_t id);
// The filters, in pipeline order, that store an output compressed as `spec` says.
std::vector<const Codec*> pipeline_for(const CompressionSpec& spec);
// What cvest codes itself, with the libraries' versions, for `cvest info`:
// "shuffle, deflate (libdeflate 1.14), lzf (liblzf 1.5), ...".
std::string codecs_text();

// HDF5's shuffle order: byte j of every element together (plane j).
// Shuffle builds the planes, !Shuffle undoes them (io/codecs/Shuffle.cpp).
void shuffle_bytes(const unsigned char* in, std::size_t bytes, std::size_t element, unsigned char* out);
void unshuffle_bytes(const unsigned char* in, std::size_t bytes, std::size_t element, unsigned char* out);

}  // namespace cvest::io
