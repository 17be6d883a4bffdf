#include "io/os/Faults.hpp"

#include <csignal>
#include <cstdlib>
#include <unistd.h>
#include <string>

namespace cvest::io {

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(name); value && *value) return std::atoi(value);
  return 0;
}

namespace {
const std::string& fault() {
  static const std::string value = [] {
    const char* v = std::getenv("CVEST_FAULT");
    return std::string(v ? v : "");
  }();
  return value;
}

// Each of the comma-separated "POINT[=N][@RANK]" entries on this rank, split:
// calls `on(POINT, N)` ("" if none) until it returns true.
template <class On>
bool for_each_fault_here(On&& on) {
  std::string_view rest = fault();
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::size_t at = entry.find('@');
    const int rank = at == std::string_view::npos ? 0 : std::atoi(std::string(entry.substr(at + 1)).c_str());
    const std::string_view where = entry.substr(0, at);
    const std::size_t eq = where.find('=');
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : where.substr(eq + 1);
    if (rank == launcher_rank() && on(where.substr(0, eq), value)) return true;
  }
  return false;
}
}  // namespace

bool fault_injected(std::string_view point) {
  return for_each_fault_here([&](std::string_view where, std::string_view) { return where == point; });
}

long fault_value(std::string_view point) {
  long found = -1;
  for_each_fault_here([&](std::string_view where, std::string_view value) {
    if (where != point || value.empty()) return false;
    found = std::atol(std::string(value).c_str());
    return true;
  });
  return found;
}

void stop_if_injected(std::string_view step) {
  int sig = 0;
  for_each_fault_here([&](std::string_view where, std::string_view value) {
    if (value != step) return false;
    sig = where == "kill_at" ? SIGKILL : where == "interrupt_at" ? SIGINT : where == "terminate_at" ? SIGTERM : 0;
    return sig != 0;
  });
  if (sig) ::raise(sig);
}

void slow_write_if_injected() {
  if (!fault_injected("slow_write")) return;
  const long ms = fault_value("slow_write");
  ::usleep(useconds_t(ms > 0 ? ms : 300) * 1000);
}

}  // namespace cvest::io
