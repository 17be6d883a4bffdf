#pragma once
// Page-aligned buffers for O_DIRECT, shared by the threads of one reader or
// writer: at most `count` of `bytes` each, allocated on first use, waited
// for when all are taken, freed with the pool. What it holds is bounded
// whatever number of threads use it.
#include "core/Errors.hpp"

#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace cvest::io {

class AlignedPool {
 public:
  // `what` names the buffers in the out-of-memory message ("PATH: a direct
  // read's aligned buffer").
  AlignedPool(std::size_t count, std::size_t bytes, std::size_t alignment, std::string what)
      : count_(count), bytes_(bytes), alignment_(alignment), what_(std::move(what)) {
    all_.reserve(count);  // no allocation between posix_memalign and the push that keeps it
    free_.reserve(count);
  }
  ~AlignedPool() {
    for (char* p : all_) std::free(p);
  }
  AlignedPool(const AlignedPool&) = delete;
  AlignedPool& operator=(const AlignedPool&) = delete;

  std::size_t bytes() const { return bytes_; }
  // Bytes allocated so far.
  std::size_t held() const {
    const std::lock_guard lock(m_);
    return all_.size() * bytes_;
  }
  char* take() {
    std::unique_lock lock(m_);
    freed_.wait(lock, [&] { return !free_.empty() || all_.size() < count_; });
    if (!free_.empty()) {
      char* p = free_.back();
      free_.pop_back();
      return p;
    }
    void* p = nullptr;
    if (::posix_memalign(&p, alignment_, bytes_) != 0) throw IoError(what_ + ": out of memory");
    all_.push_back(static_cast<char*>(p));
    return all_.back();
  }
  void give(char* p) {
    {
      const std::lock_guard lock(m_);
      free_.push_back(p);
    }
    freed_.notify_one();
  }
  // One buffer taken for a scope, given back at its end (also on a throw).
  class Taken {
   public:
    explicit Taken(AlignedPool& pool) : pool_(pool), p_(pool.take()) {}
    ~Taken() { pool_.give(p_); }
    Taken(const Taken&) = delete;
    Taken& operator=(const Taken&) = delete;
    char* get() const { return p_; }

   private:
    AlignedPool& pool_;
    char* p_;
  };

 private:
  const std::size_t count_, bytes_, alignment_;
  const std::string what_;
  mutable std::mutex m_;
  std::condition_variable freed_;
  std::vector<char*> all_, free_;
};

}  // namespace cvest::io
