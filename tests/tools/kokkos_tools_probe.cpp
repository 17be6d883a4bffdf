// A Kokkos Tools library for the tests (loaded with KOKKOS_PROFILE_LIBRARY):
// records every kernel and region label cvest's kernels reach a tool with,
// and whether callbacks ever interleaved between threads or regions were
// popped out of order, which the tools people use (kernel timer,
// space-time-stack) do not survive. Writes what it saw to the file named by
// CVEST_TOOLS_PROBE_OUT at finalize:
//   max_in_flight N           most kernels/deep copies in flight at once
//   interleaved N             callbacks from one thread while another thread
//                             had a kernel or region open
//   unbalanced_regions N      pops without a push, plus pushes never popped
//   kernel LABEL COUNT        one line per parallel_for/reduce/scan label
//   region LABEL COUNT
// The callbacks' signatures are Kokkos' C profiling interface (3.x and 4.x).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace {
// Tools keep one stack of open kernels and regions: a callback from another
// thread while one thread has a kernel or region open interleaves two stacks.
std::mutex probe_mutex;
std::map<std::string, long> kernels, regions;
int open_kernels = 0, max_open_kernels = 0;
long open_regions = 0, unbalanced = 0, interleaved = 0;
std::thread::id owner;

void enter() {  // with probe_mutex held
  if (open_kernels + open_regions > 0 && std::this_thread::get_id() != owner) ++interleaved;
  if (open_kernels + open_regions == 0) owner = std::this_thread::get_id();
}
void begin(const char* label) {
  const std::lock_guard<std::mutex> lock(probe_mutex);
  enter();
  max_open_kernels = std::max(max_open_kernels, ++open_kernels);
  if (label) ++kernels[label];
}
void end() {
  const std::lock_guard<std::mutex> lock(probe_mutex);
  enter();
  --open_kernels;
}
}  // namespace

struct SpaceHandle {
  char name[64];
};

extern "C" {
void kokkosp_init_library(int, std::uint64_t, std::uint32_t, void*) {}

void kokkosp_begin_parallel_for(const char* label, std::uint32_t, std::uint64_t* id) { *id = 0, begin(label); }
void kokkosp_end_parallel_for(std::uint64_t) { end(); }
void kokkosp_begin_parallel_reduce(const char* label, std::uint32_t, std::uint64_t* id) { *id = 0, begin(label); }
void kokkosp_end_parallel_reduce(std::uint64_t) { end(); }
void kokkosp_begin_parallel_scan(const char* label, std::uint32_t, std::uint64_t* id) { *id = 0, begin(label); }
void kokkosp_end_parallel_scan(std::uint64_t) { end(); }
void kokkosp_begin_deep_copy(SpaceHandle, const char*, const void*, SpaceHandle, const char*, const void*,
                             std::uint64_t) {
  begin(nullptr);
}
void kokkosp_end_deep_copy() { end(); }

void kokkosp_push_profile_region(const char* label) {
  const std::lock_guard<std::mutex> lock(probe_mutex);
  enter();
  ++regions[label];
  ++open_regions;
}
void kokkosp_pop_profile_region() {
  const std::lock_guard<std::mutex> lock(probe_mutex);
  enter();
  if (open_regions == 0) ++unbalanced;
  else --open_regions;
}

void kokkosp_finalize_library() {
  const char* path = std::getenv("CVEST_TOOLS_PROBE_OUT");
  std::FILE* out = path ? std::fopen(path, "w") : stderr;
  if (!out) return;
  std::fprintf(out, "max_in_flight %d\ninterleaved %ld\nunbalanced_regions %ld\n", max_open_kernels, interleaved,
               unbalanced + open_regions);
  for (const auto& [label, count] : kernels) std::fprintf(out, "kernel %s %ld\n", label.c_str(), count);
  for (const auto& [label, count] : regions) std::fprintf(out, "region %s %ld\n", label.c_str(), count);
  if (out != stderr) std::fclose(out);
}
}
