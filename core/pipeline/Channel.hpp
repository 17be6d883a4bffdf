#pragma once
// A blocking queue of slot numbers between the overlapped pipeline's
// threads, and how those threads leave OpenMP's binding.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <unistd.h>
#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

namespace cvest::pipeline_detail {

// Lets the calling I/O thread run on any CPU. OpenMP binding
// (OMP_PROC_BIND) pins the main thread to one core as libgomp loads, and
// threads it starts inherit that pin, which would put both I/O threads on
// the core that also runs compute thread 0. The kernel narrows the mask to
// the CPUs the process's cgroup allows.
inline void unpin_this_thread() {
#ifdef __linux__
  cpu_set_t all;
  CPU_ZERO(&all);
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  for (long c = 0; c < cpus && c < CPU_SETSIZE; ++c) CPU_SET(int(c), &all);
  pthread_setaffinity_np(pthread_self(), sizeof all, &all);
#endif
}

// A blocking queue of slot numbers; close() wakes everyone for shutdown.
class Channel {
 public:
  void push(int v) {
    { std::lock_guard lock(m_); q_.push_back(v); }
    cv_.notify_one();
  }
  std::optional<int> pop() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return closed_ || !q_.empty(); });
    if (q_.empty()) return std::nullopt;
    int v = q_.front();
    q_.pop_front();
    return v;
  }
  void close() {
    { std::lock_guard lock(m_); closed_ = true; }
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<int> q_;
  bool closed_ = false;
};

}  // namespace cvest::pipeline_detail
