#pragma once
// The one thread of the Python module that does Kokkos work.
//
// Kokkos' OpenMP back end (3.4, and 4.x alike) ties dispatch to the thread
// that initialized it and is not made for dispatch from several host
// threads at once; Python users call libraries from any thread (Dask's
// threaded scheduler, concurrent.futures, Jupyter). So every module call
// that touches Kokkos (initialize, multiply, run, verify, bench, a
// BenchServer, finalize) is handed to this thread, one call after another,
// while the calling thread waits with the GIL released. The work never
// touches Python objects; exceptions it throws are rethrown in the caller,
// where pybind11 turns them into the documented Python exceptions.
//
// A KeyboardInterrupt that arrives for the main thread while it waits
// (Ctrl-C) sets the call's interrupt flag (core/Interrupt.hpp): the work
// stops at its next block, its temporary files removed, and the caller
// raises KeyboardInterrupt.
//
// fork(): a child (os.fork, multiprocessing's and Dask's 'fork' start
// method) has neither this thread nor Kokkos' OpenMP threads, only their
// memory; OpenMP's runtime (GCC's libgomp) hangs in a child's first
// parallel region, and Kokkos cannot start twice. So a call in a child of a
// process where this thread ran raises ForkedProcess at once, naming the
// ways that work (cvest.multiply itself computes on the child's calling
// thread instead, python/CallerMultiply.hpp); never a wait for a thread
// that is not there.
#include "core/Interrupt.hpp"

#include <pybind11/pybind11.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

namespace cvest::python {

// A module call that needs Kokkos, in a forked child (a RuntimeError in Python).
struct ForkedProcess : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class KokkosThread {
 public:
  // Whether this process is a fork of one where the thread was started.
  static bool forked() {
    const pid_t started = started_in().load();
    return started != 0 && started != ::getpid();
  }
  // ForkedProcess naming `what` (a call, e.g. "cvest.run") where forked().
  static void refuse_in_fork(const char* what) {
    if (!forked()) return;
    throw ForkedProcess(
        std::string(what) + " cannot run in this process: it was forked (os.fork, or multiprocessing's 'fork' start "
        "method) from process " + std::to_string(started_in().load()) + " after cvest had started Kokkos there, "
        "and Kokkos' OpenMP threads do not survive fork(). cvest.multiply works in such a child (on its calling "
        "thread); for the rest, start workers with multiprocessing.get_context('spawn') or 'forkserver' "
        "(ProcessPoolExecutor(mp_context=...); Dask: dask.config.set({'multiprocessing.context': 'spawn'})), or "
        "fork before the first cvest call");
  }

  // The thread, started at the first call.
  static KokkosThread& get() {
    static KokkosThread* thread = new KokkosThread;  // never destroyed: stop() ends it at exit
    return *thread;
  }

  // Runs `work` on this thread and returns what it returns (or rethrows
  // what it throws). Called with the GIL held; released while waiting.
  template <class Work>
  auto call(Work&& work) -> std::invoke_result_t<Work&> {
    namespace py = pybind11;
    using Result = std::invoke_result_t<Work&>;
    refuse_in_fork("cvest's Kokkos work (run, verify, bench, BenchServer, initialize)");
    if (std::this_thread::get_id() == id_.load()) return work();  // already here
    std::optional<std::conditional_t<std::is_void_v<Result>, bool, Result>> result;
    std::exception_ptr failure;
    std::atomic<bool> interrupt{false};
    bool done = false;
    std::mutex m;
    std::condition_variable finished;
    post([&] {
      try {
        const InterruptScope scope(interrupt);
        if constexpr (std::is_void_v<Result>) work(), result.emplace(true);
        else result.emplace(work());
      } catch (...) {
        failure = std::current_exception();
      }
      const std::lock_guard lock(m);
      done = true;
      finished.notify_all();
    });
    bool interrupted = false;
    {
      py::gil_scoped_release release;
      std::unique_lock lock(m);
      // Every 50 ms, Python's signal handlers get their turn (they run only
      // in the main thread, and only when it holds the GIL).
      while (!finished.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) {
        if (interrupted) continue;
        lock.unlock();
        {
          py::gil_scoped_acquire acquire;
          interrupted = PyErr_CheckSignals() != 0;
        }
        if (interrupted) interrupt.store(true);
        lock.lock();
      }
    }
    if (interrupted) throw py::error_already_set();  // the KeyboardInterrupt Python has set
    if (failure) std::rethrow_exception(failure);
    if constexpr (!std::is_void_v<Result>) return std::move(*result);
  }

  // Ends the thread after the calls already handed to it (interpreter exit,
  // after Kokkos finalized). Later calls run on the caller's thread.
  void stop() {
    {
      const std::lock_guard lock(queue_m_);
      if (stopping_) return;
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    id_.store(std::thread::id());
  }

 private:
  KokkosThread() : thread_([this] { loop(); }) {
    id_.store(thread_.get_id());
    started_in().store(::getpid());
  }
  static std::atomic<pid_t>& started_in() {
    static std::atomic<pid_t> pid{0};
    return pid;
  }

  void post(std::function<void()> task) {
    {
      const std::lock_guard lock(queue_m_);
      if (!stopping_) {
        queue_.push_back(std::move(task));
        wake_.notify_one();
        return;
      }
    }
    task();  // stopped (at exit): on the caller's thread
  }

  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(queue_m_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex queue_m_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
  std::atomic<std::thread::id> id_{};  // read by callers while stop() clears it
};

// The work of a module call, on the Kokkos thread (see above).
template <class Work>
auto on_kokkos_thread(Work&& work) {
  return KokkosThread::get().call(std::forward<Work>(work));
}

}  // namespace cvest::python
