// One Catch2 main for every test: Kokkos is initialised once, for all of them.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "core/Plan.hpp"

#include <Kokkos_Core.hpp>

#include <cstring>
#include <optional>

int main(int argc, char* argv[]) {
  cvest::return_freed_buffers_to_the_system();  // as cvest does
  // Listing tests (catch_discover_tests does, at build time) needs no Kokkos,
  // and Kokkos' start-up warnings would otherwise be read as test names.
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::strncmp(argv[i], "--list", 6) == 0;
  std::optional<Kokkos::ScopeGuard> kokkos;
  if (!listing) kokkos.emplace(argc, argv);
  return Catch::Session().run(argc, argv);
}
