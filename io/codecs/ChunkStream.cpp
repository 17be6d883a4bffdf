#include "io/codecs/ChunkStream.hpp"

#include <algorithm>
#include <cstring>

namespace cvest::io {

StoredBytes::StoredBytes(ReadStored read, std::size_t stored, std::size_t buffer)
    : read_(std::move(read)), stored_(stored), buffer_(buffer) {}

const unsigned char* StoredBytes::at(std::size_t offset, std::size_t bytes) {
  if (offset > stored_ || bytes > stored_ - offset) return nullptr;
  if (offset >= begin_ && offset + bytes <= begin_ + data_.size()) return data_.data() + (offset - begin_);
  // The next buffer starts at `offset`, what this one holds from there on
  // kept (each byte read once); a piece bigger than the buffer (a compressed
  // block larger than it) is read whole.
  const std::size_t size = std::min(std::max(buffer_, bytes), stored_ - offset);
  std::size_t kept = 0;
  if (offset >= begin_ && offset < begin_ + data_.size()) {
    kept = begin_ + data_.size() - offset;
    std::memmove(data_.data(), data_.data() + (offset - begin_), kept);
  }
  data_.resize(size);
  read_(offset + kept, size - kept, data_.data() + kept);
  begin_ = offset;
  return data_.data();
}

bool ChunkStream::part(std::size_t from, std::size_t bytes, unsigned char* out) {
  if (random_access()) return at(from, bytes, out);
  if (from < position()) {
    rewind();
    ++restarts_;
  }
  if (from > position() && !next(from - position(), nullptr)) return false;
  return next(bytes, out);
}

namespace {

class PlainStream final : public RandomAccessStream {
 public:
  PlainStream(ReadStored read, std::size_t stored) : read_(std::move(read)), stored_(stored) {}

 protected:
  bool at(std::size_t from, std::size_t bytes, unsigned char* out) override {
    if (from > stored_ || bytes > stored_ - from) return false;
    read_(from, bytes, out);
    return true;
  }

 private:
  ReadStored read_;
  std::size_t stored_;
};

}  // namespace

std::unique_ptr<ChunkStream> plain_stream(ReadStored read, std::size_t stored) {
  return std::make_unique<PlainStream>(std::move(read), stored);
}

}  // namespace cvest::io
