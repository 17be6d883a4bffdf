#pragma once
// The execution spaces this build enables, as a type list (tests run every
// kernel on each), and plain facts about the build for reports.
#include <Kokkos_Core.hpp>

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
};

BuildFacts build_facts();  // needs Kokkos initialised

}  // namespace cvest
