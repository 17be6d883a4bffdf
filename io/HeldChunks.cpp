#include "io/HeldChunks.hpp"

#include <algorithm>
#include <exception>

namespace cvest::io {

HeldChunks::HeldChunks(std::size_t capacity, std::chrono::milliseconds patience)
    : capacity_(std::max<std::size_t>(capacity, 1)), patience_(patience) {}

void HeldChunks::begin_pass(std::map<Key, std::uint64_t> elements) {
  const std::lock_guard lock(mutex_);
  for (auto it = held_.begin(); it != held_.end();)
    it = it->second.pins == 0 ? held_.erase(it) : std::next(it);
  to_go_.clear();
  for (const auto& [key, n] : elements) to_go_[key] = std::int64_t(n);
}

std::size_t HeldChunks::size() const {
  const std::lock_guard lock(mutex_);
  return held_.size();
}

void HeldChunks::drop_unnamed() {
  for (auto it = held_.begin(); it != held_.end(); ++it)
    if (it->second.pins == 0 && it->second.state == Entry::State::ready && !to_go_.count(it->first)) {
      held_.erase(it);
      return;
    }
}

bool HeldChunks::drop_stale() {
  // First a chunk the pass has nothing more to copy from (decoded ahead of
  // a pass cut short, or named by none), else the least recently used.
  auto stale = held_.end();
  for (auto it = held_.begin(); it != held_.end(); ++it) {
    if (it->second.pins > 0 || it->second.state == Entry::State::decoding) continue;
    const bool done = !to_go_.count(it->first);
    const bool stale_done = stale != held_.end() && !to_go_.count(stale->first);
    if (stale == held_.end() || (done && !stale_done) ||
        (done == stale_done && it->second.last_use < stale->second.last_use))
      stale = it;
  }
  if (stale == held_.end()) return false;
  held_.erase(stale);
  return true;
}

void HeldChunks::use(const Key& key, std::size_t bytes, std::uint64_t elements, std::uint64_t whole,
                     const Decode& decode, const std::function<void(const unsigned char*)>& copy) {
  std::unique_lock lock(mutex_);
  auto deadline = std::chrono::steady_clock::now() + patience_;
  auto it = held_.end();
  // Until the chunk is held and decoded (by this thread, where it is not
  // held and there is room): anything may have changed while waiting.
  for (;;) {
    it = held_.find(key);
    if (it != held_.end() && it->second.state == Entry::State::ready) {
      ++it->second.pins;
      break;
    }
    // No room: a chunk the pass does not name (a reader given no pass), no
    // thread copying from it, makes room at once.
    if (it == held_.end() && held_.size() >= capacity_) drop_unnamed();
    if (it == held_.end() && held_.size() < capacity_) {
      it = decode_here(lock, key, bytes, whole, decode);
      break;
    }
    // Decoding elsewhere, or no room: wait. Nothing let go in time, the
    // least recently used chunk no thread holds is one a cut-short pass
    // left behind.
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      if (!held_.count(key)) drop_stale();
      deadline = std::chrono::steady_clock::now() + patience_;
    }
  }
  Entry& e = it->second;
  e.last_use = ++clock_;
  lock.unlock();
  std::exception_ptr error;
  try {
    copy(e.data.get());
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  --e.pins;
  // What the pass still copies from it: counted per key, so that a chunk
  // dropped and decoded again is let go when its last piece is copied.
  const auto to_go = to_go_.find(key);
  std::int64_t& counted = to_go != to_go_.end() ? to_go->second : e.unnamed_left;
  const std::int64_t left = counted -= std::int64_t(elements);
  if (left <= 0 && to_go != to_go_.end()) to_go_.erase(to_go);
  if (left <= 0 && e.pins == 0) {
    held_.erase(it);
    changed_.notify_all();
  }
  if (error) std::rethrow_exception(error);
  decode_ahead(lock, key, bytes, decode);
}

void HeldChunks::decode_ahead(std::unique_lock<std::mutex>& lock, const Key& key, std::size_t bytes,
                              const Decode& decode) {
  const auto next_it = to_go_.upper_bound(key);
  if (next_it == to_go_.end() || held_.size() >= capacity_ || held_.count(next_it->first)) return;
  const Key next = next_it->first;  // to_go_ may change while it decodes
  try {
    const auto it = decode_here(lock, next, bytes, 0, decode);
    --it->second.pins;  // held for the threads whose blocks need it
    if (!to_go_.count(next) && it->second.pins == 0) {  // its blocks came and went meanwhile
      held_.erase(it);
      changed_.notify_all();
    }
  } catch (...) {
    // Left to the thread whose block needs it, which decodes it again and reports why.
  }
}

std::map<HeldChunks::Key, HeldChunks::Entry>::iterator HeldChunks::decode_here(
    std::unique_lock<std::mutex>& lock, const Key& key, std::size_t bytes, std::uint64_t whole, const Decode& decode) {
  Entry& e = held_[key];
  e.pins = 1;  // this thread's, through its copy
  e.unnamed_left = std::int64_t(whole);
  lock.unlock();
  try {
    e.data.reset(new unsigned char[bytes]);
    decode(key, e.data.get());
  } catch (...) {
    // Gone, so that it holds no room; threads waiting on it decode it again.
    lock.lock();
    held_.erase(key);
    changed_.notify_all();
    throw;
  }
  lock.lock();
  e.state = Entry::State::ready;
  changed_.notify_all();
  return held_.find(key);
}

}  // namespace cvest::io
