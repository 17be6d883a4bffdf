#pragma once
// Starting a thread of cvest's own (a pipeline's reader or writer, a
// journal's syncer). std::thread throws std::system_error where the system
// refuses one (EAGAIN: `ulimit -u`, a cgroup's pids.max); unhandled, or
// thrown past a joinable thread, that ends in std::terminate with every
// cleanup skipped. Here it is one IoError (exit 3) that says which limit.
#include "core/Errors.hpp"

#include <system_error>
#include <thread>
#include <utility>

namespace cvest {

template <class Body>
std::thread start_thread(const char* what, Body&& body) {
  try {
    return std::thread(std::forward<Body>(body));
  } catch (const std::system_error& e) {
    throw IoError(std::string("cannot start ") + what + ": " + e.code().message() +
                  " (the limit on processes and threads: ulimit -u, or the cgroup's pids.max)");
  }
}

}  // namespace cvest
