#include "core/Spaces.hpp"

#include "core/Errors.hpp"
#include "core/StreamingStores.hpp"

#include <cstdio>

#include <fmt/format.h>

#include <cstdint>
#include <fstream>
#include <unistd.h>
#ifdef __linux__
#include <sys/mman.h>
#endif
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace cvest {

std::string cpuinfo_value(const std::string& field) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(name.find_last_not_of(" \t") + 1);  // "model\t\t: 2"
    if (name != field) continue;
    const auto value = line.find_first_not_of(" \t", colon + 1);
    return value == std::string::npos ? "" : line.substr(value);
  }
  return "";
}

std::string cpu_model() { return cpuinfo_value("model name"); }

namespace {

std::string gpu_description() {
#ifdef KOKKOS_ENABLE_CUDA
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "";
  return fmt::format("{} (sm_{}{}, {:.0f} GiB)", prop.name, prop.major, prop.minor,
                     double(prop.totalGlobalMem) / double(1ull << 30));
#else
  return "";
#endif
}

}  // namespace

void check_host_vectors_setting() {
  const std::string vectors = streaming::host_vectors_env();
  if (!vectors.empty() && vectors != "16" && vectors != "32")
    throw InputError("CVEST_HOST_VECTORS: expected 16 or 32 (bytes a host vector takes), found '" + vectors + "'");
  if (vectors == "32" && !streaming::wide_vectors_possible())
    throw InputError("CVEST_HOST_VECTORS=32: 32-byte vectors need AVX2 and streaming stores, which this CPU or build lacks");
}

BuildFacts build_facts() {
  BuildFacts facts;
  facts.backend = Kokkos::DefaultExecutionSpace::name();
  facts.kokkos_version = std::to_string(KOKKOS_VERSION / 10000) + "." +
                         std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
                         std::to_string(KOKKOS_VERSION % 100);
  std::apply([&](auto... space) { ((facts.spaces += (facts.spaces.empty() ? "" : ", ") +
                                                    std::string(decltype(space)::name())), ...); },
             EnabledSpaces{});
  facts.threads = Kokkos::DefaultExecutionSpace().concurrency();
  facts.host_vectors = streaming::vectors_text();
  if (std::string(streaming::host_vectors_env()) == "16" && streaming::wide_vectors_possible())
    facts.host_vectors += " (CVEST_HOST_VECTORS=16)";
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) facts.host = host;
  facts.cpu = cpu_model();
  facts.cpus = int(sysconf(_SC_NPROCESSORS_ONLN));
  facts.memory_bytes = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  facts.gpu = gpu_description();
  return facts;
}

double available_memory_bytes() {
  double kib = 0;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
    std::fclose(f);
  }
  return kib * 1024;
}

nlohmann::json machine_json(const BuildFacts& facts) {
  return {{"host", facts.host}, {"cpu", facts.cpu}, {"cpus", facts.cpus}, {"memory_bytes", facts.memory_bytes},
          {"gpu", facts.gpu}};
}

void advise_huge_pages(const void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t huge = std::uintptr_t(2) << 20;
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + huge - 1) & ~(huge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) & ~(huge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice: failure is harmless
#else
  (void)data, (void)bytes;
#endif
}

}  // namespace cvest
