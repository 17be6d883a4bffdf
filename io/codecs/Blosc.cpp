// Blosc (HDF5 filter 32001, hdf5-blosc's and hdf5plugin's): each chunk one
// Blosc frame (a 16-byte header, then blocks shuffled by byte or bit and
// compressed by lz4 or zstd inside), made and read by c-blosc's
// context-based calls, one thread each (cvest's threads are the parallelism).
#include "io/codecs/Codecs.hpp"

#include <blosc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cvest::io {

namespace {

// The record hdf5-blosc's set_local writes: its filter revision, Blosc's
// format version, the element's bytes, the chunk's bytes; then the user's
// level, shuffle (0 none, 1 byte, 2 bit) and compressor code.
constexpr unsigned blosc_filter_revision = 2;

std::uint32_t le32(const unsigned char* p) { return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24; }

// A chunk's parts decoded by Blosc's own blocks: the header and the blocks'
// starts read once; each part's blocks read into a mapping the size of the
// frame that holds nothing else (untouched pages take no memory), and
// c-blosc's getitem decodes the part from them. What a part read is let go
// with the mapping.
class BloscStream final : public RandomAccessStream {
 public:
  BloscStream(ReadStored read, std::size_t stored, std::size_t plain)
      : read_(std::move(read)), stored_(stored), plain_(plain) {}

 protected:
  bool at(std::size_t from, std::size_t bytes, unsigned char* out) override {
    if (!loaded_) ok_ = load();
    if (!ok_) return false;
    if (bytes == 0) return true;
    if (from > plain_ || bytes > plain_ - from || from % typesize_ != 0 || bytes % typesize_ != 0) return false;
    if (memcpyed_) {  // stored as it is after the header
      read_(BLOSC_MAX_OVERHEAD + from, bytes, out);
      return true;
    }
    void* map = ::mmap(nullptr, cbytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) throw std::bad_alloc();
    auto* frame = static_cast<unsigned char*>(map);
    std::memcpy(frame, head_.data(), head_.size());
    for (std::size_t j = from / blocksize_; j <= (from + bytes - 1) / blocksize_; ++j)
      read_(starts_[j], ends_[j] - starts_[j], frame + starts_[j]);
    const int got = blosc_getitem(frame, int(from / typesize_), int(bytes / typesize_), out);
    ::munmap(map, cbytes_);
    return got == int(bytes);
  }

 private:
  // The header and the blocks' starts (once), checked against the frame; each
  // block's end: the next start above its own, else the frame's end (c-blosc
  // may store blocks out of order).
  bool load() {
    loaded_ = true;
    if (stored_ < BLOSC_MIN_HEADER_LENGTH) return false;
    head_.resize(BLOSC_MIN_HEADER_LENGTH);
    read_(0, head_.size(), head_.data());
    std::size_t nbytes = 0, cbytes = 0, block = 0;
    blosc_cbuffer_sizes(head_.data(), &nbytes, &cbytes, &block);
    typesize_ = std::max<std::size_t>(head_[3], 1);
    memcpyed_ = (head_[2] & BLOSC_MEMCPYED) != 0;
    // Blocks of 16 MiB at most: each part decodes its blocks whole, beside
    // c-blosc's scratch of three (hdf5plugin's frames have 1 MiB blocks).
    if (nbytes != plain_ || cbytes > stored_ || block == 0 || block > (std::size_t(16) << 20) ||
        plain_ > std::size_t(INT32_MAX))
      return false;
    cbytes_ = cbytes;
    blocksize_ = block;
    if (memcpyed_) return cbytes == plain_ + BLOSC_MAX_OVERHEAD;
    const std::size_t blocks = (plain_ + block - 1) / block;
    // The filter's own frames have blocks of kilobytes at least; more starts
    // than that is not one (and would be held for nothing).
    if (blocks * 4 > plain_ / 256 + 4096 || BLOSC_MAX_OVERHEAD + blocks * 4 > cbytes) return false;
    head_.resize(BLOSC_MAX_OVERHEAD + blocks * 4);
    read_(BLOSC_MAX_OVERHEAD, blocks * 4, head_.data() + BLOSC_MAX_OVERHEAD);
    starts_.resize(blocks);
    for (std::size_t j = 0; j < blocks; ++j) {
      starts_[j] = le32(head_.data() + BLOSC_MAX_OVERHEAD + 4 * j);
      if (starts_[j] < head_.size() || starts_[j] >= cbytes) return false;
    }
    std::vector<std::size_t> sorted = starts_;
    std::sort(sorted.begin(), sorted.end());
    ends_.resize(blocks);
    for (std::size_t j = 0; j < blocks; ++j) {
      const auto above = std::upper_bound(sorted.begin(), sorted.end(), starts_[j]);
      ends_[j] = above == sorted.end() ? cbytes : *above;
    }
    return true;
  }

  ReadStored read_;
  std::size_t stored_, plain_;
  bool loaded_ = false, ok_ = false, memcpyed_ = false;
  std::size_t cbytes_ = 0, blocksize_ = 0, typesize_ = 1;
  std::vector<unsigned char> head_;
  std::vector<std::size_t> starts_, ends_;
};

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
  bool streams(const FilterUse&) const override { return true; }
  std::unique_ptr<ChunkStream> stream(const FilterUse&, std::size_t stored, std::size_t plain,
                                      ReadStored read) const override {
    return std::make_unique<BloscStream>(std::move(read), stored, plain);
  }
  // A part's stored blocks (at most its bytes and Blosc's overhead), the
  // blocks' starts, c-blosc's scratch of three blocks (hdf5plugin's and
  // hdf5-blosc's frames of large chunks have blocks of 1 MiB).
  std::size_t stream_bytes(const FilterUse&, std::size_t part, std::size_t plain) const override {
    return part + part / 64 + plain / 256 + (4 << 20);
  }
};

}  // namespace

const Codec& blosc_codec() {
  static const BloscCodecImpl codec;
  return codec;
}

}  // namespace cvest::io
