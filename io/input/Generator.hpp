#pragma once
// The input `cvest generate` and a deck's [input] generate write (its
// spec: io/input/Generate.hpp, which the deck parser includes without HDF5).
#include "io/input/Generate.hpp"

#include <cstdint>
#include <string>

namespace cvest::io {

// Writes multBy and discount with reproducible values, one block of dates at
// a time (never the whole cube), chunked. Temporary file, then rename.
void generate_input(const std::string& path, const GenerateSpec& spec, bool overwrite);

// The value generate_input writes at flat index `index` of `stream` (0:
// multBy, 1: discount), as `spec.values` says: tests recompute it. The
// uniform draw alone: generated_value(seed, stream, index).
double generated_value(const GenerateSpec& spec, int stream, std::uint64_t index);
double generated_value(std::uint64_t seed, int stream, std::uint64_t index);

// What it will take on disk (for the free-space check).
double generated_bytes(const GenerateSpec& spec);

}  // namespace cvest::io
