// The chunk filters cvest codes itself (io/codecs/): every codec round-trips
// chunks of every size, doubles and floats, compressible or not; bitshuffle's
// rows are what its definition says; damaged chunks are refused without
// reading or writing past a buffer. (That the formats are the registered
// filters' own is checked by reading cvest's files with h5py + hdf5plugin and
// h5dump: tests/cli/compressed.py.)
#include "io/codecs/Codec.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace cvest;
using namespace cvest::io;

namespace {

// Each codec with the settings it is used with: (label, filter id, spec).
struct Setting {
  std::string label;
  H5Z_filter_t id;
  CompressionSpec spec;
};

std::vector<Setting> settings() {
  std::vector<Setting> all;
  all.push_back({"shuffle", H5Z_FILTER_SHUFFLE, {}});
  all.push_back({"deflate", H5Z_FILTER_DEFLATE, {Compression::gzip, 4}});
  all.push_back({"lzf", 32000, {Compression::lzf}});
  for (BloscCodec c : {BloscCodec::lz4, BloscCodec::zstd})
    for (ShuffleKind s : {ShuffleKind::byte, ShuffleKind::bit}) {
      CompressionSpec spec{Compression::blosc, 4, c, s, 5};
      all.push_back({to_text(spec), 32001, spec});
    }
  all.push_back({"bitshuffle-lz4", 32008, {Compression::bitshuffle_lz4}});
  return all;
}

// `n` elements of `element` bytes: smooth (discount factors falling with
// the date, as users' do: compressible) or random bits (not).
std::vector<unsigned char> values(std::size_t n, std::size_t element, bool smooth, unsigned seed) {
  std::vector<unsigned char> bytes(n * element);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = smooth ? std::exp(-0.03 * double(i % 97) / 365.0 * double(1 + i / 97)) : 0.0;
    if (element == 8) {
      double x = smooth ? v : 0;
      std::uint64_t bits = rng();
      if (smooth) std::memcpy(&bits, &x, 8);
      std::memcpy(&bytes[i * 8], &bits, 8);
    } else {
      float x = float(v);
      std::uint32_t bits = std::uint32_t(rng());
      if (smooth) std::memcpy(&bits, &x, 4);
      std::memcpy(&bytes[i * 4], &bits, 4);
    }
  }
  return bytes;
}

FilterUse use_of(const Setting& s, std::size_t element, std::size_t bytes) {
  const Codec* codec = codec_for(s.id);
  return {codec->values(s.spec, element, bytes, false), element};
}

// What a Blosc chunk's own 16-byte header says (c-blosc's README_HEADER.rst):
// its flags byte holds the shuffle (bit 0: byte, bit 2: bit; bit 1: stored
// plain) and, in bits 5-7, the compressor's format (1: lz4, 4: zstd); then
// the element's bytes, the plain bytes and the stored bytes. Read here
// byte by byte, not by c-blosc, which a decode would trust.
struct BloscHeader {
  unsigned format, flags, element;
  std::uint32_t plain, stored;
};
BloscHeader blosc_header(const std::vector<unsigned char>& chunk) {
  REQUIRE(chunk.size() >= 16);
  const auto u32 = [&](std::size_t at) {
    return std::uint32_t(chunk[at]) | std::uint32_t(chunk[at + 1]) << 8 | std::uint32_t(chunk[at + 2]) << 16 |
           std::uint32_t(chunk[at + 3]) << 24;
  };
  return {unsigned(chunk[2]) >> 5, unsigned(chunk[2]) & 0x7u, chunk[3], u32(4), u32(12)};
}

}  // namespace

TEST_CASE("every codec gives back every chunk it coded, of any size, in double and float", "[io][codecs]") {
  for (const Setting& s : settings()) {
    const Codec* codec = codec_for(s.id);
    REQUIRE(codec);
    for (std::size_t element : {std::size_t(8), std::size_t(4)})
      for (std::size_t n : {1, 7, 8, 9, 127, 1023, 1024, 1025, 2048, 3001, 70001})
        for (bool smooth : {true, false}) {
          INFO(s.label << ", " << element << "-byte elements, " << n << " of them, " << (smooth ? "smooth" : "random"));
          const auto plain = values(n, element, smooth, unsigned(n));
          const FilterUse use = use_of(s, element, plain.size());
          std::vector<unsigned char> stored;
          const std::size_t put = codec->encode(plain.data(), plain.size(), use, stored);
          if (codec->keeps_size(use.values)) CHECK(put == plain.size());
          else CHECK(put < plain.size());  // 0: no fewer bytes, stored without it
          if (smooth && n >= 2048 && !codec->keeps_size(use.values)) CHECK(put > 0);  // it does compress these
          if (put == 0) continue;
          CHECK(put <= codec->max_stored(plain.size(), use));  // what a chunk record may claim
          std::vector<unsigned char> back(plain.size() + 64, 0xA5);  // bytes past the chunk stay untouched
          REQUIRE(codec->decode(stored.data(), put, use, back.data(), plain.size()));
          CHECK(std::memcmp(back.data(), plain.data(), plain.size()) == 0);
          CHECK(std::count(back.begin() + std::ptrdiff_t(plain.size()), back.end(), 0xA5) == 64);
        }
  }
}

