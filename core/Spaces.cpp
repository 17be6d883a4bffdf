#include "core/Spaces.hpp"

namespace cvest {

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
  return facts;
}

}  // namespace cvest
