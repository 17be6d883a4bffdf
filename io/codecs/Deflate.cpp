// HDF5's deflate filter (id 1, "gzip"): a zlib stream per chunk, written and
// read by libdeflate (whole buffers, as chunks are, at about twice zlib's
// speed for the same ratio); a chunk too large to hold decoded is inflated
// by zlib a part at a time (libdeflate has no streaming).
#include "io/codecs/Codecs.hpp"

#include <H5Zpublic.h>
#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
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

constexpr std::size_t inflate_input = std::size_t(1) << 20;  // stored bytes read at a time
constexpr std::size_t skip_bytes = std::size_t(64) << 10;      // where bytes before a part are inflated

// A chunk's zlib stream inflated in order, a part at a time.
class InflateStream final : public ChunkStream {
 public:
  InflateStream(ReadStored read, std::size_t stored, std::size_t plain)
      : in_(std::move(read), stored, inflate_input), plain_(plain) {
    start();
  }
  ~InflateStream() override { inflateEnd(&z_); }

 protected:
  std::size_t position() const override { return produced_; }
  void rewind() override {
    inflateEnd(&z_);
    start();
  }
  bool next(std::size_t bytes, unsigned char* out) override {
    if (!ok_) return false;
    std::vector<unsigned char> skip(out ? 0 : std::min(bytes, skip_bytes));
    while (bytes > 0) {
      const std::size_t n = std::min(bytes, out ? std::size_t(1) << 30 : skip.size());
      z_.next_out = out ? out : skip.data();
      z_.avail_out = uInt(n);
      while (z_.avail_out > 0) {
        if (z_.avail_in == 0 && !refill()) return ok_ = false;  // the stream ends before the chunk does
        const int r = inflate(&z_, Z_NO_FLUSH);
        if (r == Z_STREAM_END && z_.avail_out > 0) return ok_ = false;
        if (r != Z_OK && r != Z_STREAM_END) return ok_ = false;
        if (r == Z_STREAM_END) ended_ = true;
        if (r == Z_STREAM_END) break;
      }
      produced_ += n;
      bytes -= n;
      if (out) out += n;
    }
    // The chunk's last byte: the stream must end there, its Adler-32 checked
    // (as libdeflate checks a whole chunk's).
    return produced_ < plain_ || ended_ || (ok_ = finish());
  }

 private:
  void start() {
    z_ = z_stream{};
    ok_ = inflateInit(&z_) == Z_OK;
    if (!ok_) throw std::bad_alloc();
    consumed_ = produced_ = 0;
    ended_ = false;
  }
  // The next stored bytes for zlib; false where none are left.
  bool refill() {
    const std::size_t take = std::min(inflate_input, in_.stored() - consumed_);
    const unsigned char* p = take > 0 ? in_.at(consumed_, take) : nullptr;
    if (!p) return false;
    z_.next_in = const_cast<Bytef*>(p);
    z_.avail_in = uInt(take);
    consumed_ += take;
    return true;
  }
  // Past the chunk's last byte: nothing more, then the stream's end.
  bool finish() {
    unsigned char extra = 0;
    for (;;) {
      z_.next_out = &extra;
      z_.avail_out = 1;
      if (z_.avail_in == 0 && !refill()) return false;
      const int r = inflate(&z_, Z_NO_FLUSH);
      if (z_.avail_out == 0 || (r != Z_OK && r != Z_STREAM_END)) return false;  // more bytes than the chunk's
      if (r == Z_STREAM_END) return ended_ = true;
    }
  }
  StoredBytes in_;
  std::size_t plain_;
  z_stream z_{};
  bool ok_ = false, ended_ = false;
  std::size_t consumed_ = 0, produced_ = 0;
};

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
  bool streams(const FilterUse&) const override { return true; }
  std::unique_ptr<ChunkStream> stream(const FilterUse&, std::size_t stored, std::size_t plain,
                                      ReadStored read) const override {
    return std::make_unique<InflateStream>(std::move(read), stored, plain);
  }
  // Its input buffer, zlib's state and window (about 40 KiB), the skip buffer.
  std::size_t stream_bytes(const FilterUse&, std::size_t, std::size_t) const override {
    return inflate_input + (128 << 10);
  }
};

}  // namespace

const Codec& deflate_codec() {
  static const DeflateCodec codec;
  return codec;
}

}  // namespace cvest::io
