#include "io/TempFiles.hpp"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace cvest::io {

namespace {

// A fixed table, so the handler touches no allocator and no lock: only
// lock-free atomics, unlink and raise, which are async-signal-safe.
constexpr int max_files = 16;  // a run holds at most three at once
enum State : int { free_slot = 0, busy = 1, registered_slot = 2 };
struct Slot {
  std::atomic<int> state{free_slot};
  std::atomic<bool> keep_on_terminate{false};
  char path[4096];
};
Slot table[max_files];
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void remove_temp_files_and_reraise(int sig) {
  bool kept = false;
  for (Slot& slot : table) {
    if (slot.state.load() != registered_slot) continue;
    if (sig == SIGTERM && slot.keep_on_terminate.load()) kept = true;
    else ::unlink(slot.path);
  }
  if (kept) {
    static const char note[] = "cvest: stopped by SIGTERM; the output's temporary file and its resume journal are kept: "
                               "run the same deck again to continue where this run stopped\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, note, sizeof note - 1);
  }
  // SA_RESETHAND restored the default action; raised now, it is delivered
  // when this handler returns and ends the process with the signal's status.
  ::raise(sig);
}

// This host's name as it goes into a file name.
std::string host_tag() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "host";
  std::string tag(name);
  for (char& c : tag)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_')) c = '_';
  return tag;
}

// A process killed but not yet reaped by its parent: it holds no files and
// no locks, and will never write again.
bool zombie(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const std::size_t close = line.rfind(')');  // the command name may hold spaces
  errno = 0;
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

}  // namespace

std::string temp_path_for(const std::string& path) {
  const std::filesystem::path p(path);
  return (p.parent_path() / ("." + p.filename().string() + ".tmp-" + host_tag() + "-" + std::to_string(::getpid())))
      .string();
}

std::vector<std::string> stale_temp_files(const std::string& path, bool with_companions) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const std::string prefix = "." + p.filename().string() + ".tmp-" + host_tag() + "-";
  std::vector<std::string> stale;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const std::size_t digits = std::min(rest.find_first_not_of("0123456789"), rest.size());
    // The temporary file itself, or (with_companions) its journals: ".journal-R", ".journal-R.new".
    if (digits == 0 || digits > 9 || (digits < rest.size() && (!with_companions || rest[digits] != '.'))) continue;
    const pid_t pid = pid_t(std::stol(rest.substr(0, digits)));
    if (pid <= 0 || pid == ::getpid() || (::kill(pid, 0) == 0 && !zombie(pid)) || (errno != ESRCH && errno != 0))
      continue;  // running, or not ours to judge
    stale.push_back(it->path().string());
  }
  std::sort(stale.begin(), stale.end());
  return stale;
}

std::vector<std::string> remove_stale_temp_files(const std::string& path) {
  std::vector<std::string> removed;
  for (const std::string& file : stale_temp_files(path, true)) {
    std::error_code rm;
    if (std::filesystem::remove(file, rm)) removed.push_back(file);
  }
  return removed;
}

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

void TempFileGuard::keep_on_terminate(bool keep) {
  if (slot_ >= 0) table[slot_].keep_on_terminate.store(keep);
}

TempFileGuard::~TempFileGuard() {
  if (slot_ >= 0) {
    table[slot_].keep_on_terminate.store(false);
    table[slot_].state.store(free_slot);
  }
}

}  // namespace cvest::io
