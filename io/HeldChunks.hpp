#pragma once
// Decoded chunks held while the blocks that slice them run. A chunk larger
// than a block (h5py's one date a chunk: 400 MB at 10,000,000 ids) is read
// and decoded once, by the first thread that needs it, into a buffer every
// thread copies its pieces from; it is let go when the pieces the pass
// expects of it have all been copied. At most `capacity` are held at once;
// a thread that needs one more waits for one to be let go, and when none is
// in `patience` (a pass cut short: a failure, a verification that stopped
// at the first difference) drops one no thread is copying from, to be
// decoded again if needed (the caller counts its decodes).
#include "core/Names.hpp"

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace cvest::io {

class HeldChunks {
 public:
  using Key = std::array<Index, 3>;  // the origin (dates, ids, columns) of what is held: a cell of chunks
  explicit HeldChunks(std::size_t capacity, std::chrono::milliseconds patience = std::chrono::seconds(2));
  HeldChunks(const HeldChunks&) = delete;
  HeldChunks& operator=(const HeldChunks&) = delete;

  // A new pass: what is held and not being copied from is dropped, and
  // `elements` says how many elements the pass copies out of each chunk (a
  // chunk it does not name: all of `whole(key)`).
  void begin_pass(std::map<Key, std::uint64_t> elements);
  // Copies `elements` of the chunk at `key` with `use(data)`: the chunk is
  // decoded first (`decode(key, into)`, `bytes` of it) unless held. `whole`:
  // the elements of the chunk in the dataset (where the pass named none).
  // Then, where there is room, the next chunk the pass names is decoded
  // ahead by this thread, while the others copy from this one.
  using Decode = std::function<void(const Key& key, unsigned char* into)>;
  void use(const Key& key, std::size_t bytes, std::uint64_t elements, std::uint64_t whole, const Decode& decode,
           const std::function<void(const unsigned char* data)>& use);

  std::size_t size() const;  // chunks held (or being decoded) now

 private:
  struct Entry {
    std::unique_ptr<unsigned char[]> data;
    enum class State { decoding, ready } state = State::decoding;
    int pins = 0;                    // threads copying from it (or decoding it)
    std::int64_t unnamed_left = 0;   // elements still to copy, where the pass names none
    std::uint64_t last_use = 0;
  };
  // The least recently used chunk no thread holds, dropped; false where none.
  bool drop_stale();
  // A chunk the pass does not name and no thread copies from, dropped.
  void drop_unnamed();
  // `key` added and decoded by this thread (`lock` released meanwhile),
  // pinned for its copy; on a failure it is marked so and the error thrown.
  std::map<Key, Entry>::iterator decode_here(std::unique_lock<std::mutex>& lock, const Key& key, std::size_t bytes,
                                             std::uint64_t whole, const Decode& decode);
  // The pass's chunk after `key` decoded now, where it is not held and
  // there is room; errors are left to the thread that needs it.
  void decode_ahead(std::unique_lock<std::mutex>& lock, const Key& key, std::size_t bytes, const Decode& decode);

  std::size_t capacity_;
  std::chrono::milliseconds patience_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<Key, Entry> held_;
  std::map<Key, std::int64_t> to_go_;  // elements the pass still copies from each chunk it names
  std::uint64_t clock_ = 0;
};

}  // namespace cvest::io
