#pragma once
// What `cvest generate` and a deck's [input] generate write: a reproducible
// input of this shape (io/Generator.hpp writes it). Free of Kokkos and HDF5, so
// the deck parser includes it with the host compiler in Cuda builds.
#include "core/Names.hpp"

#include <cstdint>

namespace cvest {

struct GenerateSpec {
  Index dates = 0, ids = 0, cols = 0;
  std::uint64_t seed = 1;
  Precision precision = Precision::f64;
};

}  // namespace cvest
