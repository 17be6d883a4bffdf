// Chunks decoded in parts (io/codecs/ChunkStream.hpp): every part of a
// deflate, Blosc, bitshuffle-LZ4 or unfiltered chunk comes out as the whole
// decode has it, in order and out of it; in order each stored byte is read
// once and no read holds the chunk; an earlier part starts the stream again
// and says so; damaged chunks are refused, never read past (deflate's
// Adler-32 checked at the last part).
#include "io/codecs/Codec.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace cvest;
using namespace cvest::io;

namespace {

struct Streamed {
  std::string label;
  const Codec* codec;  // nullptr: unfiltered
  FilterUse use;
};

std::vector<Streamed> streamed(std::size_t element) {
  std::vector<Streamed> all;
  all.push_back({"unfiltered", nullptr, {{}, element}});
  const Codec* deflate = codec_for(H5Z_FILTER_DEFLATE);
  all.push_back({"deflate", deflate, {deflate->values({Compression::gzip, 1}, element, 0, false), element}});
  const Codec* blosc = codec_for(32001);
  for (ShuffleKind s : {ShuffleKind::byte, ShuffleKind::bit}) {
    const CompressionSpec spec{Compression::blosc, 4, BloscCodec::lz4, s, 5};
    all.push_back({"blosc " + to_text(spec), blosc, {blosc->values(spec, element, 0, false), element}});
  }
  const Codec* bitshuffle = codec_for(32008);
  all.push_back({"bitshuffle", bitshuffle, {bitshuffle->values({Compression::bitshuffle_lz4}, element, 0, false),
                                           element}});
  return all;
}

// Discount-like doubles: compressible some, never constant.
std::vector<unsigned char> chunk_values(std::size_t n) {
  std::mt19937_64 rng(59);
  std::uniform_real_distribution<double> rate(0.01, 0.08);
  std::vector<double> v(n);
  for (std::size_t j = 0; j < n; ++j) v[j] = std::exp(-rate(rng) * double(1 + j % 7) / 12);
  std::vector<unsigned char> bytes(n * sizeof(double));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// What a stream read of the stored bytes: in all, and the largest read.
struct Reads {
  std::size_t total = 0, largest = 0;
};

std::unique_ptr<ChunkStream> open(const Streamed& s, const std::vector<unsigned char>& stored, std::size_t plain,
                                  Reads& reads) {
  ReadStored read = [&stored, &reads](std::size_t offset, std::size_t bytes, unsigned char* into) {
    REQUIRE(offset + bytes <= stored.size());  // never past the chunk
    std::memcpy(into, stored.data() + offset, bytes);
    reads.total += bytes;
    reads.largest = std::max(reads.largest, bytes);
  };
  if (!s.codec) return plain_stream(read, stored.size());
  return s.codec->stream(s.use, stored.size(), plain, read);
}

}  // namespace

TEST_CASE("chunks decode in parts as they decode whole, reading each stored byte once", "[unit][codecs]") {
  const std::size_t n = 3'000'000 + 5;  // 24 MB of doubles, not a multiple of any block
  const std::vector<unsigned char> plain = chunk_values(n);
  for (const Streamed& s : streamed(sizeof(double))) {
    SECTION(s.label) {
      std::vector<unsigned char> stored = plain;
      if (s.codec) {
        REQUIRE(s.codec->streams(s.use));
        REQUIRE(s.codec->encode(plain.data(), plain.size(), s.use, stored) > 0);
        stored.resize(s.codec->encode(plain.data(), plain.size(), s.use, stored));
      }
      // Parts of 999,999 elements (the last shorter), in order.
      Reads reads;
      auto stream = open(s, stored, plain.size(), reads);
      REQUIRE(stream);
      const std::size_t part = 999'999 * sizeof(double);
      std::vector<unsigned char> got(plain.size(), 0);
      for (std::size_t from = 0; from < plain.size(); from += part)
        REQUIRE(stream->part(from, std::min(part, plain.size() - from), got.data() + from));
      CHECK(got == plain);
      CHECK(stream->restarts() == 0);
      // Each stored byte once (Blosc: a block two parts share, twice; its
      // blocks are 1 MiB at most here), and no read of the whole chunk.
      const std::size_t shared_blocks = s.label.rfind("blosc", 0) == 0 ? 4 * (std::size_t(2) << 20) : 0;
      CHECK(reads.total <= stored.size() + shared_blocks);
      CHECK(reads.total >= stored.size() * 9 / 10);
      if (s.codec) CHECK(reads.largest <= (std::size_t(4) << 20));
      else CHECK(reads.largest <= part);
      // A part before the last: right, and a restart where the stream is one.
      std::vector<unsigned char> again(part);
      REQUIRE(stream->part(part, part, again.data()));
      CHECK(std::equal(again.begin(), again.end(), plain.begin() + std::ptrdiff_t(part)));
      const bool in_order_only = s.label == "deflate" || s.label == "bitshuffle";
      CHECK(stream->restarts() == (in_order_only ? 1 : 0));
      // A part that skips ahead: the stream passes over what lies before it.
      auto fresh = open(s, stored, plain.size(), reads);
      const std::size_t from = plain.size() - part;
      REQUIRE(fresh->part(from, part, again.data()));
      CHECK(std::equal(again.begin(), again.end(), plain.begin() + std::ptrdiff_t(from)));
    }
  }
}

TEST_CASE("damaged chunks decoded in parts are refused, never read past", "[unit][codecs]") {
  const std::size_t n = 400'000;
  const std::vector<unsigned char> plain = chunk_values(n);
  for (const Streamed& s : streamed(sizeof(double))) {
    if (!s.codec) continue;
    SECTION(s.label) {
      std::vector<unsigned char> stored;
      stored.resize(s.codec->encode(plain.data(), plain.size(), s.use, stored));
      REQUIRE(!stored.empty());
      std::vector<unsigned char> out(plain.size());
      Reads reads;
      // Cut short: the last part cannot be decoded.
      std::vector<unsigned char> cut(stored.begin(), stored.begin() + std::ptrdiff_t(stored.size() / 2));
      auto stream = open(s, cut, plain.size(), reads);
      bool all = true;
      for (std::size_t from = 0; from < plain.size() && all; from += 80'000)
        all = stream->part(from, std::min<std::size_t>(80'000, plain.size() - from), out.data() + from);
      CHECK_FALSE(all);
      // A header that claims another chunk size.
      std::vector<unsigned char> other = stored;
      if (s.label == "bitshuffle") other[7] ^= 0x08;             // the plain bytes (big-endian, 8)
      else if (s.label == "deflate") other[0] = 0x00;            // not a zlib header
      else other[4] ^= 0x08;                                     // Blosc's nbytes (little-endian, 4)
      auto wrong = open(s, other, plain.size(), reads);
      CHECK_FALSE(wrong->part(0, 8'000, out.data()));
      if (s.label == "deflate") {
        // Its Adler-32 (the stream's last four bytes) damaged: every part but
        // the last decodes, the last is refused as a whole decode is.
        std::vector<unsigned char> sum = stored;
        sum.back() ^= 0x01;
        auto summed = open(s, sum, plain.size(), reads);
        const std::size_t last = plain.size() - 80'000;
        CHECK(summed->part(0, last, out.data()));
        CHECK_FALSE(summed->part(last, 80'000, out.data() + last));
      }
    }
  }
}
