// Blosc (HDF5 filter 32001, hdf5-blosc's and hdf5plugin's): each chunk one
// Blosc frame (a 16-byte header, then blocks shuffled by byte or bit and
// compressed by lz4 or zstd inside), made and read by c-blosc's
// context-based calls, one thread each (cvest's threads are the parallelism).
#include "io/codecs/Codecs.hpp"

#include <blosc.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace cvest::io {

namespace {

// The record hdf5-blosc's set_local writes: its filter revision, Blosc's
// format version, the element's bytes, the chunk's bytes; then the user's
// level, shuffle (0 none, 1 byte, 2 bit) and compressor code.
constexpr unsigned blosc_filter_revision = 2;

class BloscCodecImpl final : public Codec {
 public:
  H5Z_filter_t id() const override { return 32001; }
  std::string name() const override { return "blosc"; }
  std::string library() const override {
    std::string text = std::string("blosc (c-blosc ") + blosc_get_version_string();
    for (const char* inside : {"lz4", "zstd"}) {
      char *lib = nullptr, *version = nullptr;
      if (blosc_get_complib_info(inside, &lib, &version) >= 0 && version)
        text += std::string(", ") + inside + " " + version;
      std::free(lib);
      std::free(version);
    }
    return text + ")";
  }
  std::vector<unsigned> values(const CompressionSpec& spec, std::size_t element, std::size_t chunk_bytes,
                               bool) const override {
    return {blosc_filter_revision, BLOSC_VERSION_FORMAT, unsigned(element), unsigned(chunk_bytes),
            unsigned(spec.blosc_level), spec.blosc_shuffle == ShuffleKind::bit ? unsigned(BLOSC_BITSHUFFLE)
                                                                               : unsigned(BLOSC_SHUFFLE),
            spec.blosc_codec == BloscCodec::zstd ? unsigned(BLOSC_ZSTD) : unsigned(BLOSC_LZ4)};
  }
  bool keeps_size(const std::vector<unsigned>&) const override { return false; }
  // c-blosc's own guarantee: never more than the plain bytes and its header.
  std::size_t max_stored(std::size_t plain, const FilterUse&) const override { return plain + BLOSC_MAX_OVERHEAD; }
  std::size_t encode(const unsigned char* in, std::size_t bytes, const FilterUse& use,
                     std::vector<unsigned char>& out) const override {
    // The record's settings, hdf5plugin's defaults where it has none.
    const auto at = [&](std::size_t k, unsigned fallback) { return use.values.size() > k ? use.values[k] : fallback; };
    const unsigned level = at(4, 5), shuffle = at(5, BLOSC_SHUFFLE), code = at(6, BLOSC_LZ4);
    const char* compressor = code == BLOSC_ZSTD ? BLOSC_ZSTD_COMPNAME : BLOSC_LZ4_COMPNAME;
    out.resize(bytes + BLOSC_MAX_OVERHEAD);
    const int stored = blosc_compress_ctx(int(level), int(shuffle), at(2, unsigned(use.element)), bytes, in,
                                          out.data(), out.size(), compressor, 0, 1);
    if (stored < 0) throw std::runtime_error("Blosc could not compress a chunk (" + std::to_string(stored) + ")");
    return std::size_t(stored) < bytes ? std::size_t(stored) : 0;
  }
  bool decode(const unsigned char* in, std::size_t stored, const FilterUse&, unsigned char* out,
              std::size_t plain) const override {
    if (stored < BLOSC_MIN_HEADER_LENGTH) return false;
    std::size_t nbytes = 0, cbytes = 0, block = 0;
    blosc_cbuffer_sizes(in, &nbytes, &cbytes, &block);
    if (nbytes != plain || cbytes > stored || blosc_cbuffer_validate(in, cbytes, &nbytes) != 0 || nbytes != plain)
      return false;
    return blosc_decompress_ctx(in, out, plain, 1) == int(plain);
  }
};

}  // namespace

const Codec& blosc_codec() {
  static const BloscCodecImpl codec;
  return codec;
}

}  // namespace cvest::io
