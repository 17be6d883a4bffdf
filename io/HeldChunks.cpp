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
  expected_ = std::move(elements);
}

std::size_t HeldChunks::size() const {
  const std::lock_guard lock(mutex_);
  return held_.size();
}

bool HeldChunks::drop_stale() {
  auto stale = held_.end();
  for (auto it = held_.begin(); it != held_.end(); ++it)
    if (it->second.pins == 0 && it->second.state != Entry::State::decoding &&
        (stale == held_.end() || it->second.last_use < stale->second.last_use))
      stale = it;
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
    if (it != held_.end() && it->second.state == Entry::State::failed && it->second.pins == 0) {
      held_.erase(it);  // the thread that decoded it reported why; this one tries again
      continue;
    }
    if (it == held_.end() && held_.size() < capacity_) {
      it = decode_here(lock, key, bytes, whole, decode);
      break;
    }
    // Decoding elsewhere, or no room: wait. Nothing let go in time, the
    // least recently used chunk no thread holds is one a cut-short pass
    // left behind.
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      if (it == held_.end()) drop_stale();
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
  e.remaining -= std::int64_t(elements);
  if (e.remaining <= 0 && e.pins == 0) {
    held_.erase(it);
    changed_.notify_all();
  }
  if (error) std::rethrow_exception(error);
  decode_ahead(lock, key, bytes, decode);
}

void HeldChunks::decode_ahead(std::unique_lock<std::mutex>& lock, const Key& key, std::size_t bytes,
                              const Decode& decode) {
  const auto next = expected_.upper_bound(key);
  if (next == expected_.end() || held_.size() >= capacity_ || held_.count(next->first)) return;
  try {
    const auto it = decode_here(lock, next->first, bytes, next->second, decode);
    --it->second.pins;  // held for the threads whose blocks need it
  } catch (...) {
  }
}

std::map<HeldChunks::Key, HeldChunks::Entry>::iterator HeldChunks::decode_here(
    std::unique_lock<std::mutex>& lock, const Key& key, std::size_t bytes, std::uint64_t whole, const Decode& decode) {
  Entry& e = held_[key];
  e.pins = 1;  // this thread's, through its copy
  const auto expected = expected_.find(key);
  e.remaining = std::int64_t(expected != expected_.end() ? expected->second : whole);
  lock.unlock();
  try {
    e.data.reset(new unsigned char[bytes]);
    decode(key, e.data.get());
  } catch (...) {
    lock.lock();
    e.state = Entry::State::failed;
    e.data.reset();
    --e.pins;
    changed_.notify_all();
    throw;
  }
  lock.lock();
  e.state = Entry::State::ready;
  changed_.notify_all();
  return held_.find(key);
}

}  // namespace cvest::io
