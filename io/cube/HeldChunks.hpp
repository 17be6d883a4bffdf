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
#include <utility>
#include <vector>

namespace cvest::io {

class HeldChunks {
 public:
  using Key = std::array<Index, 3>;  // the origin (dates, ids, columns) of what is held: a cell of chunks
  explicit HeldChunks(std::size_t capacity, std::chrono::milliseconds patience = std::chrono::seconds(2));
  HeldChunks(const HeldChunks&) = delete;
  HeldChunks& operator=(const HeldChunks&) = delete;

  // A new pass: what is held and not being copied from is dropped, and
  // `elements` says how many elements the pass copies out of each chunk (a
  // chunk it does not name: all of `whole(key)`), in the order its blocks
  // reach them (what is decoded ahead follows it).
  void begin_pass(const std::vector<std::pair<Key, std::uint64_t>>& elements);
  // Copies `elements` of the chunk at `key` with `use(data)`: the chunk is
  // decoded first (`decode(key, into)`, `bytes` of it) unless held. `whole`:
  // the elements of the chunk in the dataset (where the pass named none).
  // Then, where there is room, the next chunk the pass names is decoded
  // ahead by this thread, while the others copy from this one; a thread
  // whose chunk another is decoding decodes the next one meanwhile.
  using Decode = std::function<void(const Key& key, unsigned char* into)>;
  void use(const Key& key, std::size_t bytes, std::uint64_t elements, std::uint64_t whole, const Decode& decode,
           const std::function<void(const unsigned char* data)>& use);

  std::size_t size() const;  // chunks held (or being decoded) now
  // Whether a thread has taken `key` to decode and not finished.
  bool decoding(const Key& key) const;

 private:
  struct Entry {
    std::unique_ptr<unsigned char[]> data;
    std::size_t bytes = 0;
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
  // The pass's first chunk after `key` (within `capacity` of it) that is
  // not held, decoded now where there is room; false where none was.
  // Errors are left to the thread that needs it.
  bool decode_ahead(std::unique_lock<std::mutex>& lock, const Key& key, std::size_t bytes, const Decode& decode);

  std::size_t capacity_;
  std::chrono::milliseconds patience_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<Key, Entry> held_;
  // Buffers let go, kept for the next chunks (never more than the capacity
  // with those held): memory the system handed out once, not faulted in
  // again for each chunk.
  std::vector<std::pair<std::unique_ptr<unsigned char[]>, std::size_t>> spare_;
  // held_'s entry at `it` erased, its buffer kept where there is room.
  std::map<Key, Entry>::iterator let_go(std::map<Key, Entry>::iterator it);
  std::map<Key, std::int64_t> to_go_;  // elements the pass still copies from each chunk it names
  std::vector<Key> order_;             // the chunks it names, in its order
  std::map<Key, std::size_t> rank_;    // each one's place in order_
  std::uint64_t clock_ = 0;
};

}  // namespace cvest::io
