#include "io/TempFiles.hpp"

#include <atomic>
#include <csignal>
#include <cstring>
#include <unistd.h>

namespace cvest::io {

namespace {

// A fixed table, so the handler touches no allocator and no lock: only
// lock-free atomics, unlink and raise, which are async-signal-safe.
constexpr int max_files = 16;  // a run holds at most three at once
enum State : int { free_slot = 0, busy = 1, registered_slot = 2 };
struct Slot {
  std::atomic<int> state{free_slot};
  char path[4096];
};
Slot table[max_files];
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void remove_temp_files_and_reraise(int sig) {
  for (Slot& slot : table)
    if (slot.state.load() == registered_slot) ::unlink(slot.path);
  // SA_RESETHAND restored the default action; raised now, it is delivered
  // when this handler returns and ends the process with the signal's status.
  ::raise(sig);
}

}  // namespace

void remove_temp_files_on_signals() {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0 || current.sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = remove_temp_files_and_reraise;
    sigemptyset(&action.sa_mask);
    for (const int other : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&action.sa_mask, other);  // one cleanup at a time
    action.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &action, nullptr);
  }
}

TempFileGuard::TempFileGuard(const std::string& path) {
  if (path.size() >= sizeof(Slot::path)) return;
  for (int i = 0; i < max_files; ++i) {
    int expected = free_slot;
    if (table[i].state.compare_exchange_strong(expected, busy)) {
      std::memcpy(table[i].path, path.c_str(), path.size() + 1);
      table[i].state.store(registered_slot);
      slot_ = i;
      return;
    }
  }
}

TempFileGuard::~TempFileGuard() {
  if (slot_ >= 0) table[slot_].state.store(free_slot);
}

}  // namespace cvest::io
