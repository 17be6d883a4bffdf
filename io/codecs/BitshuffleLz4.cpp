// Bitshuffle (HDF5 filter 32008) with LZ4 inside, "bitshuffle-lz4": a chunk
// is cut into blocks of elements (8 KiB of them by default, a multiple of 8);
// each block's bits are transposed (bit k of byte j of every element in a
// row of its own, LSB first), then compressed with LZ4. The chunk's format,
// as the filter's reader expects it: the plain bytes (8, big-endian), a
// block's bytes (4, big-endian), then per block its compressed bytes (4,
// big-endian) and the LZ4 block; elements past the last multiple of 8 are
// copied as they are. Without LZ4 (the record's fifth value 0) a chunk is
// the transposed blocks alone, which cvest reads too.
#include "io/codecs/Codecs.hpp"

#include <lz4.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <cstdint>
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

namespace cvest::io {

namespace {

constexpr unsigned lz4_inside = 2;       // the record's fifth value: LZ4 (0: none; 3: zstd, not read here)
constexpr std::size_t target_block = 8192;  // bytes per block, bitshuffle's default

// bitshuffle's default block: 8 KiB of elements, a multiple of 8, at least 128.
std::size_t default_block_elements(std::size_t element) {
  const std::size_t n = target_block / element / 8 * 8;
  return n < 128 ? 128 : n;
}

// The 8 x 8 bit matrix in x (byte r, bit c) transposed (byte c, bit r), by
// swapping ever larger sub-blocks across the diagonal.
inline std::uint64_t transpose_bits(std::uint64_t x) {
  std::uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  return x ^ t ^ (t << 28);
}

inline std::uint64_t load64(const unsigned char* p) {
  std::uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

// n elements (a multiple of 8) of `element` bytes: row 8j + k holds bit k
// of byte j of every element, element i at bit i % 8 of byte i / 8. Byte
// planes first (HDF5's shuffle), then each plane's bits, 8 elements at a time.
void bits_to_rows(const unsigned char* in, std::size_t n, std::size_t element, unsigned char* out,
                  std::vector<unsigned char>& planes) {
  planes.resize(n * element);
  shuffle_bytes(in, n * element, element, planes.data());
  const std::size_t row = n / 8;
  for (std::size_t j = 0; j < element; ++j) {
    const unsigned char* plane = planes.data() + j * n;
    std::size_t m = 0;
#ifdef __SSE2__
    // 16 elements at a time: each byte's top bit gathered (movemask) is
    // row k's two bytes for them; doubling every byte brings the next bit up.
    for (; m + 2 <= row; m += 2) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(plane + 8 * m));
      for (int k = 7; k >= 0; --k) {
        const auto bits = static_cast<std::uint16_t>(_mm_movemask_epi8(v));
        std::memcpy(out + (8 * j + std::size_t(k)) * row + m, &bits, 2);
        v = _mm_add_epi8(v, v);
      }
    }
#endif
    for (; m < row; ++m) {
      std::uint64_t y = transpose_bits(load64(plane + 8 * m));
      for (std::size_t k = 0; k < 8; ++k, y >>= 8) out[(8 * j + k) * row + m] = static_cast<unsigned char>(y);
    }
  }
}

// The inverse of bits_to_rows.
void rows_to_bits(const unsigned char* in, std::size_t n, std::size_t element, unsigned char* out,
                  std::vector<unsigned char>& planes) {
  planes.resize(n * element);
  const std::size_t row = n / 8;
  for (std::size_t j = 0; j < element; ++j)
    for (std::size_t m = 0; m < row; ++m) {
      std::uint64_t x = 0;
      for (std::size_t k = 0; k < 8; ++k) x |= std::uint64_t(in[(8 * j + k) * row + m]) << (8 * k);
      const std::uint64_t y = transpose_bits(x);
      std::memcpy(planes.data() + j * n + 8 * m, &y, 8);
    }
  unshuffle_bytes(planes.data(), n * element, element, out);
}

void put_be(unsigned char* p, std::uint64_t v, int bytes) {
  for (int b = bytes - 1; b >= 0; --b, v >>= 8) p[b] = static_cast<unsigned char>(v);
}

std::uint64_t get_be(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int b = 0; b < bytes; ++b) v = v << 8 | p[b];
  return v;
}

