#include "io/cube/HeldChunks.hpp"

#include <algorithm>
#include <exception>

namespace cvest::io {

HeldChunks::HeldChunks(std::size_t capacity, std::chrono::milliseconds patience)
    : capacity_(std::max<std::size_t>(capacity, 1)), patience_(patience) {}

void HeldChunks::begin_pass(const std::vector<std::pair<Key, std::uint64_t>>& elements) {
  const std::lock_guard lock(mutex_);
  for (auto it = held_.begin(); it != held_.end();)
    it = it->second.pins == 0 ? let_go(it) : std::next(it);
  to_go_.clear();
  order_.clear();
  rank_.clear();
  for (const auto& [key, n] : elements) {
    if (rank_.emplace(key, order_.size()).second) order_.push_back(key);
    to_go_[key] += std::int64_t(n);
  }
}

std::map<HeldChunks::Key, HeldChunks::Entry>::iterator HeldChunks::let_go(std::map<Key, Entry>::iterator it) {
  if (it->second.data && held_.size() + spare_.size() <= capacity_)
    spare_.emplace_back(std::move(it->second.data), it->second.bytes);
  return held_.erase(it);
}

bool HeldChunks::decoding(const Key& key) const {
  const std::lock_guard lock(mutex_);
  const auto it = held_.find(key);
  return it != held_.end() && it->second.state == Entry::State::decoding;
}

std::size_t HeldChunks::size() const {
  const std::lock_guard lock(mutex_);
  return held_.size();
}

void HeldChunks::drop_unnamed() {
  for (auto it = held_.begin(); it != held_.end(); ++it)
    if (it->second.pins == 0 && it->second.state == Entry::State::ready && !to_go_.count(it->first)) {
      let_go(it);
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
  let_go(stale);
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
    // Decoding elsewhere: the next chunk meanwhile, where there is room.
    // The time that took was work, not waiting: the patience starts again.
    if (it != held_.end() && held_.size() < capacity_ && decode_ahead(lock, key, bytes, decode)) {
      deadline = std::chrono::steady_clock::now() + patience_;
      continue;
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
    let_go(it);
    changed_.notify_all();
  }
  if (error) std::rethrow_exception(error);
  (void)decode_ahead(lock, key, bytes, decode);
}

bool HeldChunks::decode_ahead(std::unique_lock<std::mutex>& lock, const Key& key, std::size_t bytes,
                              const Decode& decode) {
  if (held_.size() >= capacity_) return false;
  const auto at = rank_.find(key);
  if (at == rank_.end()) return false;
  std::size_t j = at->second + 1;
  const std::size_t end = std::min(order_.size(), at->second + 1 + capacity_);
  for (; j < end && (held_.count(order_[j]) || !to_go_.count(order_[j])); ++j) {
  }
  if (j == end) return false;
  const Key next = order_[j];  // order_ may change while it decodes
  try {
    const auto it = decode_here(lock, next, bytes, 0, decode);
    --it->second.pins;  // held for the threads whose blocks need it
    if (!to_go_.count(next) && it->second.pins == 0) {  // its blocks came and went meanwhile
      let_go(it);
      changed_.notify_all();
    }
  } catch (...) {
    // Left to the thread whose block needs it, which decodes it again and
    // reports why; false, so that a waiting thread waits instead of trying
    // it again at once.
    return false;
  }
  return true;
}

std::map<HeldChunks::Key, HeldChunks::Entry>::iterator HeldChunks::decode_here(
    std::unique_lock<std::mutex>& lock, const Key& key, std::size_t bytes, std::uint64_t whole, const Decode& decode) {
  Entry& e = held_[key];
  e.pins = 1;  // this thread's, through its copy
  e.bytes = bytes;
  for (auto spare = spare_.begin(); spare != spare_.end() && !e.data; ++spare)
    if (spare->second == bytes) {
      e.data = std::move(spare->first);
      spare_.erase(spare);
      break;
    }
  if (!e.data && !spare_.empty()) spare_.pop_back();  // one of another size makes room for this one
  e.unnamed_left = std::int64_t(whole);
  lock.unlock();
  try {
    if (!e.data) e.data.reset(new unsigned char[bytes]);
    decode(key, e.data.get());
  } catch (...) {
    // Gone, so that it holds no room; threads waiting on it decode it again.
    lock.lock();
    let_go(held_.find(key));
    changed_.notify_all();
    throw;
  }
  lock.lock();
  e.state = Entry::State::ready;
  changed_.notify_all();
  return held_.find(key);
}

}  // namespace cvest::io
