#include "io/hdf5/MetadataSandbox.hpp"

#include "core/Errors.hpp"
#include "io/hdf5/Hdf5.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

namespace cvest::io {

namespace {

// The memory the reader may take beyond what it had when forked. HDF5 reads
// kilobytes of metadata, megabytes with its caches; a damaged length (a
// driver info block claiming 4 GiB) had it allocate and zero 4 GiB, 14 s,
// then open the file as if nothing were wrong.
constexpr std::uint64_t metadata_memory = std::uint64_t(1) << 30;
const char* const metadata_memory_text = "1 GiB";

// Whether an HDF5 error stack holds a failed allocation (the metadata
// cache's is "Object cache: Can't allocate space").
herr_t note_allocation_failure(unsigned, const H5E_error2_t* error, void* failed) {
  if (error->min_num == H5E_NOSPACE || error->min_num == H5E_CANTALLOC)
    *static_cast<bool*>(failed) = true;
  return 0;
}

herr_t on_hdf5_error(hid_t stack, void* failed) {
  H5Ewalk2(stack, H5E_WALK_DOWNWARD, note_allocation_failure, failed);
  return 0;
}

// What check_metadata_in_child's child reads, as opening `datasets` would and
// then some: every chunk record (H5Dget_num_chunks walks the whole index)
// and every attribute. `step` tells the parent how far it got: -1 the file,
// else the dataset's index. Returns whether HDF5 failed to allocate memory
// (past metadata_memory), leaving `step` where it did.
bool read_metadata(const std::string& path, const std::vector<std::string>& datasets, volatile int* step) {
  bool allocation_failed = false;
  H5Eset_auto2(H5E_DEFAULT, on_hdf5_error, &allocation_failed);
  *step = -1;
  const File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file) return allocation_failed;
  for (std::size_t i = 0; i < datasets.size() && !allocation_failed; ++i) {
    *step = int(i);
    const char* name = datasets[i].c_str();
    if (H5Lexists(file.get(), name, H5P_DEFAULT) <= 0) continue;
    const Dataset ds(H5Dopen2(file.get(), name, H5P_DEFAULT));
    if (!ds) continue;
    const Dataspace space(H5Dget_space(ds.get()));
    const Datatype type(H5Dget_type(ds.get()));
    const PropList create(H5Dget_create_plist(ds.get()));
    // Statuses ignored on purpose here: these calls are made for the
    // metadata they read; what fails is left to the caller's own checks.
    (void)H5Dget_storage_size(ds.get());
    hsize_t chunks = 0;
    if (space && create && H5Pget_layout(create.get()) == H5D_CHUNKED)
      (void)H5Dget_num_chunks(ds.get(), space.get(), &chunks);
    const auto attribute = [](hid_t object, const char* attribute_name, const H5A_info_t*, void*) -> herr_t {
      const Attribute a(H5Aopen(object, attribute_name, H5P_DEFAULT));
      if (a) {
        const Datatype attribute_type(H5Aget_type(a.get()));
        const Dataspace attribute_space(H5Aget_space(a.get()));
      }
      return 0;
    };
    (void)H5Aiterate2(ds.get(), H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, attribute, nullptr);
  }
  return allocation_failed;
}

// Caps the reader's data (heap and private mappings, what malloc takes) at
// what it has now plus metadata_memory, so HDF5's allocation fails instead.
// Not under AddressSanitizer, whose allocator ends the process on a failed
// mapping unless told otherwise (GCC says so with __SANITIZE_ADDRESS__,
// clang with __has_feature).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CVEST_ADDRESS_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(CVEST_ADDRESS_SANITIZER)
void limit_reader_memory() {}
#else
void limit_reader_memory() {
  std::ifstream status("/proc/self/status");
  std::string line;
  std::uint64_t data_kib = 0;
  while (std::getline(status, line))
    if (line.rfind("VmData:", 0) == 0) data_kib = std::strtoull(line.c_str() + 7, nullptr, 10);
  rlimit limit{};
  if (data_kib == 0 || ::getrlimit(RLIMIT_DATA, &limit) != 0) return;
  const rlim_t wanted = rlim_t(data_kib * 1024 + metadata_memory);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur <= wanted) return;  // already tighter
  limit.rlim_cur = wanted;
  ::setrlimit(RLIMIT_DATA, &limit);
}
#endif

constexpr int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int crashed_exit = 64;  // the reader's exit code after a crash: this plus the signal
constexpr char read_through = 1, read_out_of_memory = 2;  // the reader's answers

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "signal " + std::to_string(sig);
  }
}

bool send_all(int fd, const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);  // a reader gone is an error, not SIGPIPE
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= std::size_t(n);
  }
  return true;
}

bool receive_all(int fd, void* data, std::size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= std::size_t(n);
  }
  return true;
}

// A request: the file's path, then the datasets' names, each its length and bytes.
bool send_strings(int fd, const std::vector<std::string>& strings) {
  const std::uint32_t count = std::uint32_t(strings.size());
  if (!send_all(fd, &count, sizeof count)) return false;
  for (const std::string& s : strings) {
    const std::uint32_t length = std::uint32_t(s.size());
    if (!send_all(fd, &length, sizeof length) || !send_all(fd, s.data(), s.size())) return false;
  }
  return true;
}

bool receive_strings(int fd, std::vector<std::string>& strings) {
  std::uint32_t count = 0;
  if (!receive_all(fd, &count, sizeof count)) return false;
  strings.assign(count, std::string());
  for (std::string& s : strings) {
    std::uint32_t length = 0;
    if (!receive_all(fd, &length, sizeof length)) return false;
    s.resize(length);
    if (!receive_all(fd, s.data(), length)) return false;
  }
  return true;
}