// The form without LZ4, either way (`transpose`: bits_to_rows or
// rows_to_bits): n elements in blocks of `block`, the last one cut to a
// multiple of 8, the elements after it copied as they are.
template <class Transpose>
void bare_blocks(Transpose transpose, const unsigned char* in, std::size_t n, std::size_t element, std::size_t block,
                 unsigned char* out, std::vector<unsigned char>& planes) {
  std::size_t first = 0;
  for (; first + 8 <= n;) {
    const std::size_t count = std::min(block, (n - first) / 8 * 8);
    transpose(in + first * element, count, element, out + first * element, planes);
    first += count;
  }
  std::memcpy(out + first * element, in + first * element, (n - first) * element);
}

struct Scratch {
  std::vector<unsigned char> planes, rows;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

constexpr std::size_t stream_input = std::size_t(1) << 20;  // stored bytes read at a time

// A chunk's parts decoded in order, block by block: blocks before a part
// are passed over by their sizes, undecoded; the block a part ends in is
// kept for the next part.
class BitshuffleStream final : public ChunkStream {
 public:
  BitshuffleStream(ReadStored read, std::size_t stored, std::size_t plain, std::size_t element, std::size_t block)
      : in_(std::move(read), stored, stream_input), plain_(plain), element_(element), block_(block) {
    rewind();
  }

 protected:
  std::size_t position() const override { return pos_; }
  void rewind() override {
    at_ = 12, first_ = 0, pos_ = 0, kept_begin_ = kept_end_ = 0;
  }
  bool next(std::size_t bytes, unsigned char* out) override {
    if (!checked_) valid_ = check();
    if (!valid_) return false;
    const std::size_t n = plain_ / element_;
    while (bytes > 0) {
      if (pos_ >= kept_begin_ && pos_ < kept_end_) {  // in the block kept
        const std::size_t take = std::min(bytes, kept_end_ - pos_);
        if (out) std::memcpy(out, kept_.data() + (pos_ - kept_begin_), take), out += take;
        pos_ += take, bytes -= take;
        continue;
      }
      if (first_ >= n || pos_ >= plain_) return false;
      if (first_ + 8 > n) {  // the elements after the last block, as they are
        const std::size_t tail = (n - first_) * element_;
        const unsigned char* p = in_.stored() - at_ == tail ? in_.at(at_, tail) : nullptr;
        if (!p) return false;
        kept_.assign(p, p + tail);
        kept_begin_ = first_ * element_, kept_end_ = plain_, first_ = n;
        continue;
      }
      const std::size_t count = std::min(block_, (n - first_) / 8 * 8);
      const unsigned char* head = in_.at(at_, 4);
      if (!head) return false;
      const std::uint64_t packed = get_be(head, 4);
      if (packed > in_.stored() - at_ - 4) return false;
      if (!out && pos_ == first_ * element_ && bytes >= count * element_) {  // before the part: passed over
        at_ += 4 + std::size_t(packed), first_ += count;
        pos_ += count * element_, bytes -= count * element_;
        continue;
      }
      const unsigned char* data = in_.at(at_ + 4, std::size_t(packed));
      Scratch& s = scratch();
      s.rows.resize(count * element_);
      if (!data || LZ4_decompress_safe(reinterpret_cast<const char*>(data), reinterpret_cast<char*>(s.rows.data()),
                                       int(packed), int(count * element_)) != int(count * element_))
        return false;
      kept_.resize(count * element_);
      rows_to_bits(s.rows.data(), count, element_, kept_.data(), s.planes);
      kept_begin_ = first_ * element_, kept_end_ = (first_ + count) * element_;
      at_ += 4 + std::size_t(packed), first_ += count;
    }
    return true;
  }

