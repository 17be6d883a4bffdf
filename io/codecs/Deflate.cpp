// HDF5's deflate filter (id 1, "gzip"): a zlib stream per chunk, written and
// read by libdeflate (whole buffers, as chunks are, at about twice zlib's
// speed for the same ratio).
#include "io/codecs/Codecs.hpp"

#include <H5Zpublic.h>
#include <libdeflate.h>

#include <new>

namespace cvest::io {

namespace {

// One compressor per thread and level, kept for the thread's life.
libdeflate_compressor* thread_compressor(int level) {
  struct Compressor {
    int level = -1;
    libdeflate_compressor* c = nullptr;
    ~Compressor() { libdeflate_free_compressor(c); }
  };
  thread_local Compressor mine;
  if (mine.level != level) {
    libdeflate_free_compressor(mine.c);
    mine.c = libdeflate_alloc_compressor(level);
    mine.level = mine.c ? level : -1;
  }
  if (!mine.c) throw std::bad_alloc();
  return mine.c;
}

libdeflate_decompressor* thread_decompressor() {
  struct Decompressor {
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    ~Decompressor() { libdeflate_free_decompressor(d); }
  };
  thread_local Decompressor mine;
  if (!mine.d) throw std::bad_alloc();
  return mine.d;
}

class DeflateCodec final : public Codec {
 public:
  H5Z_filter_t id() const override { return H5Z_FILTER_DEFLATE; }
  std::string name() const override { return "deflate"; }
  std::string library() const override { return std::string("deflate (libdeflate ") + LIBDEFLATE_VERSION_STRING + ")"; }
  std::vector<unsigned> values(const CompressionSpec& spec, std::size_t, std::size_t, bool) const override {
    return {unsigned(spec.gzip_level)};
  }
  bool keeps_size(const std::vector<unsigned>&) const override { return false; }
  // Stored blocks: 5 bytes per 64 KiB at worst, the zlib wrapper's 6 bytes.
  std::size_t max_stored(std::size_t plain, const FilterUse&) const override { return plain + plain / 1024 + 4096; }
  std::size_t encode(const unsigned char* in, std::size_t bytes, const FilterUse& use,
                     std::vector<unsigned char>& out) const override {
    const int level = !use.values.empty() ? int(use.values[0]) : 4;
    libdeflate_compressor* c = thread_compressor(level);
    out.resize(libdeflate_zlib_compress_bound(c, bytes));
    const std::size_t stored = libdeflate_zlib_compress(c, in, bytes, out.data(), out.size());
    return stored < bytes ? stored : 0;
  }
  bool decode(const unsigned char* in, std::size_t stored, const FilterUse&, unsigned char* out,
              std::size_t plain) const override {
    std::size_t got = 0;
    return libdeflate_zlib_decompress(thread_decompressor(), in, stored, out, plain, &got) == LIBDEFLATE_SUCCESS &&
           got == plain;
  }
};

}  // namespace

const Codec& deflate_codec() {
  static const DeflateCodec codec;
  return codec;
}

}  // namespace cvest::io