// The process that reads files' metadata for check_metadata_in_child: forked
// once and kept, as a fork costs more than the reading (milliseconds, tens
// of them under the sanitizers), and forked again after it crashes.
struct MetadataReader {
  pid_t pid = -1;
  int socket = -1;
  volatile int* step = nullptr;  // shared with it: how far its request got
  pid_t parent = -1;             // the process that forked it (a forked Python child has none)
  // At exit the reader is ended and reaped, not left to init: where PID 1
  // reaps slowly (containers), an orphan counts against the user's
  // process limit (ulimit -u) for the next run.
  ~MetadataReader() {
    if (pid <= 0 || parent != ::getpid()) return;
    ::kill(pid, SIGKILL);  // idle between requests, or stuck on a hung file system: either way, done
    ::close(socket);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
};
std::mutex reader_mutex;
MetadataReader reader;

[[noreturn]] void serve_metadata_requests(int socket, volatile int* step) {
  // A crash ends it at once, with its signal in the exit code: no core
  // dump, no sanitizer report, nothing written in its name. It holds none
  // of the parent's files (an output's lock stays the parent's), writes
  // nothing to its terminal, and leaves interrupts to their default.
  struct sigaction crashed {};
  crashed.sa_handler = [](int sig) { ::_exit(crashed_exit + sig); };
  sigemptyset(&crashed.sa_mask);
  for (const int sig : crash_signals) ::sigaction(sig, &crashed, nullptr);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::signal(sig, SIG_DFL);
  const int kept = ::fcntl(socket, F_DUPFD, 10);  // out of the way of what follows, whatever its number
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd <= 2; ++fd) ::dup2(null, fd);
  ::dup2(kept, 3);
  socket = 3;
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
#endif
    for (int fd = 4; fd < 65536; ++fd) ::close(fd);
  limit_reader_memory();
  std::vector<std::string> request;
  while (receive_strings(socket, request) && !request.empty()) {
    const bool allocation_failed =
        read_metadata(request[0], std::vector<std::string>(request.begin() + 1, request.end()), step);
    const char done = allocation_failed ? read_out_of_memory : read_through;
    if (!send_all(socket, &done, 1)) break;
  }
  ::_exit(0);  // the parent closed its end
}

bool start_reader() {
  if (!reader.step) {
    void* shared = ::mmap(nullptr, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return false;
    reader.step = static_cast<volatile int*>(shared);
  }
  int ends[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return false;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ends[0]);
    serve_metadata_requests(ends[1], reader.step);
  }
  ::close(ends[1]);
  if (pid < 0) {
    ::close(ends[0]);
    return false;
  }
  reader.pid = pid;
  reader.socket = ends[0];
  reader.parent = ::getpid();
  return true;
}

// Ends the reader (`kill`: it is alive and must go); its exit status.
int stop_reader(bool kill) {
  if (kill) ::kill(reader.pid, SIGKILL);
  ::close(reader.socket);
  int status = 0;
  while (::waitpid(reader.pid, &status, 0) < 0 && errno == EINTR) {
  }
  reader.pid = -1;
  reader.socket = -1;
  return status;
}

}  // namespace

void check_metadata_in_child(const std::string& path, const std::vector<std::string>& datasets) {
  const std::lock_guard<std::mutex> lock(reader_mutex);
  std::vector<std::string> request{path};
  request.insert(request.end(), datasets.begin(), datasets.end());
  bool sent = false;
  for (int attempt = 0; attempt < 2 && !sent; ++attempt) {  // a reader that ended since its last request is replaced
    if (reader.pid <= 0 && !start_reader()) return;  // no process to spare: the file is read here, as before
    *reader.step = -1;
    sent = send_strings(reader.socket, request);
    if (!sent) stop_reader(true);
  }
  if (!sent) return;
  pollfd answer{reader.socket, POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  int ready = 0;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    ready = ::poll(&answer, 1, int(std::max<std::int64_t>(left.count(), 0)));
    if (ready >= 0 || errno != EINTR) break;
  }
  char done = 0;
  int sig = 0;
  const int where = *reader.step;
  if (ready > 0 && receive_all(reader.socket, &done, 1)) {
    if (done == read_through) return;
    stop_reader(true);  // HDF5 failed mid-open there: the next file gets a fresh reader
  } else {
    if (ready <= 0) {  // still reading after a minute (a slow file system, or HDF5 in a loop): read it here
      stop_reader(true);
      return;
    }
    const int status = stop_reader(false);  // it ended mid-request
    if (WIFSIGNALED(status)) sig = WTERMSIG(status);
    else if (WIFEXITED(status) && WEXITSTATUS(status) > crashed_exit) sig = WEXITSTATUS(status) - crashed_exit;
    if (std::find(std::begin(crash_signals), std::end(crash_signals), sig) == std::end(crash_signals)) return;
  }
  unsigned major = 0, minor = 0, release = 0;
  hdf5_version(major, minor, release);
  const std::string hdf5 = "HDF5 " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  const bool in_dataset = where >= 0 && std::size_t(where) < datasets.size();
  const std::string what = sig ? " crashes (" + signal_name(sig) + ") reading it"
                               : std::string(" asks for over ") + metadata_memory_text + " of memory reading it";
  throw InputError(path + (in_dataset ? ": dataset '" + datasets[std::size_t(where)] + "'" : std::string()) +
                   ": damaged HDF5 metadata: " + hdf5 + what + (in_dataset ? "" : " (opening the file)") +
                   " (cvest reads it first in a separate process" + (sig ? "" : ", with that limit") +
                   "); h5py and other tools on this HDF5 may " + (sig ? "crash on the file" : "take that memory") + " too");
}

}  // namespace cvest::io
