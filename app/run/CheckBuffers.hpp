#pragma once
// Buffers for checking blocks against the written output, lent one per
// concurrent caller and kept for the next job; all freed with the pool.
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

namespace cvest::app {

class CheckBuffers {
 public:
  class Lease {
   public:
    Lease(CheckBuffers& pool, std::size_t bytes) : pool_(pool) {
      {
        const std::lock_guard lock(pool_.m_);
        if (!pool_.free_.empty()) {
          buffer_ = std::move(pool_.free_.back());
          pool_.free_.pop_back();
        }
      }
      buffer_.resize(bytes);
    }
    ~Lease() {
      const std::lock_guard lock(pool_.m_);
      pool_.free_.push_back(std::move(buffer_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    unsigned char* data() { return buffer_.data(); }

   private:
    CheckBuffers& pool_;
    std::vector<unsigned char> buffer_;
  };
  std::size_t kept_bytes() {
    const std::lock_guard lock(m_);
    std::size_t sum = 0;
    for (const auto& b : free_) sum += b.capacity();
    return sum;
  }
  void clear() {
    const std::lock_guard lock(m_);
    free_.clear();
  }

 private:
  std::mutex m_;
  std::vector<std::vector<unsigned char>> free_;
};

}  // namespace cvest::app
