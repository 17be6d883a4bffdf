// h5py's LZF filter (registered with The HDF Group as 32000): HDF5's library
// has no such filter; cvest writes and reads its chunks itself (liblzf), and
// h5py (so xarray's h5netcdf engine and Dask) reads them.
#include "io/codecs/Codecs.hpp"

#include <lzf.h>

namespace cvest::io {

namespace {

// What h5py's lzf filter records: its revision, liblzf's API version, and
// the chunk's bytes (which size the reader's buffer).
constexpr unsigned h5py_lzf_revision = 4;

class LzfCodec final : public Codec {
 public:
  H5Z_filter_t id() const override { return 32000; }
  std::string name() const override { return "lzf"; }
  std::string library() const override {
    return "lzf (liblzf " + std::to_string(LZF_VERSION >> 8) + "." + std::to_string(LZF_VERSION & 0xff) + ")";
  }
  std::vector<unsigned> values(const CompressionSpec&, std::size_t, std::size_t chunk_bytes, bool) const override {
    return {h5py_lzf_revision, LZF_VERSION, unsigned(chunk_bytes)};
  }
  bool keeps_size(const std::vector<unsigned>&) const override { return false; }
  // Literal runs: a control byte per 32 bytes at worst.
  std::size_t max_stored(std::size_t plain, const FilterUse&) const override { return plain + plain / 32 + 64; }
  std::size_t encode(const unsigned char* in, std::size_t bytes, const FilterUse&,
                     std::vector<unsigned char>& out) const override {
    out.resize(bytes);
    return bytes > 1 ? lzf_compress(in, unsigned(bytes), out.data(), unsigned(bytes - 1)) : 0;
  }
  bool decode(const unsigned char* in, std::size_t stored, const FilterUse&, unsigned char* out,
              std::size_t plain) const override {
    // liblzf reads a first byte whatever the length (and checks the rest).
    return stored > 0 && lzf_decompress(in, unsigned(stored), out, unsigned(plain)) == plain;
  }
};

}  // namespace

const Codec& lzf_codec() {
  static const LzfCodec codec;
  return codec;
}

}  // namespace cvest::io
