#pragma once
// The execution spaces this build enables, as a type list (tests run every
// kernel on each), and plain facts about the build and the machine for
// reports (a report says where its figures were measured).
#include <Kokkos_Core.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <tuple>

namespace cvest {

using EnabledSpaces = decltype(std::tuple_cat(
#ifdef KOKKOS_ENABLE_SERIAL
    std::tuple<Kokkos::Serial>{},
#endif
#ifdef KOKKOS_ENABLE_OPENMP
    std::tuple<Kokkos::OpenMP>{},
#endif
#ifdef KOKKOS_ENABLE_THREADS
    std::tuple<Kokkos::Threads>{},
#endif
#ifdef KOKKOS_ENABLE_CUDA
    std::tuple<Kokkos::Cuda>{},
#endif
    std::tuple<>{}));

struct BuildFacts {
  std::string backend;         // the default execution space, e.g. "OpenMP"
  std::string kokkos_version;  // e.g. "3.4.1"
  std::string spaces;          // every enabled execution space, e.g. "Serial, OpenMP"
  int threads = 0;             // concurrency of the default execution space
  std::string host_vectors;    // the host loops' vectors: "32-byte (AVX2)" (streaming::vectors_text)
  std::string host;            // host name
  std::string cpu;             // CPU model from /proc/cpuinfo ("" where unknown)
  int cpus = 0;                // logical CPUs online
  double memory_bytes = 0;     // physical memory
  std::string gpu;             // Cuda builds: the device's name, compute capability, memory
};

BuildFacts build_facts();  // needs Kokkos initialised

// CVEST_HOST_VECTORS unset, 16, or 32 where the CPU and build have 32-byte
// vectors; else InputError. Checked once, before any kernel, where the
// command line and Python start (app/main.cpp, python/module.cpp).
void check_host_vectors_setting();

// Memory the host can give now without swapping (/proc/meminfo's
// MemAvailable), bytes; 0 where it cannot be read.
double available_memory_bytes();

// The CPU model from /proc/cpuinfo ("" where unknown).
std::string cpu_model();
// The first CPU's `field` in /proc/cpuinfo ("cpu family", "model"); "" where none.
std::string cpuinfo_value(const std::string& field);

// Asks Linux for transparent huge pages over a large host array not yet
// touched (madvise MADV_HUGEPAGE; the kernel's default mode, "madvise",
// gives them only where asked). NumPy asks for its large arrays, so without
// this cvest's benchmark arrays ran on 4 KiB pages beside NumPy's 2 MiB ones
// (the same kernel 10% slower on them). No-op elsewhere.
void advise_huge_pages(const void* data, std::size_t bytes);
nlohmann::json machine_json(const BuildFacts& facts);  // {"host", "cpu", "cpus", "memory_bytes", "gpu"}

}  // namespace cvest
