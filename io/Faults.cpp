#include "io/Faults.hpp"

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

// "POINT[=N][@RANK]" split: POINT, N ("" if none), whether RANK is this one.
bool fault_here(std::string_view& point, std::string_view& value) {
  const std::string& f = fault();
  if (f.empty()) return false;
  const std::size_t at = f.find('@');
  const int rank = at == std::string::npos ? 0 : std::atoi(f.c_str() + at + 1);
  const std::string_view where = std::string_view(f).substr(0, at);
  const std::size_t eq = where.find('=');
  point = where.substr(0, eq);
  value = eq == std::string_view::npos ? std::string_view() : where.substr(eq + 1);
  return rank == launcher_rank();
}
}  // namespace

bool fault_injected(std::string_view point) {
  std::string_view where, value;
  return fault_here(where, value) && where == point;
}

long fault_value(std::string_view point) {
  std::string_view where, value;
  if (!fault_here(where, value) || where != point || value.empty()) return -1;
  return std::atol(std::string(value).c_str());
}

void stop_if_injected(std::string_view step) {
  std::string_view where, value;
  if (!fault_here(where, value) || value != step) return;
  if (where == "kill_at") ::raise(SIGKILL);
  if (where == "interrupt_at") ::raise(SIGINT);
}

void slow_write_if_injected() {
  if (!fault_injected("slow_write")) return;
  const long ms = fault_value("slow_write");
  ::usleep(useconds_t(ms > 0 ? ms : 300) * 1000);
}

}  // namespace cvest::io
