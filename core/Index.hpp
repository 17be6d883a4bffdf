#pragma once
// cvest's index type.
#include <cstdint>

namespace cvest {

// 64-bit indices everywhere a T*N*K count can pass 2^32 (200 x 10M x 5 does).
using Index = std::int64_t;

}  // namespace cvest