// The round trip decodes by the chunk's own header, so a codec that ignored
// the record's compressor, shuffle or level would still pass it: each is
// read from the chunks themselves.
TEST_CASE("Blosc's chunks are coded with the record's compressor, shuffle and level", "[io][codecs]") {
  const std::size_t element = 8;
  const auto plain = values(70001, element, true, 5);
  for (BloscCodec c : {BloscCodec::lz4, BloscCodec::zstd})
    for (ShuffleKind s : {ShuffleKind::byte, ShuffleKind::bit}) {
      std::vector<std::size_t> sizes;  // at levels 1, 5 and 9
      for (int level : {1, 5, 9}) {
        const CompressionSpec spec{Compression::blosc, 4, c, s, level};
        INFO(to_text(spec));
        const FilterUse use = use_of({to_text(spec), 32001, spec}, element, plain.size());
        std::vector<unsigned char> stored;
        const std::size_t put = codec_for(32001)->encode(plain.data(), plain.size(), use, stored);
        REQUIRE(put > 0);
        stored.resize(put);
        const BloscHeader h = blosc_header(stored);
        CHECK(h.format == (c == BloscCodec::zstd ? 4u : 1u));
        CHECK(h.flags == (s == ShuffleKind::bit ? 0x4u : 0x1u));  // that shuffle alone, not stored plain
        CHECK(h.element == element);
        CHECK(h.plain == plain.size());
        CHECK(h.stored == put);
        sizes.push_back(put);
      }
      // Each level codes these to a size of its own (c-blosc 1.21: every
      // level of 1-9 does, each setting): a level ignored gives one size.
      INFO(to_text({Compression::blosc, 4, c, s, 5}) << ": " << sizes[0] << ", " << sizes[1] << ", " << sizes[2]
                                                      << " bytes at levels 1, 5, 9");
      CHECK((sizes[0] != sizes[1] && sizes[1] != sizes[2] && sizes[0] != sizes[2]));
    }
}

TEST_CASE("bitshuffle's rows hold bit k of byte j of every element, 8 elements a byte", "[io][codecs]") {
  const Codec* codec = codec_for(32008);
  for (std::size_t element : {std::size_t(8), std::size_t(4)}) {
    const std::size_t block = 8192 / element, n = 2 * block + 24 + 5;  // two blocks, a short one, 5 left over
    const auto plain = values(n, element, false, 7);
    // The definition, bit by bit, block by block; the last n % 8 copied.
    std::vector<unsigned char> rows(plain.size(), 0);
    for (std::size_t first = 0; first + 8 <= n;) {
      const std::size_t count = std::min(block, (n - first) / 8 * 8), row = count / 8;
      for (std::size_t i = 0; i < count; ++i)
        for (std::size_t j = 0; j < element; ++j)
          for (std::size_t k = 0; k < 8; ++k)
            if (plain[(first + i) * element + j] >> k & 1)
              rows[first * element + (8 * j + k) * row + i / 8] |= static_cast<unsigned char>(1u << (i % 8));
      first += count;
    }
    std::memcpy(&rows[(n - n % 8) * element], &plain[(n - n % 8) * element], (n % 8) * element);
    // Without LZ4 (the record's fifth value 0) a chunk is those rows.
    const FilterUse bare{{0, 3, unsigned(element), 0, 0}, element};
    REQUIRE(codec->keeps_size(bare.values));
    std::vector<unsigned char> back(plain.size());
    REQUIRE(codec->decode(rows.data(), rows.size(), bare, back.data(), back.size()));
    CHECK(back == plain);
    std::vector<unsigned char> mine;
    REQUIRE(codec->encode(plain.data(), plain.size(), bare, mine) == plain.size());
    CHECK(mine == rows);
  }
}

TEST_CASE("a damaged chunk is refused, never read or written past its buffers", "[io][codecs]") {
  for (const Setting& s : settings()) {
    const Codec* codec = codec_for(s.id);
    const std::size_t element = 8, n = 5000;
    const auto plain = values(n, element, true, 3);
    const FilterUse use = use_of(s, element, plain.size());
    if (codec->keeps_size(use.values)) continue;
    std::vector<unsigned char> stored;
    const std::size_t put = codec->encode(plain.data(), plain.size(), use, stored);
    REQUIRE(put > 0);
    stored.resize(put);
    std::vector<unsigned char> back(plain.size());
    INFO(s.label);
    // Cut short anywhere: refused (what a read of the file's bytes gives
    // where a chunk's record is larger than what was written).
    for (std::size_t keep : {std::size_t(0), std::size_t(1), std::size_t(11), std::size_t(16), put / 2, put - 1}) {
      std::vector<unsigned char> cut(stored.begin(), stored.begin() + std::ptrdiff_t(keep));
      CHECK_FALSE(codec->decode(cut.data(), cut.size(), use, back.data(), back.size()));
    }
    // A chunk of another size than the dataset's: refused.
    std::vector<unsigned char> larger(plain.size() + element);
    CHECK_FALSE(codec->decode(stored.data(), put, use, larger.data(), larger.size()));
    // Bytes flipped anywhere: refused or decoded to some chunk's bytes, never
    // a crash or a write past the buffer (the sanitizer build checks that).
    std::mt19937 rng(11);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<unsigned char> bad = stored;
      bad[rng() % bad.size()] ^= static_cast<unsigned char>(1 + rng() % 255);
      std::vector<unsigned char> out(plain.size() + 64, 0xA5);
      (void)codec->decode(bad.data(), bad.size(), use, out.data(), plain.size());
      CHECK(std::count(out.begin() + std::ptrdiff_t(plain.size()), out.end(), 0xA5) == 64);
    }
  }
}

