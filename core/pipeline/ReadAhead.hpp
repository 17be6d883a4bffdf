#pragma once
// One helper thread that runs one task at a time for a per-thread pipeline
// thread: its next block's read, while the pipeline thread computes and
// writes the block before. A thread that reads, computes and writes in turn
// keeps one request at the disk at a time; a cold 24 GB input read past the
// page cache ran 12-26% faster reading ahead (docs/benchmarks.md, "Reading
// ahead"). The helper is started by its pipeline thread and inherits its
// CPU binding: it waits on the disk nearly all the time, and the little it
// computes (copying a misaligned read into place) lands in that core's
// caches. It decodes on its own thread: outside a parallel region a reader
// would otherwise start an OpenMP team (io/cube/ChunkedCube.cpp), one per helper
// beside the computing threads.
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace cvest::pipeline_detail {

class ReadAhead {
 public:
  ReadAhead() : thread_([this] { loop(); }) {}
  // Waits for the task under way (its failure dropped: the caller is
  // already failing or has waited), then stops the thread.
  ~ReadAhead() {
    {
      std::unique_lock lock(m_);
      done_.wait(lock, [&] { return !task_; });
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Runs `task` on the helper; the one before must have been waited for.
  void start(std::function<void()> task) {
    {
      const std::lock_guard lock(m_);
      task_ = std::move(task);
      failed_ = nullptr;
    }
    wake_.notify_one();
  }
  // Until the task started last has ended; rethrows what it threw.
  void wait() {
    std::unique_lock lock(m_);
    done_.wait(lock, [&] { return !task_; });
    if (failed_) std::rethrow_exception(std::exchange(failed_, nullptr));
  }

 private:
  void loop() {
#ifdef _OPENMP
    omp_set_num_threads(1);  // this thread's own setting
#endif
    std::unique_lock lock(m_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || task_; });
      if (!task_) return;  // stopped
      lock.unlock();
      std::exception_ptr failed;
      try {
        task_();
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      failed_ = failed;
      task_ = nullptr;
      done_.notify_one();
    }
  }

  std::mutex m_;
  std::condition_variable wake_, done_;
  std::function<void()> task_;  // set: under way
  std::exception_ptr failed_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace cvest::pipeline_detail
