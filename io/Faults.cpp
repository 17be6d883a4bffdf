#include "io/Faults.hpp"

#include <cstdlib>
#include <string>

namespace cvest::io {

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(name); value && *value) return std::atoi(value);
  return 0;
}

bool fault_injected(std::string_view point) {
  static const std::string fault = [] {
    const char* value = std::getenv("CVEST_FAULT");
    return std::string(value ? value : "");
  }();
  if (fault.empty()) return false;
  const std::size_t at = fault.find('@');
  const std::string_view where = std::string_view(fault).substr(0, at);
  const int rank = at == std::string::npos ? 0 : std::atoi(fault.c_str() + at + 1);
  return where == point && rank == launcher_rank();
}

}  // namespace cvest::io
