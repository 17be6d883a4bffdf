// HDF5's shuffle filter (id 2): byte j of every element together (plane j),
// which lets a compressor after it see runs of exponent bytes.
#include "io/codecs/Codec.hpp"
#include "io/codecs/Codecs.hpp"

#include <H5Zpublic.h>

#include <cstring>

namespace cvest::io {

namespace {

// One pass with whole elements in order, unrolled for doubles and floats.
template <bool Shuffle, std::size_t Element>
void byte_planes_fixed(const unsigned char* in, std::size_t n, unsigned char* out) {
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < Element; ++j) {
      if constexpr (Shuffle) out[j * n + i] = in[i * Element + j];
      else out[i * Element + j] = in[j * n + i];
    }
}

// As HDF5's filter: bytes past the last whole element copied as they are,
// and a chunk of one element or less (or elements of one byte) unchanged.
template <bool Shuffle>
void byte_planes(const unsigned char* in, std::size_t bytes, std::size_t element, unsigned char* out) {
  const std::size_t n = element > 0 ? bytes / element : 0;
  if (element <= 1 || n <= 1) {
    std::memcpy(out, in, bytes);
    return;
  }
  if (element == 8) byte_planes_fixed<Shuffle, 8>(in, n, out);
  else if (element == 4) byte_planes_fixed<Shuffle, 4>(in, n, out);
  else
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < element; ++j) {
        if constexpr (Shuffle) out[j * n + i] = in[i * element + j];
        else out[i * element + j] = in[j * n + i];
      }
  std::memcpy(out + n * element, in + n * element, bytes - n * element);
}

class ShuffleCodec final : public Codec {
 public:
  H5Z_filter_t id() const override { return H5Z_FILTER_SHUFFLE; }
  std::string name() const override { return "shuffle"; }
  std::string library() const override { return "shuffle"; }
  std::vector<unsigned> values(const CompressionSpec&, std::size_t, std::size_t, bool) const override {
    return {};  // HDF5's set_local records the element size
  }
  bool keeps_size(const std::vector<unsigned>&) const override { return true; }
  std::size_t max_stored(std::size_t plain, const FilterUse&) const override { return plain; }
  std::size_t encode(const unsigned char* in, std::size_t bytes, const FilterUse& use,
                     std::vector<unsigned char>& out) const override {
    out.resize(bytes);
    shuffle_bytes(in, bytes, element_of(use), out.data());
    return bytes;
  }
  bool decode(const unsigned char* in, std::size_t stored, const FilterUse& use, unsigned char* out,
              std::size_t plain) const override {
    if (stored != plain) return false;
    unshuffle_bytes(in, plain, element_of(use), out);
    return true;
  }

 private:
  // The element size HDF5 recorded (its set_local's), else the type's.
  static std::size_t element_of(const FilterUse& use) {
    return !use.values.empty() && use.values[0] > 0 ? use.values[0] : use.element;
  }
};

}  // namespace

void shuffle_bytes(const unsigned char* in, std::size_t bytes, std::size_t element, unsigned char* out) {
  byte_planes<true>(in, bytes, element, out);
}

void unshuffle_bytes(const unsigned char* in, std::size_t bytes, std::size_t element, unsigned char* out) {
  byte_planes<false>(in, bytes, element, out);
}

const Codec& shuffle_codec() {
  static const ShuffleCodec codec;
  return codec;
}

}  // namespace cvest::io