 private:
  // The header, as the filter writes it: the chunk's bytes, its blocks'.
  bool check() {
    checked_ = true;
    const unsigned char* head = in_.at(0, 12);
    return head && get_be(head, 8) == plain_ && get_be(head + 8, 4) == block_ * element_ &&
           plain_ <= std::size_t(INT_MAX) && plain_ % element_ == 0;
  }
  StoredBytes in_;
  std::size_t plain_, element_, block_;
  bool checked_ = false, valid_ = false;
  std::size_t at_ = 12, first_ = 0, pos_ = 0;  // the next block's stored offset and first element; the plain offset
  std::vector<unsigned char> kept_;
  std::size_t kept_begin_ = 0, kept_end_ = 0;  // the plain bytes kept_ holds
};

class BitshuffleLz4Codec final : public Codec {
 public:
  H5Z_filter_t id() const override { return 32008; }
  std::string name() const override { return "bitshuffle"; }
  std::string library() const override { return std::string("bitshuffle-lz4 (lz4 ") + LZ4_versionString() + ")"; }
  std::vector<unsigned> values(const CompressionSpec&, std::size_t element, std::size_t, bool registered) const override {
    // The plugin's set_local puts the format's version and the element's
    // bytes first and keeps the user's block size (0: its default) and
    // compression after them; without it, the whole record as it writes it.
    if (registered) return {0, lz4_inside};
    return {0, 3, unsigned(element), 0, lz4_inside};
  }
  bool keeps_size(const std::vector<unsigned>& values) const override {
    return values.size() < 5 || values[4] == 0;
  }
  bool decodes(const std::vector<unsigned>& values) const override {
    return values.size() < 5 || values[4] == 0 || values[4] == lz4_inside;
  }
  std::string record_error(const std::vector<unsigned>& values) const override {
    if (values.size() > 3 && values[3] % 8 != 0)
      return "bitshuffle's block size " + std::to_string(values[3]) + " in the filter's record is not a multiple of 8";
    return "";
  }
  // Per block of the record's size (the filter writes in those) its 4-byte
  // size and LZ4's bound; the 12-byte header.
  std::size_t max_stored(std::size_t plain, const FilterUse& use) const override {
    const std::size_t element = std::max<std::size_t>(element_of(use), 1);
    const std::size_t blocks = plain / (std::max<std::size_t>(block_of(use, element), 8) * element) + 1;
    return 12 + plain + plain / 255 + blocks * 20;
  }
  std::size_t encode(const unsigned char* in, std::size_t bytes, const FilterUse& use,
                     std::vector<unsigned char>& out) const override {
    const std::size_t element = element_of(use), n = bytes / element;
    const std::size_t block = block_of(use, element);
    if (bytes % element != 0 || bytes > std::size_t(INT_MAX) / 2) return 0;  // LZ4 counts in int
    Scratch& s = scratch();
    if (keeps_size(use.values)) {  // transposed blocks, no LZ4
      out.resize(bytes);
      bare_blocks(bits_to_rows, in, n, element, block, out.data(), s.planes);
      return bytes;
    }
    out.resize(12 + (n / block + 1) * (4 + std::size_t(LZ4_compressBound(int(block * element)))) +
               8 * element);
    put_be(out.data(), bytes, 8);
    put_be(out.data() + 8, block * element, 4);
    std::size_t at = 12;
    s.rows.resize(block * element);
    for (std::size_t first = 0; first + 8 <= n;) {
      const std::size_t count = std::min(block, (n - first) / 8 * 8);
      bits_to_rows(in + first * element, count, element, s.rows.data(), s.planes);
      const int packed = LZ4_compress_default(reinterpret_cast<const char*>(s.rows.data()),
                                              reinterpret_cast<char*>(out.data() + at + 4), int(count * element),
                                              int(out.size() - at - 4));
      if (packed <= 0) return 0;
      put_be(out.data() + at, std::uint64_t(packed), 4);
      at += 4 + std::size_t(packed);
      first += count;
      if (at >= bytes) return 0;
    }
    const std::size_t tail = (n % 8) * element;
    std::memcpy(out.data() + at, in + (n - n % 8) * element, tail);
    at += tail;
    return at < bytes ? at : 0;
  }
  bool decode(const unsigned char* in, std::size_t stored, const FilterUse& use, unsigned char* out,
              std::size_t plain) const override {
    const std::size_t element = element_of(use);
    if (element == 0 || plain % element != 0 || !record_error(use.values).empty()) return false;
    const std::size_t n = plain / element;
    Scratch& s = scratch();
    if (keeps_size(use.values)) {  // transposed blocks, no LZ4
      if (stored != plain) return false;
      bare_blocks(rows_to_bits, in, n, element, block_of(use, element), out, s.planes);
      return true;
    }
    if (stored < 12 || get_be(in, 8) != plain) return false;
    const std::uint64_t block_bytes = get_be(in + 8, 4);
    if (block_bytes == 0 || block_bytes % element != 0 || (block_bytes / element) % 8 != 0) return false;
    const std::size_t block = std::size_t(block_bytes / element);
    if (plain > std::size_t(INT_MAX)) return false;  // LZ4 counts in int
    std::size_t at = 12, first = 0;
    s.rows.resize(std::min(block, n) * element);  // the header's block may be larger than the chunk, never held
    for (; first + 8 <= n;) {
      const std::size_t count = std::min(block, (n - first) / 8 * 8);
      if (stored - at < 4) return false;
      const std::uint64_t packed = get_be(in + at, 4);
      at += 4;
      if (packed > stored - at) return false;
      if (LZ4_decompress_safe(reinterpret_cast<const char*>(in + at), reinterpret_cast<char*>(s.rows.data()),
                              int(packed), int(count * element)) != int(count * element))
        return false;
      rows_to_bits(s.rows.data(), count, element, out + first * element, s.planes);
      at += std::size_t(packed);
      first += count;
    }
    const std::size_t tail = (n - first) * element;
    if (stored - at != tail) return false;
    std::memcpy(out + first * element, in + at, tail);
    return true;
  }
  // LZ4 blocks of the record's size (the header must say the same); the
  // form without LZ4 is decoded whole.
  bool streams(const FilterUse& use) const override { return !keeps_size(use.values) && decodes(use.values); }
  std::unique_ptr<ChunkStream> stream(const FilterUse& use, std::size_t stored, std::size_t plain,
                                      ReadStored read) const override {
    const std::size_t element = element_of(use);
    if (element == 0 || !record_error(use.values).empty()) return nullptr;
    return std::make_unique<BitshuffleStream>(std::move(read), stored, plain, element, block_of(use, element));
  }
  // Its input buffer; a block kept, decoded and transposed (three of a block's bytes).
  std::size_t stream_bytes(const FilterUse& use, std::size_t, std::size_t) const override {
    const std::size_t element = std::max<std::size_t>(element_of(use), 1);
    return stream_input + 3 * block_of(use, element) * element;
  }

 private:
  // The element's bytes the record names (the plugin's set_local's), else the type's.
  static std::size_t element_of(const FilterUse& use) {
    return use.values.size() > 2 && use.values[2] > 0 ? use.values[2] : use.element;
  }
  // Elements per block: the record's (a multiple of 8), else bitshuffle's default.
  static std::size_t block_of(const FilterUse& use, std::size_t element) {
    const unsigned b = use.values.size() > 3 ? use.values[3] : 0;  // a multiple of 8 (record_error)
    return b > 0 ? b : default_block_elements(element);
  }
};

}  // namespace

const Codec& bitshuffle_lz4_codec() {
  static const BitshuffleLz4Codec codec;
  return codec;
}

}  // namespace cvest::io
