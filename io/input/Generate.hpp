#pragma once
// What `cvest generate` and a deck's [input] generate write: a reproducible
// input of this shape (io/input/Generator.hpp writes it). Free of Kokkos and HDF5, so
// the deck parser includes it with the host compiler in Cuda builds.
#include "core/Names.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cvest {

// uniform: every value drawn on its own (multBy in [0.5, 1.5), discount in
// [0.05, 1)), which no codec shrinks much; smooth: values that compress the
// way users' do: discount factors exp(-r * t / 365) falling smoothly with
// the date t (a day each), r drawn per id and column in [0.5%, 8%), and
// multipliers of two decimals in [0.5, 1.5].
enum class GeneratedValues { uniform, smooth };

struct GenerateSpec {
  Index dates = 0, ids = 0, cols = 0;
  std::uint64_t seed = 1;
  Precision precision = Precision::f64;
  GeneratedValues values = GeneratedValues::uniform;
};

inline std::string_view to_string(GeneratedValues values) {
  return values == GeneratedValues::uniform ? "uniform" : "smooth";
}

inline GeneratedValues generated_values_from_name(std::string_view name) {
  if (name == "uniform") return GeneratedValues::uniform;
  if (name == "smooth") return GeneratedValues::smooth;
  throw std::invalid_argument("unknown values '" + std::string(name) + "'; valid: uniform, smooth");
}

}  // namespace cvest