TEST_CASE("shuffle as HDF5's: bytes past the last whole element, and one-element chunks, left as they are", "[io][codecs]") {
  const Codec* shuffle = codec_for(H5Z_FILTER_SHUFFLE);
  const std::vector<unsigned char> in{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  std::vector<unsigned char> out;
  REQUIRE(shuffle->encode(in.data(), in.size(), {{4}, 4}, out) == in.size());
  CHECK(out == std::vector<unsigned char>{1, 5, 2, 6, 3, 7, 4, 8, 9, 10, 11});
  std::vector<unsigned char> back(in.size(), 0);
  REQUIRE(shuffle->decode(out.data(), out.size(), {{4}, 4}, back.data(), back.size()));
  CHECK(back == in);
  // A record naming elements larger than the chunk (damaged, or a tiny
  // chunk): every byte as it is, none left unwritten.
  std::vector<unsigned char> same(in.size(), 0);
  REQUIRE(shuffle->decode(in.data(), in.size(), {{16}, 8}, same.data(), same.size()));
  CHECK(same == in);
}

TEST_CASE("the output's filters: each compression's pipeline, and what cvest info lists", "[io][codecs]") {
  CHECK(pipeline_for({Compression::none}).empty());
  const auto gzip = pipeline_for({Compression::gzip});
  REQUIRE(gzip.size() == 2);
  CHECK(gzip[0]->id() == H5Z_FILTER_SHUFFLE);
  CHECK(gzip[1]->id() == H5Z_FILTER_DEFLATE);
  CHECK(pipeline_for({Compression::blosc}).at(0)->id() == 32001);
  CHECK(pipeline_for({Compression::bitshuffle_lz4}).at(0)->id() == 32008);
  CHECK(codec_for(32004) == nullptr);  // HDF5's lz4 plugin: not cvest's
  // Blosc's record as hdf5-blosc's set_local writes it: revision, format,
  // element, chunk bytes, level, shuffle (2: bit), compressor (5: zstd).
  const CompressionSpec zstd{Compression::blosc, 4, BloscCodec::zstd, ShuffleKind::bit, 7};
  CHECK(codec_for(32001)->values(zstd, 4, 4000, false) == std::vector<unsigned>{2, 2, 4, 4000, 7, 2, 5});
  CHECK(codec_for(32008)->values({}, 8, 4000, false) == std::vector<unsigned>{0, 3, 8, 0, 2});
  CHECK(codec_for(32008)->values({}, 8, 4000, true) == std::vector<unsigned>{0, 2});  // the plugin's set_local adds the rest
  const std::string text = codecs_text();
  for (const char* name : {"shuffle", "deflate (libdeflate ", "lzf (liblzf ", "blosc (c-blosc ", "bitshuffle-lz4 (lz4 "})
    CHECK_THAT(text, Catch::Contains(name));
  CHECK(to_text(zstd) == "blosc (zstd, bit shuffle, level 7)");
}

TEST_CASE("a chunk record's bound: every chunk a filter stores, and not the whole file", "[io][codecs]") {
  // What a record may claim before anything is allocated for it: at least
  // the plain bytes (a filter that cannot shrink a chunk is skipped), and a
  // bound near them, not the file's size.
  for (const Setting& s : settings())
    for (std::size_t plain : {std::size_t(8), std::size_t(40000), std::size_t(400) << 20}) {
      INFO(s.label << ", " << plain << " plain bytes");
      const Codec* codec = codec_for(s.id);
      const FilterUse use = use_of(s, 8, plain);
      CHECK(codec->max_stored(plain, use) >= plain);
      CHECK(double(codec->max_stored(plain, use)) <= 1.05 * double(plain) + 8192);
    }
  // bitshuffle's own plugin refuses blocks that are not a multiple of 8; so
  // does cvest, where it once read them as the default
  CHECK(codec_for(32008)->record_error({0, 3, 8, 12, 2}) == "bitshuffle's block size 12 in the filter's record is not a multiple of 8");
  CHECK(codec_for(32008)->record_error({0, 3, 8, 16, 2}).empty());
  CHECK(codec_for(32008)->record_error({0, 3, 8, 0, 2}).empty());  // 0: the default
}
