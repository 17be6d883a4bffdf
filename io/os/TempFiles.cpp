#include "io/os/TempFiles.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fcntl.h>
#include <fstream>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cvest::io {

namespace {

// A fixed table, so the handler touches no allocator and no lock: only
// lock-free atomics, unlink and raise, which are async-signal-safe.
constexpr int max_files = 16;  // a run holds at most three at once
enum State : int { free_slot = 0, busy = 1, registered_slot = 2 };
// What SIGTERM does with a slot's file: removes it; keeps it (a record: a
// resume journal, a seal); keeps it only where a record of it is on disk (the
// output's temporary file: alone, nothing could resume it).
enum OnTerminate : int { remove_file = 0, keep_record = 1, keep_if_recorded = 2 };
struct Slot {
  std::atomic<int> state{free_slot};
  std::atomic<int> on_terminate{remove_file};
  std::atomic<long long> record_above{0};  // a record counts once larger than this (a journal's header)
  char path[4096];
};
static_assert(std::atomic<long long>::is_always_lock_free);
Slot table[max_files];
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void remove_temp_files_and_reraise(int sig) {
  // A record is looked for on disk (stat is async-signal-safe): SIGTERM
  // can land before a journal holds a block, or after the journal went and
  // before the seal; a file kept then could only be computed again.
  bool recorded = false;
  if (sig == SIGTERM)
    for (Slot& slot : table) {
      struct stat st {};
      if (slot.state.load() == registered_slot && slot.on_terminate.load() == keep_record &&
          ::stat(slot.path, &st) == 0 && st.st_size > slot.record_above.load())
        recorded = true;
    }
  bool kept = false;
  for (Slot& slot : table) {
    if (slot.state.load() != registered_slot) continue;
    const int mode = sig == SIGTERM ? slot.on_terminate.load() : remove_file;
    if (mode == keep_record && recorded) continue;
    if (mode == keep_if_recorded && recorded) {
      kept = true;
      continue;
    }
    ::unlink(slot.path);
  }
  if (kept) {
    static const char note[] = "cvest: stopped by SIGTERM; the output's temporary file and its record (resume journal "
                               "or seal) are kept: run the same deck again to continue where this run stopped\n";
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

constexpr std::size_t token_length = 12;

// Letters and digits from the kernel's random source: what makes a
// temporary name unpredictable. A clock and the pid where getrandom fails
// (never on Linux >= 3.17); creation stays exclusive either way.
std::string random_token() {
  static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  unsigned char bytes[token_length] = {};
  if (::getrandom(bytes, sizeof bytes, 0) != ssize_t(sizeof bytes)) {
    std::uint64_t z = std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ std::uint64_t(::getpid());
    for (unsigned char& b : bytes) b = static_cast<unsigned char>((z = z * 6364136223846793005ull + 1442695040888963407ull) >> 56);
  }
  std::string token(token_length, 'x');
  for (std::size_t i = 0; i < token_length; ++i) token[i] = alphabet[bytes[i] % (sizeof alphabet - 1)];
  return token;
}

bool is_token(const std::string& text) {
  return text.size() == token_length &&
         std::all_of(text.begin(), text.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; });
}

std::string describe(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (!S_ISREG(st.st_mode)) return S_ISDIR(st.st_mode) ? "a directory" : "not a regular file";
  return "owned by another user (uid " + std::to_string(st.st_uid) + ")";
}

}  // namespace

std::string temp_path_for(const std::string& path) {
  const std::filesystem::path p(path);
  return (p.parent_path() / ("." + p.filename().string() + ".tmp-" + host_tag() + "-" + std::to_string(::getpid()) +
                             "-" + random_token()))
      .string();
}

int create_exclusive(const std::string& path, int flags) {
  return ::open(path.c_str(), flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

int create_exclusive_temp(const std::string& path, std::string& temp, TempFileGuard& guard) {
  for (int attempt = 1;; ++attempt) {
    const int fd = create_exclusive(temp, O_WRONLY);
    if (fd >= 0 || errno != EEXIST || attempt == 16) return fd;
    temp = temp_path_for(path);
    guard.retarget(temp);
  }
}

int open_own_file(const std::string& path, int flags, std::string& why) {
  const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = errno == ELOOP ? "a symbolic link" : errno == ENOENT ? "missing" : std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    why = describe(st);
    ::close(fd);
    return -1;
  }
  return fd;
}

bool own_regular_file(const std::string& path, std::string& why) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return why = errno == ENOENT ? "missing" : std::strerror(errno), false;
  if (S_ISREG(st.st_mode) && st.st_uid == ::geteuid()) return true;
  why = describe(st);
  return false;
}

bool rename_without_replacing(const std::string& temp, const std::string& path, unsigned ways) {
#ifdef SYS_renameat2
  if (ways & rename_noreplace) {
    if (::syscall(SYS_renameat2, AT_FDCWD, temp.c_str(), AT_FDCWD, path.c_str(), 1u /* RENAME_NOREPLACE */) == 0)
      return true;
    if (errno != EINVAL && errno != ENOSYS && errno != EPERM) return false;  // EPERM: a seccomp filter's refusal
  }
#endif
  if (ways & rename_by_link) {
    if (::link(temp.c_str(), path.c_str()) == 0) {
      ::unlink(temp.c_str());
      return true;
    }
    if (errno == EEXIST) return false;
  }
  if (!(ways & rename_checked)) return errno = ENOSYS, false;
  // Neither (a file system without hard links): the check and the rename
  // are two steps; the output lock (OutputLock) still keeps cvest runs apart.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) return errno = EEXIST, false;
  return ::rename(temp.c_str(), path.c_str()) == 0;
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
    std::string rest = name.substr(prefix.size());
    const std::size_t digits = std::min(rest.find_first_not_of("0123456789"), rest.size());
    if (digits == 0 || digits > 9) continue;
    const pid_t pid = pid_t(std::stol(rest.substr(0, digits)));
    rest.erase(0, digits);
    // "-TOKEN" (earlier versions wrote none), then nothing (the temporary
    // file itself) or, with_companions, its journals: ".journal-R", ".journal-R.new".
    if (rest.size() > token_length && rest[0] == '-' && is_token(rest.substr(1, token_length)))
      rest.erase(0, 1 + token_length);
    if (!rest.empty() && (!with_companions || rest[0] != '.')) continue;
    if (pid <= 0 || pid == ::getpid() || (::kill(pid, 0) == 0 && !zombie(pid)) || (errno != ESRCH && errno != 0))
      continue;  // running, or not ours to judge
    std::string why;
    if (!own_regular_file(it->path().string(), why)) continue;  // planted, or another user's: left alone
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

void TempFileGuard::keep_on_terminate_as_record(long long larger_than) {
  if (slot_ < 0) return;
  table[slot_].record_above.store(larger_than);
  table[slot_].on_terminate.store(keep_record);
}

void TempFileGuard::remove_on_terminate() {
  if (slot_ >= 0) table[slot_].on_terminate.store(remove_file);
}

void TempFileGuard::keep_on_terminate_if_recorded() {
  if (slot_ >= 0) table[slot_].on_terminate.store(keep_if_recorded);
}

void TempFileGuard::retarget(const std::string& path) {
  if (slot_ < 0 || path.size() >= sizeof(Slot::path)) return;
  // Off the table while the path changes: a handler never sees half a name.
  table[slot_].state.store(busy);
  std::memcpy(table[slot_].path, path.c_str(), path.size() + 1);
  table[slot_].state.store(registered_slot);
}

TempFileGuard::~TempFileGuard() {
  if (slot_ >= 0) {
    table[slot_].on_terminate.store(remove_file);
    table[slot_].state.store(free_slot);
  }
}

void clean_up_after_killed_runs(const std::string& path) {
  for (const std::string& stale : remove_stale_temp_files(path))
    fmt::print(stderr, "cvest: removed {}, left by a run of {} on this host that no longer runs\n", stale, path);
}

}  // namespace cvest::io
